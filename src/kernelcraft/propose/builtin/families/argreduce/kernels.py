"""The arg-reduction kernel and its launches: one kernel serves the single pass, the split pass (PARTIAL: each
split's (extreme, first index) pair) and the combining pass over those pairs (GATHER)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.columns import COLUMNS, TILES
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op

_ARGREDUCE = Template('''
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


def argreduce(op: Op, p, names: Names) -> Rendered:
    kind = op.detail["op"]
    if kind not in ("argmax", "argmin"):
        raise ValueError(f"unknown arg-reduction {kind!r}")
    mx = kind == "argmax"
    body = _ARGREDUCE.substitute(columns=COLUMNS, ident='-float("inf")' if mx else 'float("inf")',
                                 red="max" if mx else "min", cmp=">" if mx else "<")
    kernel = TritonKernel(names(f"kc_{kind}_kernel"), ("x_ptr", "xi_ptr", "v_ptr", "i_ptr", "R", "inner", "C", "chunk"),
                          ("BLOCK_R", "BLOCK_C", "GATHER", "PARTIAL"), body)
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
    keep = bool(op.detail.get("keepdim"))
    row_max, block_r, tile = int(p.ROW_MAX), int(p.BLOCK_R), int(p.TILE)
    warps, target = int(p.num_warps), int(p.split_target)

    def launch(grid: str, args: str, gather: bool, partial: bool, num_warps) -> str:
        return kernel.launch(grid, args.split(", "), {"BLOCK_R": "br", "BLOCK_C": "bc", "GATHER": gather,
                                                      "PARTIAL": partial}, num_warps=num_warps)

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
    {launch("(col_tiles, 1)", "x, x, y, y, R, inner, C, chunk", False, False, "warps")}
    return y
part_v = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # per split: extreme (NaN if any)
part_i = torch.empty((splits, C), dtype=torch.int64, device=x.device)  # and its first index
{launch("(col_tiles, splits)", "x, x, part_v, part_i, R, inner, C, chunk", False, True, "warps")}
br, bc, _ = kc_tiles(splits, C, C, 0, {block_r}, {tile})
{launch("(triton.cdiv(C, bc), 1)", "part_v, part_i, y, y, splits, C, C, splits", True, False, warps)}
return y'''
    return Rendered((TILES, kernel), body)
