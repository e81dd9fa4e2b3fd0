"""Convolution family (conv2d and conv1d, any stride/padding/dilation/groups, with a pointwise epilogue): implicit
GEMM. A 1-D convolution runs as a 2-D one over one-row images (views of x and the weight, no copy).

The convolution is a GEMM that is never materialized: M = N*OH*OW output pixels, N = the out-channels of a
group, K = (in-channels of a group)*KH*KW. A program owns a BLOCK_M x BLOCK_N tile of outputs (GROUP_M
swizzle over tiles so neighbouring programs share input rows and weights in L2); each K step gathers the
BLOCK_M x BLOCK_K patch of the input it needs straight from x (padding is a mask, no im2col buffer) and the
matching weights, and accumulates tl.dot in fp32. Bias, an eval batchnorm that follows (folded in: a
per-channel scale and shift from its running statistics) and the pointwise steps after them in the reference
(relu, gelu, scaling, ...) are applied to the fp32 tile before its only store. A pooling
that follows (conv -> relu -> max-pool) is the pool family's kernel over the conv's output, launched next.

A depthwise convolution (groups == in == out channels) is no GEMM: it takes a direct stencil kernel instead,
a program per (image, channel) plane tile with the taps unrolled, in fp32.

Precision: "ieee" is exact fp32 on the FMA units; "tf32x3" splits each fp32 operand into a TF32 part and a
TF32 remainder and sums three tensor-core products, which keeps fp32-grade accuracy (about 1e-6 relative);
"tf32" rounds inputs to TF32 (10-bit mantissa) and is offered only under a policy that admits TF32.

conv3d.py and conv_transpose.py build on this module's moves (conv_moves), tile prologue (TILE), hyper-parameter
lines (hyper_lines) and size helpers.
"""

from __future__ import annotations

import inspect

from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.triton_families import pool
from kernelcraft.propose.builtin.codegen import attr, indent, num
from kernelcraft.propose.builtin.steps import epilogue_lines


GATHER = "gather input patches straight from x (padding as a mask, no im2col buffer)"


def conv_moves(op: Op, formulation: str = "Implicit GEMM: " + GATHER, outputs: str = "pixels",
               gemm: str = "implicit GEMM") -> list[tuple]:
    """The convolution families' moves: tiles, exact fp32, 3xTF32 and (relaxed only) TF32. `formulation` opens
    the exact moves' text, `gemm` names it in the tensor-core moves', `outputs` names the GEMM's rows (pixels,
    voxels, ...)."""
    tile = "{m}x{n} output tiles (" + outputs + " x out-channels), {k}-wide K steps, {w} warps, {s} stages"
    exact = (formulation + ", " + tile + ", exact fp32 products on the FMA units, bias and epilogue fused before the "
             "one store")
    split = ("3xTF32 tensor cores at fp32 accuracy: each operand split into a TF32 part and a TF32 remainder, three "
             "products per step (error ~1e-6 relative); " + gemm + ", " + tile)
    tf32 = ("TF32 tensor cores (inputs rounded to a 10-bit mantissa, needs a policy that admits TF32): " + gemm + ", "
            + tile)

    def p(m, n, k, w, s, prec):
        return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": s,
                "precision": prec}

    # Order and tiles from benchmarks/conv_sweep.py on an H100 (AlexNet's first layer): K steps of 16 win. The
    # 64x128 tile takes 3 stages: with 4, Triton 3.6 built it wrong on the H100 (level2/conv2d_add_sigmoid off by 8e-2).
    out = [(split.format(m=128, n=128, k=16, w=8, s=3), "compute", p(128, 128, 16, 8, 3, "tf32x3")),
           (exact.format(m=256, n=128, k=16, w=8, s=3), "parallelism", p(256, 128, 16, 8, 3, "ieee")),
           (split.format(m=256, n=128, k=16, w=8, s=3), "compute", p(256, 128, 16, 8, 3, "tf32x3")),
           (exact.format(m=64, n=128, k=16, w=4, s=3), "memory", p(64, 128, 16, 4, 3, "ieee")),
           (exact.format(m=128, n=128, k=32, w=8, s=3), "parallelism", p(128, 128, 32, 8, 3, "ieee"))]
    for m, n, k, w, s in ((128, 128, 16, 8, 3), (256, 128, 16, 8, 3), (64, 128, 16, 4, 3)):
        out.append((tf32.format(m=m, n=n, k=k, w=w, s=s), "precision", p(m, n, k, w, s, "tf32")))
    return out


def precision(p: dict) -> str:
    """A move's tl.dot input precision, checked."""
    prec = str(p.get("precision", "ieee"))
    if prec not in ("ieee", "tf32x3", "tf32"):
        raise ValueError(f"unknown conv precision {prec!r}")
    return prec


# The prologue of the implicit-GEMM kernels: program (tile, group) -> rows rm x out-channels rn of one group, the
# tiles swizzled GROUP_M rows at a time so neighbouring programs share input rows and weights in L2.
TILE = '''    pid = tl.program_id(0)
    g = tl.program_id(1)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(COPG, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co = g * COPG + rn'''


def hyper_lines(d: dict, names: tuple, spatial: tuple, padding_strings: bool = True) -> str:
    """Generated lines binding a conv's hyper-parameters: `names` (e.g. ("stride", "dilation")) as tuples of the
    `spatial` axis letters ("(sd, sh, sw,) = ..."), and `groups`; read from the module at run time when the op
    names one (padding through kc_conv_padding, which resolves "same"/"valid", unless not `padding_strings`), else
    the op's values."""
    def var(name):  # ("stride", "hw") -> "(sh, sw,)"; output_padding's letters are "op"
        return "(" + ", ".join({"output_padding": "op"}.get(name, name[0]) + a for a in spatial) + ",)"
    if d.get("module"):
        conv = attr(d["module"])
        resolve = padding_strings and "padding" in names
        lines = [f"{var(n)} = {conv}.{n}" for n in names if n != "padding" or not resolve]
        lines.append(f"groups = {conv}.groups")
        if resolve:  # after the dilation, which "same" padding needs
            kernel = "(" + ", ".join("K" + a.upper() for a in spatial) + ",)"
            lines.append(f"{var('padding')} = kc_conv_padding({conv}.padding, {var('dilation')}, {kernel})")
        return "\n".join(lines)
    groups = attr(d["groups_attr"]) if d.get("groups_attr") else int(d["groups"])
    return "\n".join([f"{var(n)} = {tuple(int(v) for v in d[n])}" for n in names] + [f"groups = {groups}"])


_CONV = '''
@triton.jit
def kc_conv2d_kernel(${scalars}x_ptr, w_ptr, b_ptr, y_ptr, M, C, H, W, CO, OH, OW, K, CPG, COPG, SH, SW, PH, PW, DH, DW,
                     KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr):
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
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        c = kk // (KH * KW)
        r = kk % (KH * KW)
        ih = ih0[:, None] + (r // KW * DH)[None, :]
        iw = iw0[:, None] + (r % KW * DW)[None, :]
        amask = mmask[:, None] & (kk < K)[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        a = tl.load(x_ptr + x_row[:, None] + (c * H * W)[None, :] + ih * W + iw, mask=amask, other=0.0)
        b = tl.load(w_ptr + co.to(tl.int64)[None, :] * K + kk[:, None], mask=(kk < K)[:, None] & nmask[None, :],
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
    x = acc
    if HAS_BIAS:
        x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[None, :]
$steps
    out = (n.to(tl.int64) * CO * OH * OW + pix)[:, None] + (co.to(tl.int64) * OH * OW)[None, :]
    tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])
'''


_DEPTHWISE = '''
@triton.jit
def kc_dwconv2d_kernel(${scalars}x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, OH, OW, SH, SW, PH, PW, DH, DW, KH: tl.constexpr,
                       KW: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
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
$steps
    out = y_ptr + plane * OH * OW + oh[:, None] * OW + ow[None, :]
    tl.store(out, x.to(y_ptr.dtype.element_ty), mask=(oh < OH)[:, None] & (ow < OW)[None, :])
'''


def _render_conv(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = precision(p)
    epilogue = d.get("steps") or []  # its parameter operands (x + self.bias) read at the output's coordinates
    n_ops = len(operand_refs(epilogue))
    gemm_load = ("tl.load(o{k}_ptr + n.to(tl.int64)[:, None] * o{k}_s0 + co[None, :] * o{k}_s1 + (oh * o{k}_s2 + ow "
                 "* o{k}_s3)[:, None], mask=mmask[:, None] & nmask[None, :], other=0.0).to(tl.float32)")
    dw_load = ("tl.load(o{k}_ptr + (plane // C) * o{k}_s0 + c * o{k}_s1 + oh[:, None] * o{k}_s2 + ow[None, :] * "
               "o{k}_s3, mask=(oh < OH)[:, None] & (ow < OW)[None, :], other=0.0).to(tl.float32)")
    kernel = _CONV.replace("$tile", TILE).replace("$steps", _bn_lines(d.get("bn"), "co", "nmask")
                           + indent("\n".join(epilogue_lines(epilogue, lambda k: gemm_load.format(k=k))), 4))
    depthwise = _DEPTHWISE.replace("$steps", _bn_lines(d.get("bn"), "c", None)
                                   + indent("\n".join(epilogue_lines(epilogue, lambda k: dw_load.format(k=k))), 4))
    s = Scalars.of(op)  # the numbers the epilogue reads from the module: both kernels' first parameters
    kernel, depthwise = s.fill(kernel), s.fill(depthwise)
    bias = attr(d["bias"]) if d.get("bias") else "None"
    one_d = op.kind == "conv1d"  # run as a 2-D conv over a one-row image: x (N, C, 1, L), w (CO, CPG, 1, K)
    if d.get("module") and one_d:  # hyper-parameters as the module holds them at run time
        conv = attr(d["module"])
        hyper = f"(sh, sw), (dh, dw), groups = (1, *{conv}.stride), (1, *{conv}.dilation), {conv}.groups\n" \
                f"(ph, pw) = (0, *kc_conv_padding({conv}.padding, (dw,), (KW,)))"
    elif d.get("module"):
        conv = attr(d["module"])
        hyper = f"(sh, sw), (dh, dw), groups = {conv}.stride, {conv}.dilation, {conv}.groups\n" \
                f"(ph, pw) = kc_conv_padding({conv}.padding, (dh, dw), (KH, KW))"
    else:
        groups = attr(d["groups_attr"]) if d.get("groups_attr") else int(d["groups"])
        hyper = "(sh, sw), (ph, pw), (dh, dw), groups = {}, {}, {}, {}".format(
            *(tuple(int(v) for v in d[k]) for k in ("stride", "padding", "dilation")), groups)
    one_row = ("\nx = x.reshape(x.shape[0], x.shape[1], 1, x.shape[2])  # (N, C, L) as one-row images"
               "\nw = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])") if one_d else ""
    body = f'''
w, bias = {attr(d["weight"])}, {bias}
unbatched = x.dim() == {3 - one_d}
if unbatched:
    x = x.reshape(1, *x.shape){one_row}
N, C, H, W = x.shape
CO, CPG, KH, KW = w.shape
{hyper}
OH = kc_conv_out_size(H, KH, sh, ph, dh)
OW = kc_conv_out_size(W, KW, sw, pw, dw)
y = torch.empty((N, CO, max(OH, 0), max(OW, 0)), dtype=x.dtype, device=x.device)
if y.numel() > 0 and groups == C and CO == C:  # depthwise: a direct stencil per channel plane
    bh, bw = min(16, triton.next_power_of_2(OH)), min(64, triton.next_power_of_2(OW))
    grid = (N * C, triton.cdiv(OH, bh) * triton.cdiv(OW, bw))
    kc_dwconv2d_kernel[grid]({s.params}x, w.contiguous(), x if bias is None else bias, y, C, H, W, OH, OW, sh, sw, ph, pw, dh,
                             dw, KH=KH, KW=KW, HAS_BIAS=bias is not None, BLOCK_H=bh, BLOCK_W=bw, num_warps=4)
elif y.numel() > 0:
    w = w.contiguous()
    M, K, COPG = N * OH * OW, CPG * KH * KW, CO // groups
    bn = min({bn}, max(16, triton.next_power_of_2(COPG)))
    prec = "{prec}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 take the tensor cores as they are
    grid = (triton.cdiv(M, {bm}) * triton.cdiv(COPG, bn), groups)
    kc_conv2d_kernel[grid]({s.params}x, w, x if bias is None else bias, y, M, C, H, W, CO, OH, OW, K, CPG, COPG, sh, sw, ph, pw,
                           dh, dw, KH=KH, KW=KW, HAS_BIAS=bias is not None, BLOCK_M={bm}, BLOCK_N=bn,
                           BLOCK_K={bk}, GROUP_M={group}, PREC=prec, num_warps={int(p["num_warps"])},
                           num_stages={int(p["num_stages"])})
{"y = y.reshape(y.shape[0], y.shape[1], y.shape[3])" + chr(10) if one_d else ""}return y.reshape(y.shape[1:]) if unbatched else y'''
    if n_ops:  # each operand with its strides over the output's dims (n, co, oh, ow), to both kernels
        refs = ", ".join(attr(r[1]) for r in operand_refs(epilogue))
        params = ", ".join(f"o{i}_ptr, o{i}_s0, o{i}_s1, o{i}_s2, o{i}_s3" for i in range(n_ops))
        kernel, depthwise = (k.replace("b_ptr, y_ptr,", f"b_ptr, y_ptr, {params},", 1) for k in (kernel, depthwise))
        body = body.replace("x if bias is None else bias, y, ", "x if bias is None else bias, y, *epi_args, ")
        out_dims = "[1, 3]" if one_d else "[1, 2, 3]"
        body = body.replace("if y.numel() > 0 and groups == C", f"""shape = ([] if unbatched else [N]) + [CO] + \
{"[]" if one_d else "[OH]"} + [OW]  # the output's, as the reference has it
epi_args = [a for o in [{refs}] for a in kc_operand_args(o, shape, ([] if unbatched else [0]) + {out_dims})]
if y.numel() > 0 and groups == C""", 1)
    if d.get("bn"):  # the batchnorm's running statistics, weight, bias and eps go to both kernels
        bn = d["bn"]
        mean = attr(bn["running_mean"])
        eps = attr(bn["eps_attr"]) if bn.get("eps_attr") else num(bn["eps"])
        kernel, depthwise = (k.replace("b_ptr, y_ptr,", "b_ptr, y_ptr, bn_mean_ptr, bn_var_ptr, bn_w_ptr, bn_b_ptr, "
                                       "bn_eps,", 1) for k in (kernel, depthwise))
        body = body.replace("x if bias is None else bias, y, ", "x if bias is None else bias, y, *bn_args, ")
        body = body.replace("if unbatched:\n", "if unbatched:  # batch_norm would take dim 1 as the channels\n"
                            "    raise ValueError('a batchnorm folded into a conv needs a batched input')\n", 1)
        body = (f"bn_args = ({mean}, {attr(bn['running_var'])}, {attr(bn['weight']) if bn.get('weight') else mean}, "
                f"{attr(bn['bias']) if bn.get('bias') else mean}, float({eps}))  # folded batchnorm\n") + body
    helpers = [_OUT_SIZE] + ([inspect.getsource(kc_operand_args)] if n_ops else [])
    if not d.get("pool"):
        return [*helpers, kernel, depthwise], body
    # Pooled: the conv (with its epilogue) into a scratch tensor, then the pool family's kernel over it.
    pool_op = Op("pool2d", d["pool"])
    pool_kernels, pool_body = pool.KINDS["pool2d"][1](pool_op, pool.KINDS["pool2d"][0](pool_op)[0][2])
    body = body.replace("return y.reshape(y.shape[1:]) if unbatched else y",
                        "x = y.reshape(y.shape[1:]) if unbatched else y") + "\n" + pool_body
    return [*helpers, kernel, depthwise, *pool_kernels], body


def kc_operand_args(o, shape, dims):
    """An epilogue operand o and its strides broadcast to the output's `shape` (0 on broadcast dims), placed at the
    kernel's dims `dims` of (n, co, oh, ow) (0 on the others). One that would broadcast the output itself is refused."""
    lead = len(shape) - o.dim()
    if lead < 0 or any(o.shape[k] != 1 and o.shape[k] != shape[lead + k] for k in range(o.dim())):
        raise ValueError(f"an operand of shape {tuple(o.shape)} broadcasts beyond the output {tuple(shape)}")
    st = [0] * len(shape)
    for k in range(o.dim()):
        st[lead + k] = 0 if o.shape[k] == 1 else o.stride(k)
    out = [0, 0, 0, 0]
    for j in range(len(dims)):
        out[dims[j]] = st[j]
    return [o, *out]


def _bn_lines(bn: dict | None, ch: str, mask: str | None) -> str:
    """Kernel lines applying a folded eval batchnorm to the fp32 tile x: channel(s) `ch` (a vector of out-channels
    masked by `mask`, or one channel), (x - mean) * rsqrt(var + eps) [* weight] [+ bias], before the epilogue."""
    if not bn:
        return ""
    m, row = (f", mask={mask}, other=0.0", "[None, :]") if mask else ("", "")
    v = f", mask={mask}, other=1.0" if mask else ""
    lines = [f"mu = tl.load(bn_mean_ptr + {ch}{m}).to(tl.float32)",
             f"scale = tl.rsqrt(tl.load(bn_var_ptr + {ch}{v}).to(tl.float32) + bn_eps)"]
    if bn.get("weight"):
        lines.append(f"scale = scale * tl.load(bn_w_ptr + {ch}{m}).to(tl.float32)")
    lines.append(f"x = (x - mu{row}) * scale{row}")
    if bn.get("bias"):
        lines.append(f"x = x + tl.load(bn_b_ptr + {ch}{m}).to(tl.float32){row}")
    return indent("\n".join(lines), 4) + "\n"


_OUT_SIZE = '''
def kc_conv_out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def kc_conv_padding(padding, dilation, kernel):
    """A module's padding as two ints ("valid": none; "same": half the dilated kernel, odd extents only)."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        if any(d * (k - 1) % 2 for d, k in zip(dilation, kernel)):
            raise ValueError("padding='same' with an even dilated kernel pads unevenly; not supported")
        return tuple(d * (k - 1) // 2 for d, k in zip(dilation, kernel))
    return tuple(padding)
'''

KINDS = {"conv2d": (conv_moves, _render_conv), "conv1d": (conv_moves, _render_conv)}
