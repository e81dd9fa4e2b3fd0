"""The conv family's kernels and forward: the implicit GEMM (`gemm_kernel`), the depthwise stencil
(`depthwise_kernel`), both with the epilogue (a folded batchnorm, then the pointwise steps, their parameter operands
read at the output's coordinates), and the forward that picks one per call (`render`), then pools if the op says so.

Both kernels take the same run-time parameters after their pointers' first four (x, w, bias, y): the folded
batchnorm's statistics, weight, bias and eps, then each epilogue operand with its strides over (n, co, oh, ow)."""

from __future__ import annotations

import inspect
from string import Template

from kernelcraft.propose.builtin.codegen import indent, num
from kernelcraft.propose.builtin.families import pool
from kernelcraft.propose.builtin.families.conv import direct, operands, shifted
from kernelcraft.propose.builtin.families.conv.implicit_gemm import SIZE_HELPERS, TILE, taps_loop
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

# The implicit GEMM: the tile prologue, a K loop ($kloop: _PACKED_K or _TAPS_K, the rest shared), bias, the epilogue.
_GEMM = Template('''
# program (tile, group): output pixels rm (n, oh, ow) x out-channels co of one group
$tile
n = rm // (OH * OW)
pix = rm % (OH * OW)
oh = pix // OW
ow = pix % OW
ih0 = oh * SH - PH
iw0 = ow * SW - PW
x_row = (n.to(tl.int64) * C + g * CPG) * H * W  # start of image n, first channel of the group
mmask = rm < M
nmask = rn < COPG
acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
$kloop
x = acc
if HAS_BIAS:
    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
$epilogue
out = (n.to(tl.int64) * CO * OH * OW + pix)[:, None] + (co.to(tl.int64) * OH * OW)[None, :]
tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
''')

# K = (channel, kh, kw) packed: each step decodes its K indices and gathers a 2-D patch; w is (CO, K).
_PACKED_K = '''for k0 in range(0, K, BLOCK_K):
    kk = k0 + tl.arange(0, BLOCK_K)
    c = kk // (KH * KW)
    r = kk % (KH * KW)
    ih = ih0[:, None] + (r // KW * DH)[None, :]
    iw = iw0[:, None] + (r % KW * DW)[None, :]
    amask = mmask[:, None] & (kk < K)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    a = tl.load(x_ptr + x_row[:, None] + (c * H * W)[None, :] + ih * W + iw, mask=amask, other=0.0)
    b = tl.load(w_ptr + co.to(tl.int64)[None, :] * K + kk[:, None], mask=(kk < K)[:, None] & nmask[None, :],
                other=0.0)
    acc = tl.dot(a, b, acc, input_precision=PREC)'''

# K = taps (kh, kw) x the group's in-channels in BLOCK_K chunks (implicit_gemm.taps_loop: the layout choices); w is
# (CO, KH, KW, CPG), permuted by the forward.
_TAPS_K = taps_loop("KH * KW", (("ih", "ih0 + tap // KW * DH", "H"), ("iw", "iw0 + tap % KW * DW", "W")),
                    "cin * H * W", "ih * W + iw")

_DEPTHWISE = Template('''
# program (plane n*C + c, output tile): a direct stencil over one channel, taps unrolled, read from L1/L2
plane = tl.program_id(0).to(tl.int64)
c = plane % C
n_tw = tl.cdiv(OW, BLOCK_W)
oh = (tl.program_id(1) // n_tw) * BLOCK_H + tl.arange(0, BLOCK_H)
ow = (tl.program_id(1) % n_tw) * BLOCK_W + tl.arange(0, BLOCK_W)
x_plane = x_ptr + plane * H * W
acc = tl.zeros([BLOCK_H, BLOCK_W], dtype=tl.float32)
for kh in tl.static_range(KH):
    ih = oh * SH - PH + kh * DH
    for kw in tl.static_range(KW):
        iw = ow * SW - PW + kw * DW
        m = ((ih >= 0) & (ih < H))[:, None] & ((iw >= 0) & (iw < W))[None, :]
        v = tl.load(x_plane + ih[:, None] * W + iw[None, :], mask=m, other=0.0).to(tl.float32)
        acc += v * tl.load(w_ptr + c * (KH * KW) + kh * KW + kw).to(tl.float32)
x = acc
if HAS_BIAS:
    x += tl.load(b_ptr + c).to(tl.float32)
$epilogue
out = y_ptr + plane * OH * OW + oh[:, None] * OW + ow[None, :]
tl.store(out, x.to(y_ptr.dtype.element_ty), mask=(oh < OH)[:, None] & (ow < OW)[None, :])
''')

NDIM = 4  # the kernels' output dims, (n, co, oh, ow): an operand's strides (families/conv/operands.py)
_BN_PARAMS = ("bn_mean_ptr", "bn_var_ptr", "bn_w_ptr", "bn_b_ptr", "bn_eps")
_BN_ARGS = ("bn_mean", "bn_var", "bn_w", "bn_b", "bn_eps")


def bn_lines(bn: dict | None, ch: str, mask: str | None) -> list[str]:
    """Kernel lines applying a folded eval batchnorm to the fp32 tile x: channel(s) `ch` (a vector of out-channels
    masked by `mask`, or one channel), (x - mean) * rsqrt(var + eps) [* weight] [+ bias], before the epilogue."""
    if not bn:
        return []
    m, row = (f", mask={mask}, other=0.0", "[None, :]") if mask else ("", "")
    v = f", mask={mask}, other=1.0" if mask else ""
    lines = [f"mu = tl.load(bn_mean_ptr + {ch}{m}).to(tl.float32)",
             f"scale = tl.rsqrt(tl.load(bn_var_ptr + {ch}{v}).to(tl.float32) + bn_eps)"]
    if bn.get("weight"):
        lines.append(f"scale = scale * tl.load(bn_w_ptr + {ch}{m}).to(tl.float32)")
    lines.append(f"x = (x - mu{row}) * scale{row}")
    if bn.get("bias"):
        lines.append(f"x = x + tl.load(bn_b_ptr + {ch}{m}).to(tl.float32){row}")
    return lines


def _depthwise_load(k: int) -> str:
    """Operand k at the depthwise kernel's tile: plane (n, c) one value, rows oh, columns ow."""
    return operands.load(k, [({0: "(plane // C)", 1: "c"}, ""), ({2: "oh"}, "[:, None]"), ({3: "ow"}, "[None, :]")],
                         "(oh < OH)[:, None] & (ow < OW)[None, :]")


def gemm_load(k: int) -> str:
    return operands.tile_load(k, ("oh", "ow"))


def _extra(op: Op) -> tuple[str, ...]:
    """The kernels' run-time parameters after x, w, bias and y: a folded batchnorm's, then the epilogue operands'."""
    return (_BN_PARAMS if op.detail.get("bn") else ()) + operands.params(op, NDIM)


def _epilogue(op: Op, ch: str, mask: str | None, load) -> str:
    d = op.detail
    return "\n".join(bn_lines(d.get("bn"), ch, mask) + epilogue_lines(d.get("steps") or [], load))


# the implicit GEMM's sizes, strides, padding and dilation (run-time parameters, or constexprs under a move's
# compiled_sizes)
SIZES = ("M", "C", "H", "W", "CO", "OH", "OW", "K", "CPG", "COPG", "SH", "SW", "PH", "PW", "DH", "DW")
SIZE_ARGS = ("M", "C", "H", "W", "CO", "OH", "OW", "K", "CPG", "COPG", "sh", "sw", "ph", "pw", "dh", "dw")  # forward's


def gemm_kernel(op: Op, names: Names, taps: bool = False, compiled: bool = False) -> TritonKernel:
    """The op's implicit GEMM with its epilogue: the packed (channel, kh, kw) K loop over w as (CO, CPG, KH, KW), or
    (`taps`) the taps loop over w as (CO, KH, KW, CPG); both take the same parameters. Its scalars: the numbers the
    epilogue reads from the module, its first parameters. `compiled`: SIZES are constexprs (a build per shape)."""
    return TritonKernel(
        names("kc_conv2d_taps_kernel" if taps else "kc_conv2d_kernel"),
        ("x_ptr", "w_ptr", "b_ptr", "y_ptr", *_extra(op), *(() if compiled else SIZES)),
        ("KH", "KW", "HAS_BIAS", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC", *operands.flags(op),
         *(SIZES if compiled else ())),
        _GEMM.substitute(tile=TILE, kloop=_TAPS_K if taps else _PACKED_K,
                         epilogue=_epilogue(op, "co", "nmask", gemm_load)), Scalars.of(op))


def kernels(op: Op, names: Names, compiled: bool = False) -> tuple[TritonKernel, TritonKernel, TritonKernel]:
    """The op's implicit-GEMM (packed K), depthwise and implicit-GEMM (taps K) kernels, each with the op's epilogue.
    The two GEMMs differ only in their K loop and take the same parameters (the taps one a permuted weight);
    `compiled`: their sizes are constexprs."""
    depthwise = TritonKernel(
        names("kc_dwconv2d_kernel"),
        ("x_ptr", "w_ptr", "b_ptr", "y_ptr", *_extra(op), "C", "H", "W", "OH", "OW", "SH", "SW", "PH", "PW", "DH",
         "DW"),
        ("KH", "KW", "HAS_BIAS", "BLOCK_H", "BLOCK_W"),
        _DEPTHWISE.substitute(epilogue=_epilogue(op, "c", None, _depthwise_load)), Scalars.of(op))
    return gemm_kernel(op, names, compiled=compiled), depthwise, gemm_kernel(op, names, taps=True, compiled=compiled)


def _hyper(op: Op) -> str:
    """The forward's lines binding (sh, sw), (ph, pw), (dh, dw) and groups: a 1-D conv's lifted to a one-row 2-D
    conv's; read from the module at run time when the op names one."""
    d = op.detail
    if d.get("module") and op.kind == "conv1d":
        conv = attr(d["module"])
        return (f"(sh, sw), (dh, dw), groups = (1, *{conv}.stride), (1, *{conv}.dilation), {conv}.groups\n"
                f"(ph, pw) = (0, *kc_conv_padding({conv}.padding, (dw,), (KW,)))")
    if d.get("module"):
        conv = attr(d["module"])
        return (f"(sh, sw), (dh, dw), groups = {conv}.stride, {conv}.dilation, {conv}.groups\n"
                f"(ph, pw) = kc_conv_padding({conv}.padding, (dh, dw), (KH, KW))")
    groups = attr(d["groups_attr"]) if d.get("groups_attr") else int(d["groups"])
    return "(sh, sw), (ph, pw), (dh, dw), groups = {}, {}, {}, {}".format(
        *(tuple(int(v) for v in d[k]) for k in ("stride", "padding", "dilation")), groups)


def _bn_binding(bn: dict) -> str:
    """The forward's line binding the folded batchnorm's tensors and eps (an absent weight or bias: the mean, unread)."""
    mean = attr(bn["running_mean"])
    eps = attr(bn["eps_attr"]) if bn.get("eps_attr") else num(bn["eps"])
    weight = attr(bn["weight"]) if bn.get("weight") else mean
    bias = attr(bn["bias"]) if bn.get("bias") else mean
    return (f"{', '.join(_BN_ARGS)} = {mean}, {attr(bn['running_var'])}, {weight}, {bias}, float({eps})  "
            "# folded batchnorm\n")


def _operand_lines(op: Op) -> str:
    """The forward's lines binding each epilogue operand and its strides over the kernels' (n, co, oh, ow)."""
    one_d = op.kind == "conv1d"
    return operands.lines(op, f"([] if unbatched else [N]) + [CO] + {'[]' if one_d else '[OH]'} + [OW]",
                          f"([] if unbatched else [0]) + {'[1, 3]' if one_d else '[1, 2, 3]'}", NDIM)


def render(op: Op, p, names: Names) -> Rendered:
    """conv2d / conv1d on tiles `p` (the family's ConvTiles); a pooling that follows is the pool family's kernel
    on its first move, over the conv's output."""
    d = op.detail
    bm, bn, bk, group = int(p.BLOCK_M), int(p.BLOCK_N), int(p.BLOCK_K), int(p.GROUP_M)
    compiled = bool(p.compiled_sizes)
    gemm, depthwise, taps = kernels(op, names, compiled)
    extra = list(_BN_ARGS if d.get("bn") else []) + operands.args(op, NDIM)
    bias = attr(d["bias"]) if d.get("bias") else "None"
    one_d = op.kind == "conv1d"  # run as a 2-D conv over a one-row image: x (N, C, 1, L), w (CO, CPG, 1, K)
    if d.get("bn"):  # batch_norm would take dim 1 of an unbatched input as the channels
        batch = "if unbatched:  # batch_norm would take dim 1 as the channels\n" \
                "    raise ValueError('a batchnorm folded into a conv needs a batched input')"
    else:
        batch = "if unbatched:\n    x = x.reshape(1, *x.shape)"
    if one_d:
        batch += ("\nx = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])  # (N, C, L) as one-row images"
                  "\nw = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])")
    dw_launch = depthwise.launch(
        "grid", ["x", "w.contiguous()", "x if bias is None else bias", "y", *extra, "C", "H", "W", "OH", "OW", "sh",
                 "sw", "ph", "pw", "dh", "dw"],
        {"KH": "KH", "KW": "KW", "HAS_BIAS": "bias is not None", "BLOCK_H": "bh", "BLOCK_W": "bw"}, num_warps=4)
    def gemm_launch(kernel):
        return kernel.launch(
            "grid", ["x", "w", "x if bias is None else bias", "y", *extra, *(() if compiled else SIZE_ARGS)],
            {"KH": "KH", "KW": "KW", "HAS_BIAS": "bias is not None", "BLOCK_M": bm, "BLOCK_N": "bn", "BLOCK_K": bk,
             "GROUP_M": group, "PREC": "prec", **operands.flag_consts(op),
             **(dict(zip(SIZES, SIZE_ARGS)) if compiled else {})}, num_warps=int(p.num_warps),
            num_stages=int(p.num_stages))

    use_taps = p.k_order == "taps"
    shifted_blocks = ()
    if use_taps:  # the taps K loop where a group's in-channels fill a chunk; fewer: the packed K wastes less
        launch = (f"if CPG >= {bk}:  # taps K loop over w as (CO, KH, KW, CPG): each tap's channel chunk contiguous\n"
                  f"        w = w.permute(0, 2, 3, 1).contiguous()\n        {gemm_launch(taps)}\n"
                  f"    else:  # fewer in-channels per group than a K step: the packed (channel, kh, kw) K\n"
                  f"        {gemm_launch(gemm)}")
    elif p.k_order == "shifted":  # the shifted-rows GEMM where it applies, the direct kernel where it does, else packed
        rows = shifted.kernel("hw", names, _extra(op), operands.flags(op), _epilogue(op, "co", "nmask", gemm_load),
                              Scalars.of(op), compiled=compiled)
        split = shifted.split_kernel("hw", names)
        # the direct kernel for few in-channels, where the epilogue is one it applies (conv/direct.py)
        near = (direct.kernel("hw", names, _epilogue(op, "co", "nmask", None), Scalars.of(op), direct.TILES_2D)
                if direct.fits(op) else None)
        lines = direct.first_move("hw", shifted.lines("hw", rows, split, extra, operands.flag_consts(op)), near,
                                  direct.TILES_2D, f"# the packed implicit GEMM\n{gemm_launch(gemm)}")
        launch = indent(lines, 4).lstrip()
        shifted_blocks = (*shifted.BLOCKS, split, rows, *((near,) if near is not None else ()))
    else:
        launch = gemm_launch(gemm)
    result = "x =" if d.get("pool") else "return"  # pooled: the conv's output is the pool's input
    body = f'''
{_bn_binding(d["bn"]) if d.get("bn") else ""}w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == {3 - one_d}
{batch}
N, C, H, W = x.shape
CO, CPG, KH, KW = w.shape
{_hyper(op)}
OH = kc_conv_out_size(H, KH, sh, ph, dh)
OW = kc_conv_out_size(W, KW, sw, pw, dw)
y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
{_operand_lines(op)}if y.numel() > 0 and groups == C and CO == C:  # depthwise: a direct stencil per channel plane
    bh, bw = min(16, triton.next_power_of_2(OH)), min(64, triton.next_power_of_2(OW))
    grid = (N * C, triton.cdiv(OH, bh) * triton.cdiv(OW, bw))
    {dw_launch}
elif y.numel() > 0:
    w = w.contiguous()
    M, K, COPG = N * OH * OW, CPG * KH * KW, CO // groups
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{p.precision}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
    grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
    {launch}
{"y = y.reshape(y.shape[0], y.shape[1], y.shape[3])" + chr(10) if one_d else ""}{result} y.reshape(y.shape[1:]) if unbatched else y'''
    helpers = [inspect.getsource(f) for f in SIZE_HELPERS] + ([operands.HELPER] if operands.count(op) else [])
    gemms = ((gemm, depthwise, taps) if use_taps else (gemm, depthwise)) + shifted_blocks
    if not d.get("pool"):
        return Rendered((*helpers, *gemms), body)
    pool_op = Op("pool2d", d["pool"])
    pooled = pool.render(pool_op, pool.moves(pool_op)[0], names)  # launched next, reading the conv's output as x
    return Rendered((*helpers, *gemms, *pooled.blocks), body + "\n" + pooled.body)
