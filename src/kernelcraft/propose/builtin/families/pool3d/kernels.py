"""The pool3d family's kernels, over a contiguous x seen as [planes, D, H, W] (planes: N * C, or C unbatched).

`windowed`: max / avg / adaptive pooling, each output walking its window (or adaptive bin) tap by tap, masked loads
standing for the padding. The outputs are numbered by q = plane * OD + od (a (plane, depth) slice), oh and ow; a
program takes a tile [BLOCK_Q slices, BLOCK_H rows, BLOCK_W columns] of them (the taps of neighbouring outputs meet
in L1/L2), or a flat run of BLOCK outputs that decode their (q, oh, ow). Window sizes, strides, padding and dilation
are the op's own constants (taps unrolled); adaptive bins are computed per output from the run-time sizes.

`global_pool`: an adaptive pooling to (1, 1, 1), a global average (or max) pool: one reduction per plane over its
D * H * W contiguous elements (the pool family's plane_reduce: the rows family's reduce kernel, vector loads),
BLOCK_Q planes per program (more where planes are shorter than BLOCK), in BLOCK-wide steps of fp32 lanes reduced
once at the end; few large planes are split over programs and combined by a second launch. A window without
padding or dilation that is found at run time to be the whole volume takes the same path.

Max pooling propagates NaN as torch does (a NaN tap wins and is never replaced); avg pooling divides by torch's
count (the window clipped to the padded input, or to the input itself without count_include_pad).
"""

from __future__ import annotations

import inspect
from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.pool.kernels import WHOLE_WINDOW, plane_reduce
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars

UNROLL_TAPS = 64  # windows of more taps keep the depth loop a loop (the rows and columns stay unrolled)
AXES = ("d", "h", "w")


def kc_pool3d_out(size, kernel, stride, padding, dilation, ceil_mode):
    """Output length along one axis of an input `size` long for a max / avg pooling, by torch's rules: with
    ceil_mode the last window must still start inside the input or its left padding."""
    n = (size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + padding:
        n -= 1
    return n


def is_global(op: Op) -> bool:
    """An adaptive pooling to one output per plane (a global average or max pool)."""
    d = op.detail
    return d["pool"].startswith("adaptive") and list(d["output_size"]) == [1, 1, 1]


def _max(op: Op) -> bool:
    return op.detail["pool"] in ("max", "adaptive_max")


# NaN wins, as in torch: one instruction a tap (max.NaN), not two compares and a select (MaxPool3d's 43 5% faster
# on an H100, 3.74 -> 3.56 ms; the 2-D pool family keeps the select, which was 2% faster there)
_MAX_COMBINE = "tl.maximum(acc, v, propagate_nan=tl.PropagateNan.ALL)"

_TILE_INDEX = '''
# outputs [BLOCK_Q slices, BLOCK_H rows, BLOCK_W cols]; slice q = plane * OD + od (int64: no offset overflow)
pid = tl.program_id(0)
tw = pid % n_tw
th = (pid // n_tw) % n_th
tq = pid // (n_tw * n_th)
q = (tq * BLOCK_Q + tl.arange(0, BLOCK_Q)).to(tl.int64)[:, None, None]
oh = (th * BLOCK_H + tl.arange(0, BLOCK_H))[None, :, None]
ow = (tw * BLOCK_W + tl.arange(0, BLOCK_W))[None, None, :]
valid = (q < Q) & (oh < OH) & (ow < OW)'''

_FLAT_INDEX = '''
# BLOCK consecutive outputs, each decoding its slice q = plane * OD + od, row and column (int64 throughout)
o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
valid = o < n_out
ow = o % OW
oh = (o // OW) % OH
q = o // (OW * OH)'''

_WINDOWED = Template('''$index
od = q % OD
plane = x_ptr + (q // OD) * D * H * W
$bounds
acc = tl.full(valid.shape, $init, tl.float32)
for kd in $loop_d:
    d = ds + kd$dil_d
    dok = valid & (d >= 0) & (d < $end_d)
    for kh in $loop_h:
        h = hs + kh$dil_h
        hok = dok & (h >= 0) & (h < $end_h)
        for kw in $loop_w:
            w = ws + kw$dil_w
            ok = hok & (w >= 0) & (w < $end_w)
            v = tl.load(plane + (d * H + h) * W + w, mask=ok, other=$init$hint).to(tl.float32)
            acc = $combine
tl.store(y_ptr + (q * OH + oh) * OW + ow, ($final).to(y_ptr.dtype.element_ty), mask=valid)
''')


def _window(op: Op) -> tuple[list[str], dict]:
    """The kernel lines giving each output's window (ds, hs, ws, and for an average its divisor) and the template's
    per-axis slots."""
    d = op.detail
    sizes = {"d": ("D", "OD", "od"), "h": ("H", "OH", "oh"), "w": ("W", "OW", "ow")}
    sub, lines = {}, []
    if d["pool"].startswith("adaptive"):  # bin i: [floor(i * size / out), ceil((i + 1) * size / out))
        for a in AXES:
            size, out, o = sizes[a]
            lines += [f"{a}s = ({o} * {size}) // {out}", f"{a}e = (({o} + 1) * {size} + {out} - 1) // {out}"]
            sub.update({f"loop_{a}": f"range(0, K{a.upper()}_MAX)", f"dil_{a}": "", f"end_{a}": f"{a}e"})
        lines.append("div = ((de - ds) * (he - hs) * (we - ws)).to(tl.float32)")
        return lines, {**sub, "final": "acc" if _max(op) else "acc / div"}
    taps = d["kernel"][0] * d["kernel"][1] * d["kernel"][2]
    for i, a in enumerate(AXES):
        size, _, o = sizes[a]
        k, s, p, dil = (int(d[key][i]) for key in ("kernel", "stride", "padding", "dilation"))
        lines.append(f"{a}s = {o} * {s} - {p}")
        loop = "range" if a == "d" and taps > UNROLL_TAPS else "tl.static_range"
        sub.update({f"loop_{a}": f"{loop}({k})", f"dil_{a}": f" * {dil}" if dil != 1 else "", f"end_{a}": size})
    if d["pool"] == "max":
        return lines, {**sub, "final": "acc"}
    # torch's divisor: the window clipped to the padded input, or (without count_include_pad) to the input
    for i, a in enumerate(AXES):
        size = sizes[a][0]
        lines.append(f"{a}e = tl.minimum({a}s + {int(d['kernel'][i])}, {size} + {int(d['padding'][i])})")
    if d["count_include_pad"]:
        lines.append("div = ((de - ds) * (he - hs) * (we - ws)).to(tl.float32)")
    else:
        lines.append("div = ((tl.minimum(de, D) - tl.maximum(ds, 0)) * (tl.minimum(he, H) - tl.maximum(hs, 0))"
                     " * (tl.minimum(we, W) - tl.maximum(ws, 0))).to(tl.float32)")
    return lines, {**sub, "final": "acc / div"}


def _sizes_lines(op: Op) -> list[str]:
    """The forward's lines giving the output sizes OD, OH, OW from the input's D, H, W."""
    d = op.detail
    if d["pool"].startswith("adaptive"):
        outs = [size if want is None else str(int(want)) for size, want in zip(("D", "H", "W"), d["output_size"])]
        return [f"OD, OH, OW = {', '.join(outs)}"]
    calls = [f"kc_pool3d_out({size}, {int(d['kernel'][i])}, {int(d['stride'][i])}, {int(d['padding'][i])}, "
             f"{int(d['dilation'][i])}, {bool(d['ceil_mode'])})" for i, size in enumerate(("D", "H", "W"))]
    return [f"OD = {calls[0]}", f"OH = {calls[1]}", f"OW = {calls[2]}"]


_HEAD = '''
if x.dim() not in (4, 5):
    raise ValueError(f"3-D pooling takes (N, C, D, H, W) or (C, D, H, W), not {tuple(x.shape)}")
np2 = triton.next_power_of_2
D, H, W = x.shape[-3], x.shape[-2], x.shape[-1]'''


def windowed(op: Op, p, names: Names) -> Rendered:
    """Max / avg / adaptive pooling by windows: the tile or flat variant of `p`."""
    adaptive = op.detail["pool"].startswith("adaptive")
    bounds, sub = _window(op)
    tile = p.variant == "tile"
    init = '-float("inf")' if _max(op) else "0.0"
    body = _WINDOWED.substitute(index=_TILE_INDEX if tile else _FLAT_INDEX, bounds="\n".join(bounds), init=init,
                                combine=_MAX_COMBINE if _max(op) else "acc + v",
                                hint=', eviction_policy="evict_last"' if p.evict_last else "", **sub)
    sizes = ("Q", "D", "H", "W", "OD", "OH", "OW")
    bins = ("KD_MAX", "KH_MAX", "KW_MAX") if adaptive else ()
    grid_args = ("n_th", "n_tw") if tile else ("n_out",)
    kernel = TritonKernel(names("kc_pool3d_kernel"), ("x_ptr", "y_ptr", *sizes, *grid_args, *bins),
                          ("BLOCK_Q", "BLOCK_H", "BLOCK_W") if tile else ("BLOCK",), body, Scalars.of(op),
                          comment=f"{op.detail['pool']} pooling over (D, H, W), one output per lane")
    args = ["x", "y", *sizes, *grid_args, *(b.lower() for b in bins)]
    warps = int(p.num_warps)
    if tile:
        launch = f'''bq, bh, bw = {int(p.BLOCK_Q)}, min({int(p.BLOCK_H)}, np2(OH)), min({int(p.BLOCK_W)}, np2(OW))
n_th, n_tw = triton.cdiv(OH, bh), triton.cdiv(OW, bw)
grid = (triton.cdiv(Q, bq) * n_th * n_tw,)
''' + kernel.launch("grid", args, {"BLOCK_Q": "bq", "BLOCK_H": "bh", "BLOCK_W": "bw"}, num_warps=warps)
    else:
        launch = (f"n_out = y.numel()\ngrid = (triton.cdiv(n_out, {int(p.BLOCK)}),)\n"
                  + kernel.launch("grid", args, {"BLOCK": int(p.BLOCK)}, num_warps=warps))
    # adaptive bins are at most ceil(size / out) + 1 long, exactly size / out when it divides
    spans = ["kd_max = triton.cdiv(D, OD) + (1 if D % OD else 0)", "kh_max = triton.cdiv(H, OH) + (1 if H % OH else 0)",
             "kw_max = triton.cdiv(W, OW) + (1 if W % OW else 0)"] if adaptive else []
    whole_blocks, whole = _whole_window(op)
    body = "\n".join([_HEAD, *_sizes_lines(op), "lead = x.shape[:-3]",
                      "y = torch.empty((*lead, OD, OH, OW), dtype=x.dtype, device=x.device)",
                      "Q = math.prod(lead) * OD", "if y.numel() == 0:", "    return y", *whole, *spans, launch,
                      "return y"])
    blocks = (kernel,) if adaptive else (inspect.getsource(kc_pool3d_out), *whole_blocks, kernel)
    return Rendered(blocks, body)


def global_pool(op: Op, p, names: Names) -> Rendered:
    """An adaptive pooling to (1, 1, 1): one reduction per plane (the global variant of `p`)."""
    blocks, lines = plane_reduce(_max(op), int(p.BLOCK), int(p.BLOCK_Q) * int(p.BLOCK), int(p.num_warps),
                                 "D * H * W")
    body = "\n".join([_HEAD, "lead = x.shape[:-3]",
                      "y = torch.empty((*lead, 1, 1, 1), dtype=x.dtype, device=x.device)",
                      "outer = math.prod(lead)", "if y.numel() == 0:", "    return y", lines])
    return Rendered(blocks, body)


def _whole_window(op: Op) -> tuple[tuple, list[str]]:
    """(blocks, forward lines) reducing each plane at once when the window, without padding or dilation, is found
    at run time to be the whole volume; nothing for other windows."""
    d = op.detail
    if d["pool"] not in ("max", "avg") or any(d["padding"]) or any(v != 1 for v in d["dilation"]):
        return (), []
    planes, block, warps = WHOLE_WINDOW
    blocks, lines = plane_reduce(_max(op), block, planes * block, warps, "D * H * W")
    window = tuple(int(k) for k in d["kernel"])
    return blocks, [f"if (D, H, W) == {window!r}:  # the window is the whole volume: a global pool",
                    "    outer = math.prod(lead)", indent(lines, 4)]


def render(op: Op, p, names: Names) -> Rendered:
    if p.variant == "global":
        if not is_global(op):
            raise ValueError(f"the global variant reduces whole planes; this {op.detail['pool']} pooling has "
                             "windows")
        return global_pool(op, p, names)
    return windowed(op, p, names)

