"""The pool family's kernel (one template: the output index of a tile or of a flat run, then the window walk of
max / avg / adaptive avg) and the forward that launches it. The op's geometry is a module-level constant of the
candidate (KC_POOL, through `names`) that kc_pool_out reads for the output sizes.

A global pool (an adaptive pooling to 1 x 1, or at run time a window without padding or dilation that is the whole
plane) is no window walk: each plane is one row of the rows family's reduce kernel (`plane_reduce`, shared with
pool3d), read in wide contiguous vector loads, several planes per program where they are small and a plane split
over programs (a second launch combining) where planes are few and large."""

from __future__ import annotations

import inspect
from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.rows.kernels import reduce_blocks, reduce_launches
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars


def kc_pool_out(size, axis, pool):
    """Output length along spatial axis `axis` (0: H, 1: W) of an input `size` long, for the pooling `pool` (a
    pool2d Op detail), by torch's rules. Used by the generated forward and by the tests."""
    if pool["pool"] == "adaptive_avg":
        want = pool["output_size"][axis]
        return size if want is None else want
    k, s, p, d = pool["kernel"][axis], pool["stride"][axis], pool["padding"][axis], pool["dilation"][axis]
    n = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if pool["ceil_mode"] else 0)) // s + 1
    if pool["ceil_mode"] and (n - 1) * s >= size + p:
        n -= 1  # with ceil_mode the last window must still start inside the input or its left padding
    return n


def is_global(op: Op) -> bool:
    """An adaptive pooling to one output per plane (a global average pool)."""
    d = op.detail
    return d["pool"] == "adaptive_avg" and list(d["output_size"]) == [1, 1]


def may_be_global(op: Op) -> bool:
    """A max / avg window that is the whole plane when the input is as large as the window: no padding, no
    dilation (the forward checks the sizes)."""
    d = op.detail
    return d["pool"] in ("max", "avg") and not any(d["padding"]) and all(v == 1 for v in d["dilation"])


GLOBAL_TARGET = 1024  # fewer row tiles than this: a plane is split over programs (few, large planes)
WHOLE_WINDOW = (1, 1024, 4)  # a window found at run time to be the whole plane: (planes, block, warps) per program


def plane_reduce(maximum: bool, block: int, tile: int, warps: int, size: str) -> tuple[tuple, str]:
    """(module-level blocks, forward lines): the contiguous x's planes (`outer` of them, `size` elements each: Python
    source) reduced by their max or mean into the contiguous y, then `return y`; rows of `block` elements per step,
    `tile` elements per program (tile // block planes at once, more where planes are shorter than `block`)."""
    kind = "max" if maximum else "mean"
    lines = reduce_launches(kind, f"float({size})", block, tile, warps, GLOBAL_TARGET, 256)
    return reduce_blocks(kind), f"R, inner, C = {size}, 1, y.numel()\n{lines}"


_TILE_INDEX = '''pid = tl.program_id(0)
tw = pid % n_tw
th = (pid // n_tw) % n_th
pg = pid // (n_tw * n_th)
p = (pg * BLOCK_P + tl.arange(0, BLOCK_P)).to(tl.int64)[:, None, None]
oh = (th * BLOCK_H + tl.arange(0, BLOCK_H))[None, :, None]
ow = (tw * BLOCK_W + tl.arange(0, BLOCK_W))[None, None, :]
valid = (p < P) & (oh < OH) & (ow < OW)'''

_FLAT_INDEX = '''o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
valid = o < P * OH * OW
ow = o % OW
oh = (o // OW) % OH
p = o // (OW * OH)'''

# The same with the sizes compiled in (PoolTiles.compiled_sizes): 32-bit offsets unless WIDE, which the forward sets
# where the input or the output has 2**30 elements or more (a tile's or a run's lanes past the end stay in range).
_TILE_INDEX_COMPILED = '''pid = tl.program_id(0)
tw = pid % n_tw
th = (pid // n_tw) % n_th
pg = pid // (n_tw * n_th)
p = pg * BLOCK_P + tl.arange(0, BLOCK_P)
if WIDE:
    p = p.to(tl.int64)
p = p[:, None, None]
oh = (th * BLOCK_H + tl.arange(0, BLOCK_H))[None, :, None]
ow = (tw * BLOCK_W + tl.arange(0, BLOCK_W))[None, None, :]
valid = (p < P) & (oh < OH) & (ow < OW)'''

_FLAT_INDEX_COMPILED = '''if WIDE:
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
else:
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
valid = o < P * OH * OW
ow = o % OW
oh = (o // OW) % OH
p = o // (OW * OH)'''
WIDE_AT = 2 ** 30  # elements in the input or output from which compiled-size kernels index in 64 bits

SIZES = ("P", "H", "W", "OH", "OW", "n_th", "n_tw", "KH_MAX", "KW_MAX")  # the kernel's sizes, run-time or compiled

_POOL = Template('''
$index
plane = x_ptr + p * H * W
$bounds
acc = tl.full(valid.shape, $init, tl.float32)
for kh in $loop_h:
    h = hs + kh$dil_h
    hok = valid & (h >= 0) & (h < $h_end)
    for kw in $loop_w:
        w = ws + kw$dil_w
        ok = hok & (w >= 0) & (w < $w_end)
        v = tl.load(plane + h * W + w, mask=ok, other=$init$hint).to(tl.float32)
        acc = $combine
tl.store(y_ptr + (p * OH + oh) * OW + ow, ($final).to(y_ptr.dtype.element_ty), mask=valid)
''')


def _body(op: Op, p) -> str:
    d = op.detail
    if d["pool"] == "adaptive_avg":  # bin i: [floor(i * H / OH), ceil((i + 1) * H / OH))
        bounds = ["hs = (oh * H) // OH", "he = ((oh + 1) * H + OH - 1) // OH",
                  "ws = (ow * W) // OW", "we = ((ow + 1) * W + OW - 1) // OW",
                  "div = ((he - hs) * (we - ws)).to(tl.float32)"]
        sub = {"loop_h": "range(0, KH_MAX)", "loop_w": "range(0, KW_MAX)", "dil_h": "", "dil_w": "",
               "h_end": "he", "w_end": "we", "final": "acc / div"}
    else:
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = d["kernel"], d["stride"], d["padding"], d["dilation"]
        bounds = [f"hs = oh * {int(sh)} - {int(ph)}", f"ws = ow * {int(sw)} - {int(pw)}"]
        sub = {"loop_h": f"tl.static_range({int(kh)})", "loop_w": f"tl.static_range({int(kw)})",
               "dil_h": f" * {int(dh)}" if dh != 1 else "", "dil_w": f" * {int(dw)}" if dw != 1 else "",
               "h_end": "H", "w_end": "W", "final": "acc"}
        if d["pool"] == "avg":  # torch: the window clipped to the padded input, or to the input itself
            bounds += [f"he = tl.minimum(hs + {int(kh)}, H + {int(ph)})",
                       f"we = tl.minimum(ws + {int(kw)}, W + {int(pw)})"]
            if d["count_include_pad"]:
                bounds.append("div = ((he - hs) * (we - ws)).to(tl.float32)")
            else:
                bounds.append("div = ((tl.minimum(he, H) - tl.maximum(hs, 0)) "
                              "* (tl.minimum(we, W) - tl.maximum(ws, 0))).to(tl.float32)")
            sub["final"] = "acc / div"
    if d["pool"] == "max":  # NaN wins, as in torch (a NaN tap replaces the max and is never replaced by a number).
        # Two compares and a select, not max.NaN (tl.maximum, NaN propagated): max.NaN has fewer instructions but was
        # slower on the 2-D pool and no faster on the 1-D; pool3d keeps it, faster there (evidence.py)
        sub.update(init='-float("inf")', combine="tl.where((v > acc) | (v != v), v, acc)")
    else:
        sub.update(init="0.0", combine="acc + v")
    if p.compiled_sizes:
        index = _TILE_INDEX_COMPILED if p.variant == "tile" else _FLAT_INDEX_COMPILED
    else:
        index = _TILE_INDEX if p.variant == "tile" else _FLAT_INDEX
    hint = ', eviction_policy="evict_last"' if p.evict_last else ""
    return _POOL.substitute(index=index, bounds="\n".join(bounds), hint=hint, **sub)


def _global(op: Op, p, names: Names) -> Rendered:
    """An adaptive pooling to 1 x 1: one row reduction per plane (the global variant of `p`)."""
    dims = int(op.detail.get("dims", 2))
    blocks, lines = plane_reduce(False, int(p.BLOCK), int(p.BLOCK_P) * int(p.BLOCK), int(p.num_warps), "H * W")
    return Rendered(blocks, f'''
H, W = ({"x.shape[-2]" if dims == 2 else "1"}), x.shape[-1]
lead = x.shape[:-{dims}]
y = torch.empty({"(*lead, 1, 1)" if dims == 2 else "(*lead, 1)"}, dtype=x.dtype, device=x.device)
outer = math.prod(lead)
if y.numel() == 0:
    return y
{lines}''')


def render(op: Op, p, names: Names) -> Rendered:
    """pool2d on `p` (the family's PoolTiles); the body reads x (N, C, H, W) / (C, H, W), or (N, C, L) / (C, L)."""
    d = op.detail
    if p.variant == "global":
        if not is_global(op):
            raise ValueError(f"the global variant reduces whole planes; this {d['pool']} pooling has windows")
        return _global(op, p, names)
    dims = int(d.get("dims", 2))
    geometry = names("KC_POOL")
    blocks = ("BLOCK_P", "BLOCK_H", "BLOCK_W", "BLOCK")
    sizes = SIZES if p.compiled_sizes else ()  # compiled in: constexprs, with WIDE (64-bit offsets)
    kernel = TritonKernel(names("kc_pool2d_kernel"), ("x_ptr", "y_ptr", *(s for s in SIZES if s not in sizes)),
                          (*sizes, *blocks, *("WIDE",) * p.compiled_sizes), _body(op, p), Scalars.of(op))
    warps = int(p.num_warps)
    if p.variant == "tile":
        head = f'''bp, bh = {int(p.BLOCK_P)}, min({int(p.BLOCK_H)}, np2(OH))
bw = min({int(p.BLOCK_H) * int(p.BLOCK_W)} // bh, np2(OW))  # rows the output lacks widen the tile (a 1-D pool: one row)
n_th, n_tw = triton.cdiv(OH, bh), triton.cdiv(OW, bw)
grid = (triton.cdiv(P, bp) * n_th * n_tw,)
'''
        values = dict(zip(SIZES, ("P", "H", "W", "OH", "OW", "n_th", "n_tw", "kh_max", "kw_max")))
        values.update(BLOCK_P="bp", BLOCK_H="bh", BLOCK_W="bw", BLOCK=1)
    else:
        head = f"grid = (triton.cdiv(y.numel(), {int(p.BLOCK)}),)\n"
        values = dict(zip(SIZES, ("P", "H", "W", "OH", "OW", "1", "1", "kh_max", "kw_max")))
        values.update(BLOCK_P=1, BLOCK_H=1, BLOCK_W=1, BLOCK=int(p.BLOCK))
    if p.compiled_sizes:
        values["WIDE"] = f"max(x.numel(), y.numel()) >= {WIDE_AT}"
    args = ["x", "y", *(str(values[k]) for k in kernel.params[2:])]
    launch = head + kernel.launch("grid", args, {k: values[k] for k in kernel.constexprs}, num_warps=warps)
    reduce_blocks_, whole = (), ""
    if may_be_global(op):  # a window that is the whole plane: one row reduction per plane instead
        planes, block, warps_ = WHOLE_WINDOW
        reduce_blocks_, lines = plane_reduce(d["pool"] == "max", block, planes * block, warps_, "H * W")
        whole = f"if (H, W) == {(int(d['kernel'][0]), int(d['kernel'][1]))!r}:\n    outer = P\n" + indent(lines, 4)
    body = f'''
np2 = triton.next_power_of_2
H, W = ({"x.shape[-2]" if dims == 2 else "1"}), x.shape[-1]
OH, OW = kc_pool_out(H, 0, {geometry}), kc_pool_out(W, 1, {geometry})
lead = x.shape[:-{dims}]
y = torch.empty({"(*lead, OH, OW)" if dims == 2 else "(*lead, OW)"}, dtype=x.dtype, device=x.device)
P = math.prod(lead)
if y.numel() == 0:
    return y
{whole}
# adaptive bins: at most ceil(size / out) + 1 long, exactly size / out when it divides (unused otherwise)
kh_max = triton.cdiv(H, OH) + (1 if H % OH else 0)
kw_max = triton.cdiv(W, OW) + (1 if W % OW else 0)
{launch}
return y'''
    return Rendered((inspect.getsource(kc_pool_out), f"{geometry} = {d!r}", *reduce_blocks_, kernel), body)
