"""The arg-reduction kernel and its launches: one kernel serves the single pass, the split pass (PARTIAL: each
split's (extreme, first index) pair) and the combining pass over those pairs (GATHER)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.columns import PLACE, PLAN, TILES
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op

_ARGREDUCE = Template('''
# program (column tile, split): R tiles [split * chunk, split * chunk + chunk). GATHER: x holds partial
# values and xi their indices (the combining launch); PARTIAL: write the value as well as the index.
# Each slot (row r of the tile, column) keeps its own best (value, where, seen NaN) over the tiles it walks, updated
# elementwise; the slots are reduced to the column's answer once, after the loop (no reduction per tile).
$columns
k0 = tl.program_id(1) * chunk
k1 = tl.minimum(k0 + chunk, tl.cdiv(R, BLOCK_R))
acc_v = tl.full([BLOCK_R, BLOCK_C], $ident, tl.float32)
acc_nan = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.int1)
if GATHER:  # the partial pair's stored index
    acc_i = tl.full([BLOCK_R, BLOCK_C], -1, tl.int64)
else:  # the tile (counted from lo) the slot's best came from; -1: nothing seen yet
    acc_i = tl.full([BLOCK_R, BLOCK_C], -1, tl.int32)
for k in range(k0, k1):  # a split's tiles never cross its end (chunk is whole tiles): only R bounds the rows
    rr = k * BLOCK_R + r
    mask = (rr < R)[:, None] & cmask[None, :]
    offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
    x = tl.load(x_ptr + offs, mask=mask, other=$ident).to(tl.float32)
    nan = x != x
    # the slot's first value, else a NaN or a strictly better number until a NaN was kept (earlier ones win ties)
    take = mask & ((acc_i < 0) | (~acc_nan & (nan | (x $cmp acc_v))))
    if GATHER:
        idx = tl.load(xi_ptr + offs, mask=mask, other=0)
    else:
        idx = (k - k0).to(tl.int32)
    acc_v = tl.where(take, x, acc_v)
    acc_i = tl.where(take, idx, acc_i)
    acc_nan = acc_nan | (take & nan)
if GATHER:
    index = acc_i
else:
    index = (k0 + acc_i.to(tl.int64)) * BLOCK_R + r.to(tl.int64)[:, None]
valid = acc_i >= 0
has_nan = tl.max(acc_nan.to(tl.int32), 0) > 0
best_v = tl.$red(tl.where(acc_nan | ~valid, $ident, acc_v), 0)  # the extreme among numbers
hit = valid & tl.where(has_nan[None, :], acc_nan, acc_v == best_v[None, :])
best_i = tl.min(tl.where(hit, index, 9223372036854775807), 0)  # ties and NaNs: the first index
best_i = tl.where(best_i == 9223372036854775807, k0 * BLOCK_R, best_i)  # (an empty range: never read)
out = tl.program_id(1).to(tl.int64) * C + c
tl.store(i_ptr + out, best_i, mask=cmask)
if PARTIAL:
    tl.store(v_ptr + out, tl.where(has_nan, float("nan"), best_v), mask=cmask)
''')


def argreduce(op: Op, p, names: Names) -> Rendered:
    kind = op.detail["op"]
    if kind not in ("argmax", "argmin"):
        raise ValueError(f"unknown arg-reduction {kind!r}")
    mx = kind == "argmax"
    body = _ARGREDUCE.substitute(columns=PLACE, ident='-float("inf")' if mx else 'float("inf")',
                                 red="max" if mx else "min", cmp=">" if mx else "<")
    kernel = TritonKernel(names(f"kc_{kind}_kernel"), ("x_ptr", "xi_ptr", "v_ptr", "i_ptr", "R_v", "inner_v", "C", "n_cb",
                                                       "chunk"),
                          ("BLOCK_R", "BLOCK_C", "GATHER", "PARTIAL", "WITHIN", "VEC_R", "VEC_I"), body)
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
    keep = bool(op.detail.get("keepdim"))
    row_max, block_r, tile = int(p.ROW_MAX), int(p.BLOCK_R), int(p.TILE)
    warps, target = int(p.num_warps), int(p.split_target)

    def launch(grid: str, args: str, gather: bool, partial: bool, num_warps) -> str:
        return kernel.launch(grid, args.split(", "), {"BLOCK_R": "br", "BLOCK_C": "bc", "GATHER": gather,
                                                      "PARTIAL": partial, "WITHIN": "within", "VEC_R": "vr",
                                                      "VEC_I": "vi"}, num_warps=num_warps)

    body = f'''
dim = {dim}
if dim is None:  # the index into the flattened input
    outer, R, inner, shape = 1, x.numel(), 1, {"[1] * x.dim()" if keep else "[]"}
else:
    d = dim % max(x.dim(), 1)
    outer, R, inner = math.prod(x.shape[:d]), (x.shape[d] if x.dim() else 1), math.prod(x.shape[d + 1:])
    shape = list(x.shape)
    if x.dim():
        {"shape[d] = 1" if keep else "del shape[d]"}
y = torch.empty(shape, dtype=torch.int64, device=x.device)
C = y.numel()
if C == 0:
    return y
br, bc, within, n_cb, tiles, splits, chunk, vr, vi = kc_plan(outer, R, inner, {row_max}, {block_r}, {tile}, 256, {target}, x.element_size())
warps = min(16, {warps} * max(1, br * bc // {tile}))
if splits == 1:
    {launch("(tiles, 1)", "x, x, y, y, R // vr, inner // vi, C, n_cb, chunk", False, False, "warps")}
    return y
part_v = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # per split: extreme (NaN if any)
part_i = torch.empty((splits, C), dtype=torch.int64, device=x.device)  # and its first index
{launch("(tiles, splits)", "x, x, part_v, part_i, R // vr, inner // vi, C, n_cb, chunk", False, True, "warps")}
br, bc, within, n_cb, tiles, _, chunk, vr, vi = kc_plan(1, splits, C, 0, {block_r}, {tile}, 256, 0, 4)
{launch("(tiles, 1)", "part_v, part_i, y, y, splits // vr, C // vi, C, n_cb, chunk", True, False, warps)}
return y'''
    return Rendered((TILES, PLAN, kernel), body)
