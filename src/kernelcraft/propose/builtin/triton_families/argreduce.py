"""Arg-reduction family (argmax, argmin; the indices of torch.max/min over a dim) over a contiguous x seen as
[outer, R, inner], like rows.py: a program takes BLOCK_C columns and walks R in BLOCK_R tiles, keeping a running
(value, first index, seen NaN) per column. torch's rules: ties give the first index, and a NaN counts as the
extreme (the first NaN's index wins). With few columns R is split over programs and the partial (value, index)
pairs are combined in split order by a second launch of the same kernel."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.families.rows.columns import COLUMNS, TILES


def _argreduce_moves(op: Op) -> list[tuple]:
    row = ("Whole reduced extent in one tile when it fits (up to {m} values; short rows packed {t} per program): "
           "extreme and first index found in registers from one read; {w} warps")
    tiled = ("Reduced dim walked in {b}-element tiles with a running (value, first index) carry per column; few "
             "columns split the reduced dim over programs (aim: {s}), partial pairs combined in order; {w} warps")
    base = {"ROW_MAX": 16384, "BLOCK_R": 1024, "TILE": 4096, "num_warps": 4, "split_target": 2048}
    return [
        (row.format(m=16384, t=4096, w=4), "memory", base),
        (row.format(m=16384, t=4096, w=8), "memory", {**base, "num_warps": 8}),
        (tiled.format(b=1024, s=2048, w=4), "parallelism", {**base, "ROW_MAX": 0}),
        (tiled.format(b=4096, s=8192, w=8), "parallelism",
         {**base, "ROW_MAX": 0, "BLOCK_R": 4096, "TILE": 8192, "num_warps": 8, "split_target": 8192}),
        ("One program per column tile walks the whole reduced dim in 1024-element tiles: no partial buffers, a "
         "single launch", "control", {**base, "ROW_MAX": 0, "split_target": 0}),
    ]


_ARGREDUCE = Template('''
@triton.jit
def kc_${name}_kernel(x_ptr, xi_ptr, v_ptr, i_ptr, R, inner, C, chunk, BLOCK_R: tl.constexpr,
                      BLOCK_C: tl.constexpr, GATHER: tl.constexpr, PARTIAL: tl.constexpr):
    # program (column tile, split): R-range [split * chunk, split * chunk + chunk). GATHER: x holds partial
    # values and xi their indices (the combining launch); PARTIAL: write the value as well as the index.
$columns
    lo = tl.program_id(1) * chunk
    hi = tl.minimum(lo + chunk, R)
    best_v = tl.full([BLOCK_C], $ident, tl.float32)
    best_i = tl.zeros([BLOCK_C], tl.int64) + lo
    best_nan = tl.zeros([BLOCK_C], tl.int32)
    for start in range(lo, hi, BLOCK_R):
        rr = start + r
        mask = (rr < hi)[:, None] & cmask[None, :]
        offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
        x = tl.load(x_ptr + offs, mask=mask, other=$ident).to(tl.float32)
        nan = (x != x) & mask
        m = tl.$red(tl.where(nan, $ident, x), 0)  # the tile's extreme among numbers
        tile_nan = tl.max(nan.to(tl.int32), 0) > 0
        hit = tl.where(tile_nan[None, :], nan, (x == m[None, :]) & mask)
        if GATHER:  # partial pairs: their stored indices
            idx = tl.load(xi_ptr + offs, mask=mask, other=0)
            first = tl.min(tl.where(hit, idx, 9223372036854775807), 0)  # ties: the first index
        else:  # the first hit's row within the tile, in 32 bits, made an index once per column
            first = start + tl.min(tl.where(hit, r[:, None], BLOCK_R), 0).to(tl.int64)
        take = (best_nan == 0) & (tile_nan | (m $cmp best_v))  # strictly better: earlier tiles keep ties
        best_v = tl.where(take, tl.where(tile_nan, float("nan"), m), best_v)
        best_i = tl.where(take, first, best_i)
        best_nan = tl.where(take & tile_nan, 1, best_nan)
    out = tl.program_id(1).to(tl.int64) * C + c
    tl.store(i_ptr + out, best_i, mask=cmask)
    if PARTIAL:
        tl.store(v_ptr + out, best_v, mask=cmask)
''')


def _render_argreduce(op: Op, p: dict) -> tuple[list[str], str]:
    kind = op.detail["op"]
    if kind not in ("argmax", "argmin"):
        raise ValueError(f"unknown arg-reduction {kind!r}")
    mx = kind == "argmax"
    kernel = _ARGREDUCE.substitute(name=kind, columns=COLUMNS, ident='-float("inf")' if mx else 'float("inf")',
                                   red="max" if mx else "min", cmp=">" if mx else "<")
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
    keep = bool(op.detail.get("keepdim"))
    row_max, block_r, tile = int(p["ROW_MAX"]), int(p["BLOCK_R"]), int(p["TILE"])
    warps, target = int(p["num_warps"]), int(p["split_target"])
    launch = f"kc_{kind}_kernel"
    body = f'''
dim = {dim}
if dim is None:  # the index into the flattened input
    R, inner, shape = x.numel(), 1, {"[1] * x.dim()" if keep else "[]"}
else:
    d = dim % max(x.dim(), 1)
    R, inner, shape = (x.shape[d] if x.dim() else 1), math.prod(x.shape[d + 1:]), list(x.shape)
    if x.dim():
        {"shape[d] = 1" if keep else "del shape[d]"}
y = torch.empty(shape, dtype=torch.int64, device=x.device)
C = y.numel()
if C == 0:
    return y
br, bc, single = kc_tiles(max(R, 1), C, inner, {row_max}, {block_r}, {tile})
col_tiles = triton.cdiv(C, bc)
splits = 1
if not single and col_tiles < {target}:
    splits = max(1, min(triton.cdiv(R, br), triton.cdiv({target}, col_tiles), 1024))
chunk = triton.cdiv(triton.cdiv(max(R, 1), splits), br) * br
splits = triton.cdiv(max(R, 1), chunk)
warps = min(16, {warps} * max(1, br * bc // {tile}))
if splits == 1:
    {launch}[(col_tiles, 1)](x, x, y, y, R, inner, C, chunk, BLOCK_R=br, BLOCK_C=bc, GATHER=False, PARTIAL=False,
        num_warps=warps)
    return y
part_v = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # per split: extreme (NaN if any)
part_i = torch.empty((splits, C), dtype=torch.int64, device=x.device)  # and its first index
{launch}[(col_tiles, splits)](x, x, part_v, part_i, R, inner, C, chunk, BLOCK_R=br, BLOCK_C=bc, GATHER=False,
    PARTIAL=True, num_warps=warps)
br, bc, _ = kc_tiles(splits, C, C, 0, {block_r}, {tile})
{launch}[(triton.cdiv(C, bc), 1)](part_v, part_i, y, y, splits, C, C, splits, BLOCK_R=br, BLOCK_C=bc, GATHER=True,
    PARTIAL=False, num_warps={warps})
return y'''
    return [TILES, kernel], body


KINDS = {"argreduce": (_argreduce_moves, _render_argreduce)}
