"""The softmax family's kernels (softmax and log_softmax along R of a contiguous x seen as [outer, R, inner],
columns.py), both from one body:

  - `row` (inner == 1, the last dim): a program takes BLOCK_C rows of R contiguous elements (short rows packed);
  - `column` (inner > 1, a leading or middle dim): a program takes one outer index and BLOCK_C adjacent columns of
    inner (a 2-D grid (outer, column block) flattened into one axis), so each of its BLOCK_R loads along R reads
    BLOCK_C contiguous elements: coalesced, vectorizable loads (the columns' offsets are an arange the compiler
    sees), where a column index decoded per element from one flat index was neither.

Either holds all of R in one tile when it fits (one read, one write), else keeps a running max and rescaled sum
over BLOCK_R-element tiles and writes in a second pass. The pointwise steps after the softmax (its epilogue,
steps.py) apply to the fp32 result before its store, their parameter operands read over the kernel dims
(outer, r, inner) through conv/operands.py (an operand along R only, as a per-channel bias after a softmax over
channels, by r alone: O<k>_COLS)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.columns import COLUMNS, ONLINE_MAX_SUM, TILES
from kernelcraft.propose.builtin.families.conv import operands
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_on

_BODY = Template('''
$prologue
if SINGLE:  # all of R in one tile: one read, one write
    rr = r
    offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
    mask = (rr < R)[:, None] & cmask[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    e = tl.exp(x - m[None, :])
    s = tl.sum(e, 0)
    y = $single
$single_epilogue
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
else:  # online: running max and a sum rescaled whenever the max grows, then a writing pass
$online_stats
    $prelude
    for start in range(0, R, BLOCK_R):
        rr = start + r
        offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
        mask = (rr < R)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = $online
$online_epilogue
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
''')

# The column kernel's program: one outer index, BLOCK_C adjacent columns of inner (then `base`, `cmask` and `r` as
# columns.COLUMNS has them for the row kernel).
_COLUMN_PROLOGUE = '''blocks = tl.cdiv(inner, BLOCK_C)
ob = (tl.program_id(0) // blocks).to(tl.int64)
cols = (tl.program_id(0) % blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
cmask = cols < inner
base = ob * R * inner + cols
r = tl.arange(0, BLOCK_R)'''

# softmax and log_softmax: the whole-tile result, the online pass's statistic, and its writing expression
_MATH = {"softmax": ("e * (1.0 / s)[None, :]", "inv = 1.0 / s_run", "tl.exp(x - m_run[None, :]) * inv[None, :]"),
         "log_softmax": ("x - (m + tl.log(s))[None, :]", "lse = m_run + tl.log(s_run)", "x - lse[None, :]")}

COLUMN_TILES = '''
def kc_column_tiles(R, inner, row_max, block_r, tile, columns):
    """(BLOCK_R, BLOCK_C, whole R in one tile) for a softmax along R of an [outer, R, inner] view with inner > 1:
    up to `columns` adjacent columns per tile row, more where R is short (a tile of about `tile` elements); fewer,
    down to 16, where that keeps all of R in one tile of at most `row_max` elements (one read instead of two)."""
    np2 = triton.next_power_of_2
    want = min(np2(inner), columns)
    narrow = max(min(want, row_max // np2(R)), min(want, 16))
    if np2(R) * narrow <= row_max:
        return np2(R), min(np2(inner), max(narrow, tile // np2(R))), True
    br = min(np2(R), block_r, max(1, tile // want))
    return br, min(np2(inner), max(want, tile // br)), False
'''

NDIM = 3  # the kernels' output dims for the epilogue's operands: (outer, r, inner)


def _body(op: Op, prologue: str, every) -> str:
    """The kernel body over `prologue`'s columns; `every` the operand index groups (conv/operands.load's) of a
    tile's outputs, r along dim 0 of the tile."""
    single, prelude, online = _MATH[op.kind]
    along_r = ({1: "rr.to(tl.int64)"}, "[:, None]")

    def load(k: int) -> str:
        return operands.flagged(k, operands.load(k, [along_r], "(rr < R)[:, None]"),
                                operands.load(k, [*every, along_r], "mask"))
    steps = op.detail.get("steps") or []
    return _BODY.substitute(online_stats=ONLINE_MAX_SUM, prologue=prologue, single=single, prelude=prelude,
                            online=online,
                            single_epilogue=epilogue_on("y", steps, load, 4),
                            online_epilogue=epilogue_on("y", steps, load, 8))


def kernels(op: Op, names: Names) -> tuple[TritonKernel, TritonKernel]:
    """The op's row kernel (inner == 1: a column is a row, c its outer index) and column kernel (inner > 1)."""
    extra, flags, s = operands.params(op, NDIM), operands.flags(op), Scalars.of(op)
    row = TritonKernel(names(f"kc_{op.kind}_kernel"), ("x_ptr", "y_ptr", "R", "inner", "C", *extra),
                       ("BLOCK_R", "BLOCK_C", "SINGLE", *flags), _body(op, COLUMNS, [({0: "c"}, "[None, :]")]), s)
    column = TritonKernel(names(f"kc_{op.kind}_columns_kernel"), ("x_ptr", "y_ptr", "R", "inner", *extra),
                          ("BLOCK_R", "BLOCK_C", "SINGLE", *flags),
                          _body(op, _COLUMN_PROLOGUE, [({0: "ob"}, ""), ({2: "cols.to(tl.int64)"}, "[None, :]")]), s)
    return row, column


def render(op: Op, p, names: Names) -> Rendered:
    row, column = kernels(op, names)
    row_max = int(p.ROW_MAX) if p.variant == "row" else 0
    block_r, tile, warps, columns = int(p.BLOCK_R), int(p.TILE), int(p.num_warps), int(p.COLUMNS)
    tail = operands.args(op, NDIM)
    consts = {"BLOCK_R": "br", "BLOCK_C": "bc", "SINGLE": "single", **operands.flag_consts(op)}
    rows = row.launch("(triton.cdiv(outer, bc),)", ["x", "y", "R", "inner", "outer", *tail], consts, num_warps="warps")
    cols = column.launch("(outer * triton.cdiv(inner, bc),)", ["x", "y", "R", "inner", *tail], consts,
                         num_warps="warps")
    bind = operands.lines(op, "tuple(x.shape)", "[0] * d + [1] + [2] * (x.dim() - d - 1)", NDIM)
    blocks = (TILES, COLUMN_TILES, row, column) + ((operands.HELPER,) if operands.count(op) else ())
    return Rendered(blocks, f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
d = {int(op.detail["dim"])} % max(x.dim(), 1)
R = x.shape[d] if x.dim() else 1
inner = math.prod(x.shape[d + 1:])
outer = x.numel() // (R * inner)
{bind}if inner == 1:  # along the last dim: rows of R contiguous elements, short ones packed
    br, bc, single = kc_tiles(R, outer, 1, {row_max}, {block_r}, {tile})
    warps = min(16, {warps} * max(1, br * bc // {tile}))
    {rows}
    return y
br, bc, single = kc_column_tiles(R, inner, {row_max}, {block_r}, {tile}, {columns})  # a leading or middle dim
warps = min(16, {warps} * max(1, br * bc // {tile}))
{cols}
return y''')
