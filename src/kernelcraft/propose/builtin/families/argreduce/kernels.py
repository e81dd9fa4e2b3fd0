"""The arg-reduction kernels and their launches. The tiled kernel serves the single pass, the split pass (PARTIAL:
each split's (extreme, first index) pair) and the combining pass over those pairs (GATHER); the lean kernel
(ArgTiles.lean) does the first two with fewer instructions and registers per element and hands its split partials
to the tiled kernel's combining pass."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.columns import PLACE, PLAN, TILES, lean_walk
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

_ARGREDUCE = Template('''
# program (column tile, split): R tiles [split * chunk, split * chunk + chunk). GATHER: x holds partial
# values and xi their indices (the combining launch); PARTIAL: write the value as well as the index.
# Each slot (row r of the tile, column) keeps its own best (value, where, seen NaN) over the tiles it walks, updated
# elementwise; the slots are reduced to the column's answer once, after the loop (no reduction per tile).
$columns
k0 = tl.program_id(1) * chunk
k1 = tl.minimum(k0 + chunk, tl.cdiv(R, BLOCK_R))
acc_v = tl.full([BLOCK_R, BLOCK_C], $ident, $acc)
acc_nan = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.int1)
if GATHER:  # the partial pair's stored index
    acc_i = tl.full([BLOCK_R, BLOCK_C], -1, tl.int64)
else:  # the tile (counted from lo) the slot's best came from; -1: nothing seen yet
    acc_i = tl.full([BLOCK_R, BLOCK_C], -1, tl.int32)
for k in range(k0, k1):  # a split's tiles never cross its end (chunk is whole tiles): only R bounds the rows
    rr = k * BLOCK_R + r
    mask = (rr < R)[:, None] & cmask[None, :]
    offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
    x = tl.load(x_ptr + offs, mask=mask, other=$other).to($acc)
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
    tl.store(v_ptr + out, $partial, mask=cmask)
''')


# The lean first pass (at (128, 4096, 4095) over dim 1 on sm_90, 8 instructions and 4 registers per element against
# the tiled kernel's 36 and 5). Per element: one load, two compares, one select (the index) and a NaN-propagating
# max (the value; it equals where(take, x, acc_v), equal values being equal). A NaN rides in the value itself: a NaN
# slot is never replaced (`acc_v == acc_v` fails) and a NaN replaces any number (`x <= acc_v` fails), so the first
# NaN wins with no flag. Each slot starts at its own first row (tile 0, value the identity): a later equal value never
# replaces it (ties keep the first) and an all-(-inf) column keeps its first row, with no "seen" flag; a slot past R's
# end keeps the identity at an index >= R, so it loses every tie to a slot inside R. The tiles are walked by
# columns.py's lean_walk. The value and the index are updated by different operations on purpose: two selects on one
# mask are merged by LLVM's vectorizer into a shuffled mask that costs three more instructions an element.
_LEAN_INIT = '''acc_v = tl.full([BLOCK_R, BLOCK_C], $ident, tl.float32)
acc_i = tl.zeros([BLOCK_R, BLOCK_C], tl.int32)  # the tile (counted from k0) of the slot's best'''
_LEAN_STEP = '''take = ~(x $keep acc_v) & (acc_v == acc_v)  # strictly better, or a NaN over a number
acc_i = tl.where(take, k - k0, acc_i)
acc_v = tl.$ext(acc_v, x, propagate_nan=tl.PropagateNan.ALL)  # = where(take, x, acc_v): equal values are equal'''

_LEAN = Template('''
# program (column tile, split): R tiles [k0, k1); PARTIAL: also write the split's extreme (NaN if any).
$columns
$walk
index = (k0 + acc_i).to(tl.int64) * BLOCK_R + r.to(tl.int64)[:, None]
nan = acc_v != acc_v
has_nan = tl.max(nan.to(tl.int32), 0) > 0
best_v = tl.$red(tl.where(nan, $ident, acc_v), 0)  # the extreme among numbers
hit = tl.where(has_nan[None, :], nan, acc_v == best_v[None, :])  # never empty
best_i = tl.min(tl.where(hit, index, 9223372036854775807), 0)  # ties and NaNs: the first index
out = tl.program_id(1).to(tl.int64) * C + c
tl.store(i_ptr + out, best_i, mask=cmask)
if PARTIAL:
    tl.store(v_ptr + out, tl.where(has_nan, float("nan"), best_v), mask=cmask)
''')


def lean_body(kind: str) -> str:
    mx = kind == "argmax"
    ident = '-float("inf")' if mx else 'float("inf")'
    ext, keep = ("maximum", "<=") if mx else ("minimum", ">=")
    walk = lean_walk(Template(_LEAN_INIT).substitute(ident=ident),
                     Template(_LEAN_STEP).substitute(keep=keep, ext=ext), ident, cast=".to(tl.float32)")
    return _LEAN.substitute(columns=PLACE, walk=walk, ident=ident, red="max" if mx else "min")


def argreduce(op: Op, p, names: Names) -> Rendered:
    kind = op.detail["op"]
    if kind not in ("argmax", "argmin"):
        raise ValueError(f"unknown arg-reduction {kind!r}")
    mx = kind == "argmax"
    params = ("x_ptr", "xi_ptr", "v_ptr", "i_ptr", "R_v", "inner_v", "C", "n_cb", "chunk")
    consts = ("BLOCK_R", "BLOCK_C", "GATHER", "PARTIAL", "WITHIN", "VEC_R", "VEC_I")
    ident = '-float("inf")' if mx else 'float("inf")'
    body = _ARGREDUCE.substitute(columns=PLACE, ident=ident, other=ident, acc="tl.float32", red="max" if mx else "min",
                                 cmp=">" if mx else "<", partial='tl.where(has_nan, float("nan"), best_v)')
    kernel = TritonKernel(names(f"kc_{kind}_kernel"), params, consts, body)
    # Integer inputs compared as int64: in fp32, integers past 2**24 round together and tie (no NaN; masked lanes
    # are never taken, so they load 0)
    whole = str(-2 ** 63) if mx else str(2 ** 63 - 1)
    int_body = _ARGREDUCE.substitute(columns=PLACE, ident=whole, other="0", acc="tl.int64", red="max" if mx else "min",
                                     cmp=">" if mx else "<", partial="best_v")
    int_kernel = TritonKernel(names(f"kc_{kind}_int_kernel"), params, consts, int_body,
                              comment="the integer inputs' kernel: values compared as int64")
    lean = TritonKernel(names(f"kc_{kind}_lean_kernel"), ("x_ptr", "v_ptr", "i_ptr", "R_v", "inner_v", "C", "n_cb",
                                                         "chunk"),
                        ("BLOCK_R", "BLOCK_C", "PARTIAL", "WITHIN", "VEC_R", "VEC_I"), lean_body(kind))
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
    keep = bool(op.detail.get("keepdim"))
    row_max, block_r, tile = int(p.ROW_MAX), int(p.BLOCK_R), int(p.TILE)
    warps, target = int(p.num_warps), int(p.split_target)

    def launch(grid: str, args: str, gather: bool, partial: bool, num_warps, k=kernel) -> str:
        return k.launch(grid, args.split(", "), {"BLOCK_R": "br", "BLOCK_C": "bc", "GATHER": gather,
                                                 "PARTIAL": partial, "WITHIN": "within", "VEC_R": "vr",
                                                 "VEC_I": "vi"}, num_warps=num_warps)

    def first(grid: str, out: str, partial: bool) -> str:
        """The first pass over x (writing `out`, the value and index buffers): integers by the integer kernel; else
        the lean kernel where asked and its int32 column offsets fit, else the tiled kernel."""
        args = f"x, x, {out}, R // vr, inner // vi, C, n_cb, chunk"
        whole = launch(grid, args, False, partial, "warps", int_kernel)
        tiled = launch(grid, args, False, partial, "warps")
        if not p.lean:
            return f"if not x.is_floating_point():\n    {whole}\nelse:\n    {tiled}"
        fast = lean.launch(grid, f"x, {out}, R // vr, inner // vi, C, n_cb, chunk".split(", "),
                           {"BLOCK_R": "br", "BLOCK_C": "bc", "PARTIAL": partial, "WITHIN": "within", "VEC_R": "vr",
                            "VEC_I": "vi"}, num_warps="warps")
        return (f"if not x.is_floating_point():\n    {whole}\nelif br * inner + bc < 2 ** 31:\n    {fast}\n"
                f"else:\n    {tiled}")

    gather = "part_v, part_i, y, y, splits // vr, C // vi, C, n_cb, chunk"
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
{indent(first("(tiles, 1)", "y, y", False), 4)}
    return y
part_v = torch.empty((splits, C), dtype=torch.float32 if x.is_floating_point() else torch.int64,
                     device=x.device)  # per split: extreme (NaN if any)
part_i = torch.empty((splits, C), dtype=torch.int64, device=x.device)  # and its first index
{first("(tiles, splits)", "part_v, part_i", True)}
br, bc, within, n_cb, tiles, _, chunk, vr, vi = kc_plan(1, splits, C, 0, {block_r}, {tile}, 256, 0,
                                                      part_v.element_size())
if not x.is_floating_point():
    {launch("(tiles, 1)", gather, True, False, warps, int_kernel)}
    return y
{launch("(tiles, 1)", gather, True, False, warps)}
return y'''
    return Rendered((TILES, PLAN, *([lean] if p.lean else []), kernel, int_kernel), body)
