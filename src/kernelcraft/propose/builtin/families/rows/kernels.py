"""The reduce family's kernels over the [outer, R, inner] column view (propose/builtin/columns.py): sum, mean, max,
min, logsumexp, 2-norm along R, split over programs when there are few columns; its columns placed by columns.py's
PLAN and PLACE, so a reduction over a leading or middle dim reads adjacent columns of one outer index in vector loads
(softmax's kernels are in softmax.py). The reduce kernel and its launches (`reduce_blocks`, `reduce_launches`) also
serve the pooling families' global pools.

The kernels here apply no steps and read no scalars: each is the same text for every op of its kind (the kind is in
its name), so it keeps its plain name and a chain of two such ops emits it once; everything op-specific (the dim, the
tile sizes) is in the forward body, which the chain makes a helper of its own per op. A reduction with a prologue
(pointwise steps before it) fills the body's slots ($operands, $prologue, $store) in prologue.py, under its op's
names."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.columns import PLACE, PLAN, TILES, lean_walk
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

_REDUCE = Template('''
# program (column tile, split): R tiles [split * chunk, split * chunk + chunk); result row `split` of y. A split's
# tiles never cross its end (chunk is whole tiles), so only R bounds the rows.
$columns
$operands
k0 = tl.program_id(1) * chunk
k1 = tl.minimum(k0 + chunk, tl.cdiv(R, BLOCK_R))
$init
for k in range(k0, k1):
    rr = k * BLOCK_R + r
    mask = (rr < R)[:, None] & cmask[None, :]
    offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
    x = tl.load(x_ptr + offs, mask=mask, other=$ident)
$prologue
$combine
$final
$store
''')
# The lean variant of _REDUCE for a reduction with no prologue (Reduce.lean): columns.py's lean walk over the tiles.
_LEAN = Template('''
# program (column tile, split): R tiles [split * chunk, split * chunk + chunk); result row `split` of y.
$columns
$walk
$final
$store
''')
STORE = "tl.store(y_ptr + tl.program_id(1).to(tl.int64) * C + c, out.to(y_ptr.dtype.element_ty), mask=cmask)"

# logsumexp: per element of the tile a running max m and a sum s of exp(x - m), rescaled when m grows; the column's
# result max(m) + log(sum(s * exp(m - max(m)))). Split partials are logsumexps, combined by the same kernel.
_LSE_INIT = '''m = tl.full([BLOCK_R, BLOCK_C], -float("inf"), tl.float32)
s = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)'''
_LSE_COMBINE = '''x = x.to(tl.float32)
m_new = tl.maximum(m, x, propagate_nan=tl.PropagateNan.ALL)
m_safe = tl.where((m_new == -float("inf")) | (m_new == float("inf")), 0.0, m_new)  # no inf - inf
s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
m = m_new'''
_LSE_FINAL = '''mc = tl.max(m, 0)
mc_safe = tl.where((mc == -float("inf")) | (mc == float("inf")), 0.0, mc)
sc = tl.sum(s * tl.exp(m - mc_safe[None, :]), 0)
nan = tl.max((m != m).to(tl.int32), 0) > 0
out = tl.where(nan, float("nan"), tl.where(mc == float("inf"), float("inf"), mc_safe + tl.log(sc)))'''


def _reduction(kind: str) -> tuple[str, str, str, str]:
    """(the masked loads' identity, the accumulator's init, one tile's combine (in the loop), the column's `out`)."""
    acc = "acc = tl.full([BLOCK_R, BLOCK_C], {}, tl.float32)"
    if kind in ("sum", "mean"):
        return "0.0", acc.format("0.0"), "acc = acc + x.to(tl.float32)", "out = tl.sum(acc, 0) / div"
    if kind in ("max", "min"):
        ident = '-float("inf")' if kind == "max" else 'float("inf")'
        fn = "maximum" if kind == "max" else "minimum"
        return (ident, acc.format(ident), f"acc = tl.{fn}(acc, x.to(tl.float32), propagate_nan=tl.PropagateNan.ALL)",
                f'out = tl.where(tl.max((acc != acc).to(tl.int32), 0) > 0, float("nan"), tl.{kind}(acc, 0))')  # NaN wins
    if kind == "norm2":  # sqrt of the sum of squares; split partials are norms, whose 2-norm is the whole's
        return "0.0", acc.format("0.0"), "acc = acc + x.to(tl.float32) * x.to(tl.float32)", "out = tl.sqrt(tl.sum(acc, 0))"
    if kind == "logsumexp":
        return '-float("inf")', _LSE_INIT, _LSE_COMBINE, _LSE_FINAL
    raise ValueError(f"unknown reduction {kind!r}")


def identity(kind: str) -> str:
    """The value a lane out of bounds holds for `kind` (what leaves a column's result unchanged)."""
    return _reduction(kind)[0]


def total(kind: str) -> str:
    """Lines folding the BLOCK_C column results `out` of a tile into one value of the same kind (columns out of
    bounds hold the identity: 0, -inf or +inf, a logsumexp's -inf), NaN winning where it does in the columns."""
    nan = 'tl.max((out != out).to(tl.int32), 0) > 0'
    if kind in ("sum", "mean"):
        return "out = tl.sum(out, 0)"
    if kind in ("max", "min"):
        return f'out = tl.where({nan}, float("nan"), tl.{kind}(out, 0))'
    if kind == "norm2":  # the 2-norm of the columns' 2-norms
        return "out = tl.sqrt(tl.sum(out * out, 0))"
    if kind == "logsumexp":  # the logsumexp of the columns' logsumexps
        return "\n".join(['mo = tl.max(out, 0)',
                          'mo_safe = tl.where((mo == -float("inf")) | (mo == float("inf")), 0.0, mo)',
                          'so = tl.sum(tl.exp(out - mo_safe), 0)',
                          f'out = tl.where({nan}, float("nan"), '
                          'tl.where(mo == float("inf"), float("inf"), mo_safe + tl.log(so)))'])
    raise ValueError(f"unknown reduction {kind!r}")


def reduce_body(kind: str, operands: str = "", prologue: str = "", store: str = STORE) -> str:
    """The reducing kernel's body for `kind`: `operands` placed after the columns, `prologue` applied to each loaded
    tile x in the loop, `store` writing the columns' results `out` (prologue.py's, for pointwise steps before the
    reduction; by default none and the plain store)."""
    ident, init, combine, final = _reduction(kind)
    return _REDUCE.substitute(columns=PLACE, operands=operands, ident=ident, init=init, prologue=indent(prologue, 4),
                              combine=indent(combine, 4), final=final, store=store)


def reduce_kernel(kind: str, lean: bool = False) -> TritonKernel:
    """The kernel reducing along R for `kind` (lean: _LEAN's): one text per kind (no scalars, no suffix), so the
    reduce family and the pooling families' global pools share it, and a chain emits it once."""
    if lean:
        ident, init, combine, final = _reduction(kind)
        body = _LEAN.substitute(columns=PLACE, walk=lean_walk(init, combine, ident), final=final, store=STORE)
    else:
        body = reduce_body(kind)
    return TritonKernel(f"kc_{kind}_{'lean_' if lean else ''}reduce_kernel",
                        ("x_ptr", "y_ptr", "R_v", "inner_v", "C", "n_cb", "chunk", "div"),
                        ("BLOCK_R", "BLOCK_C", "WITHIN", "VEC_R", "VEC_I"), body)


def reduce_blocks(kind: str, lean: bool = False) -> tuple:
    """The module-level blocks `reduce_launches` needs for `kind`."""
    return (TILES, PLAN, reduce_kernel(kind, True), reduce_kernel(kind)) if lean else (TILES, PLAN, reduce_kernel(kind))


def reduce_launches(kind: str, div: str, block_r: int, tile: int, warps: int, target: int, columns: int,
                    lean: bool = False, long: tuple[int, int] | None = None) -> str:
    """Forward lines reducing the contiguous x, seen as [outer, R, inner] (names the lines before bind), into y
    (contiguous, outer * inner values), then `return y`; `div` the divisor of a sum (a mean's R) as Python source.
    With fewer column tiles than `target` R is split over programs and the fp32 partials combined by a second
    launch, over the [1, splits, C] view of the partials. lean: each launch takes the lean kernel where its int32
    column offsets fit. long: the (tile, warps) a reduced dim of block_r or more takes instead of (tile, warps),
    chosen when forward runs."""
    kernel, fast = reduce_kernel(kind), reduce_kernel(kind, True)
    consts = {"BLOCK_R": "br", "BLOCK_C": "bc", "WITHIN": "within", "VEC_R": "vr", "VEC_I": "vi"}
    args = lambda src, dst, d: [src, dst, "R // vr", "inner // vi", "C", "n_cb", "chunk", d]  # noqa: E731
    choose = []
    if long:  # the choice is made once, from the reduced dim; a second launch combining partials keeps it
        choose = [f"tile, warps = ({int(long[0])}, {int(long[1])}) if R >= {block_r} else ({tile}, {warps})"]
        tile, warps = "tile", "warps"
    plan = "br, bc, within, n_cb, tiles, splits, chunk, vr, vi = kc_plan({}, {}, {}, 0, %d, %s, %d, {}, {})" % (
        block_r, tile, columns)

    def launch(grid: str, src: str, dst: str, d: str) -> str:
        tiled = kernel.launch(grid, args(src, dst, d), consts, num_warps=warps)
        if not lean:
            return tiled
        return (f"if br * inner + bc < 2 ** 31:\n    {fast.launch(grid, args(src, dst, d), consts, num_warps=warps)}"
                f"\nelse:\n    {tiled}")
    return "\n".join([
        *choose,
        plan.format("outer", "R", "inner", target, "x.element_size()"),
        "if splits == 1:",
        indent(launch("(tiles, 1)", "x", "y", div), 4),
        "    return y",
        "part = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # fp32 partials, one row per split",
        launch("(tiles, splits)", "x", "part", "1.0"),
        "outer, R, inner = 1, splits, C",
        plan.format("outer", "R", "inner", 0, "4"),
        launch("(tiles, 1)", "part", "y", div),
        "return y"])


def reduce(op: Op, p, names: Names) -> Rendered:
    kind = op.detail["op"]
    lean = bool(getattr(p, "lean", False))
    launches = reduce_launches(kind, "float(R0)" if kind == "mean" else "1.0", int(p.BLOCK_R), int(p.TILE),
                               int(p.num_warps), int(p.split_target), int(p.COLUMNS), lean,
                               None if lean else getattr(p, "long", None))
    return Rendered(reduce_blocks(kind, lean), f"{view_lines(op)}\n{launches}")


def view_lines(op: Op) -> str:
    """Forward lines binding the reduction's view of the contiguous x: outer, R, inner, the reduced dims
    [d_lo, d_hi) (all of them when dim is None), R0 (the elements per result, a mean's divisor), C (the results'
    count) and y, the result; an empty result is returned at once."""
    keep = bool(op.detail.get("keepdim"))
    if isinstance(op.detail.get("dim"), (list, tuple)):  # adjacent dims (analyze.py checks): reduced as one
        dims = [int(d) for d in op.detail["dim"]]
        span = (f"d_lo = min(d % max(x.dim(), 1) for d in {dims!r})\n    "
                f"d_hi = max(d % max(x.dim(), 1) for d in {dims!r}) + 1")
        dim = repr(dims)
    else:
        dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
        span = "d_lo = dim % max(x.dim(), 1)\n    d_hi = d_lo + 1"
    return f'''
dim = {dim}
if dim is None:  # all elements
    outer, R, inner, shape = 1, x.numel(), 1, {"[1] * x.dim()" if keep else "[]"}
    d_lo, d_hi = 0, x.dim()
else:
    {span}
    outer, R, inner, shape = math.prod(x.shape[:d_lo]), math.prod(x.shape[d_lo:d_hi]), math.prod(x.shape[d_hi:]), list(x.shape)
    if x.dim():
        {"shape[d_lo:d_hi] = [1] * (d_hi - d_lo)" if keep else "del shape[d_lo:d_hi]"}
y = torch.empty(shape, dtype=x.dtype, device=x.device)
C, R0 = y.numel(), R
if C == 0:
    return y'''
