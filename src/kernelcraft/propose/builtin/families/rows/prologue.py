"""A reduction's prologue: the pointwise steps an elementwise op applied before it (a reduce op's "pre",
torch.mean((a - b) ** 2), torch.mean(torch.clamp(1 - a * t, min=0)), torch.sum(x * x)), applied by the reducing
kernel to each tile it loads, tensor operands too, so the inputs are read once and the elementwise result is never
written. The kernel is kernels.py's (its `$operands`, `$prologue` and `$store` slots), the steps steps.py's
epilogue_lines.

Each tensor operand, broadcast to x's shape, is read in one of three ways, chosen per operand at run time by
`kc_fold_layout` (a host helper, emitted as its source and asked by analyze_families.py whether the fold pays):
  SAME (0): x's shape and contiguous, read at x's own offsets (its loads vectorize as x's do);
  ALONG (1): its strides coalesce over each of the view's three groups of dims (outer, R, inner), so the element at
    (o, r, i) is at o * so + r * sr + i * si, and it is contiguous or constant along x's fastest index (so a warp's
    loads do not scatter);
  HOISTED (2): as ALONG, constant along R (sr == 0): loaded once per program, before the walk over R.
An operand whose strides do not coalesce is copied to x's shape first (SAME). A full reduction may instead view x as
[1, R, inner], R its leading dims, where that lets every operand coalesce (Hinge's targets (N,) against
predictions (N, N): HOISTED, read at the column index); each program then folds its columns into one value
(TOTAL) and a second launch reduces those in a fixed order."""

from __future__ import annotations

import inspect

from kernelcraft.propose.builtin.families.pointwise.kernels import kc_bcast_numbers
from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.rows.kernels import (STORE, identity, reduce_body, reduce_kernel, total,
                                                           view_lines)
from kernelcraft.propose.builtin.columns import PLAN, TILES
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

SAME, ALONG, HOISTED = 0, 1, 2


def kc_fold_grow(x, ts):
    """x broadcast with the operands ts by torch's rules: itself, or a contiguous copy where an operand makes the
    steps' result larger than x (the reduced dims are the result's)."""
    nd = max([x.dim()] + [t.dim() for t in ts])
    shape = []
    for d in range(nd):
        big = [t.shape[t.dim() - nd + d] for t in [x, *ts] if t.dim() - nd + d >= 0 and t.shape[t.dim() - nd + d] != 1]
        shape = shape + [big[0] if big else 1]  # sizes that do not broadcast: expand raises
    return x if list(x.shape) == shape else x.expand(shape).contiguous()


def kc_fold_group(shape, st, a, b):
    """The one stride that walks dims [a, b) of `shape` (strides st) as a flat index; None where they do not
    coalesce (size-1 dims skipped, no dims: 0)."""
    s, expect = 0, None
    for d in range(b - 1, a - 1, -1):
        if shape[d] == 1:
            continue
        if expect is None:
            s = st[d]
        elif st[d] != expect:
            return None
        expect = st[d] * shape[d]
    return s


def kc_fold_read(x, t, lo, k):
    """How the reducing kernel reads operand t against the contiguous x whose dims [lo, k) are reduced: (so, sr, si,
    mode), its strides over the view's outer, reduced and inner index, or None where they do not coalesce. Mode
    SAME (0): t has x's shape and layout; else ALONG (1), or HOISTED (2) where it is constant along R; None too
    where t is neither contiguous nor constant along x's fastest index."""
    nd, shape = x.dim(), list(x.shape)
    if list(t.shape) == shape and all(t.stride(d) == x.stride(d) for d in range(nd) if shape[d] > 1):
        return 0, 0, 0, 0
    st = [0 if d < nd - t.dim() or t.shape[d - nd + t.dim()] == 1 else t.stride(d - nd + t.dim()) for d in range(nd)]
    found = [kc_fold_group(shape, st, 0, lo), kc_fold_group(shape, st, lo, k), kc_fold_group(shape, st, k, nd)]
    inner = 1
    for d in range(k, nd):
        inner = inner * shape[d]
    # along x's fastest index (inner, else R) t must be contiguous or constant, or a warp's loads would scatter
    if None in found or found[2 if inner > 1 else 1] not in (0, 1):
        return None
    return found[0], found[1], found[2], 1 if found[1] else 2


def kc_fold_layout(x, ts, outer, R, inner, lo, hi, copy=True):
    """How the reducing kernel reads the operands ts against the contiguous x reduced over dims [lo, hi) (the view
    [outer, R, inner]): (outer, R, inner, grouped, operands), each operand (tensor, so, sr, si, mode) (kc_fold_read).
    A full reduction (lo 0, hi x.dim()) may regroup x as [1, R, inner], R its leading dims, where the operands
    coalesce only so (`grouped`: the kernel's columns are partial results). An operand that coalesces under no view
    is copied to x's shape (SAME); with copy False, None is returned instead."""
    for k in [hi] + (list(range(hi - 1, 0, -1)) if lo == 0 and hi == x.dim() else []):
        got = [kc_fold_read(x, t, lo, k) for t in ts]
        if None not in got:
            break
    else:
        if not copy:
            return None
        k, ts = hi, [t if kc_fold_read(x, t, lo, hi) else t.expand(x.shape).contiguous() for t in ts]
        got = [kc_fold_read(x, t, lo, hi) for t in ts]
    if k != hi:
        outer, R, inner = 1, 1, 1
        for d in range(x.dim()):
            R, inner = (R * x.shape[d], inner) if d < k else (R, inner * x.shape[d])
    return outer, R, inner, k != hi, [(t, *g) for t, g in zip(ts, got)]


# The operands' offsets where a program's columns are: their outer and inner indices under either placing (PLACE)
_COLUMN_INDEX = '''if WITHIN:  # the columns' outer and inner indices, where the operands' strides apply
    c_o = o
    c_i = col
else:
    c_o = c // inner
    c_i = c % inner'''


def _operand_lines(k: int) -> tuple[str, str]:
    """(before the loop, in it): operand k's column offsets (and its values, HOISTED), then its tile as o<k>_t."""
    before = (f"o{k}_b = c_o * o{k}_so + c_i * o{k}_si\n"
              f"if O{k}_MODE == {HOISTED}:  # constant along R: read once\n"
              f"    o{k}_c = tl.load(o{k}_ptr + o{k}_b, mask=cmask, other=0.0).to(tl.float32)")
    load = f"tl.load(o{k}_ptr + {{}}, mask=mask, other=0.0).to(tl.float32)"
    within = (f"if O{k}_MODE == {SAME}:  # x's shape and layout: x's offsets\n"
              f"    o{k}_t = {load.format('offs')}\n"
              f"elif O{k}_MODE == {ALONG}:\n"
              f"    o{k}_t = {load.format(f'o{k}_b[None, :] + rr.to(tl.int64)[:, None] * o{k}_sr')}\n"
              f"else:\n"
              f"    o{k}_t = o{k}_c[None, :]")
    return before, within


def pre_kernel(op: Op, names: Names) -> TritonKernel:
    """The reducing kernel that applies `op`'s prologue to each tile before reducing it (operands o0, o1, ... in
    plan.operand_refs order), lanes out of bounds set back to the kind's identity after the steps; TOTAL: one value
    per program (its columns folded), at program (tile, split)'s index."""
    kind, steps = op.detail["op"], op.detail["pre"]
    n = len(operand_refs(steps))
    parts = [_operand_lines(k) for k in range(n)]
    operands = "\n".join([_COLUMN_INDEX] * bool(n) + [before for before, _ in parts])
    lines = ["x = x.to(tl.float32)", *(within for _, within in parts), *epilogue_lines(steps, lambda k: f"o{k}_t"),
             f"x = tl.where(mask, x, {identity(kind)})"]
    store = ("if TOTAL:  # one value per program, at (split, tile): a full reduction regrouped, its columns partial\n"
             + indent(total(kind), 4) + "\n"
             "    tl.store(y_ptr + tl.program_id(1).to(tl.int64) * tl.num_programs(0) + tl.program_id(0), "
             "out.to(y_ptr.dtype.element_ty))\n"
             f"else:\n    {STORE}")
    params = ("x_ptr", *(f"o{k}_{s}" for k in range(n) for s in ("ptr", "so", "sr", "si")), "y_ptr", "R_v", "inner_v",
              "C", "n_cb", "chunk", "div")
    consts = ("BLOCK_R", "BLOCK_C", "WITHIN", "VEC_R", "VEC_I", "TOTAL", *(f"O{k}_MODE" for k in range(n)))
    return TritonKernel(names(f"kc_{kind}_reduce_pre_kernel"), params, consts,
                        reduce_body(kind, operands, "\n".join(lines), store), Scalars.of(op),
                        comment=f"the {kind} of the elements after the op's pointwise steps (its prologue)")


def render(op: Op, p, names: Names) -> Rendered:
    """A reduce op with a prologue: the forward (reading x and the operands o0, o1, ... as passed) broadcasts them,
    binds the view (kernels.view_lines), places the operands (kc_fold_layout) and launches the prologue kernel; with
    several programs along R (or columns that are partial results) the fp32 partials go through the plain kernel."""
    kind = op.detail["op"]
    n = len(operand_refs(op.detail["pre"]))
    kernel, plain = pre_kernel(op, names), reduce_kernel(kind)
    tensors = ", ".join(f"o{k}" for k in range(n))
    consts = {"BLOCK_R": "br", "BLOCK_C": "bc", "WITHIN": "within", "VEC_R": "vr", "VEC_I": "vi"}
    pre_consts = {**consts, "TOTAL": "grouped", **{f"O{k}_MODE": f"ops[{k}][4]" for k in range(n)}}
    opargs = [f"ops[{k}][{j}]" for k in range(n) for j in range(4)]
    args = lambda dst, d: ["x", *opargs, dst, "R // vr", "inner // vi", "C", "n_cb", "chunk", d]  # noqa: E731
    plan = "br, bc, within, n_cb, tiles, splits, chunk, vr, vi = kc_plan({}, {}, {}, 0, %d, %d, %d, {}, {})" % (
        int(p.BLOCK_R), int(p.TILE), int(p.COLUMNS))
    div, warps = "float(R0)" if kind == "mean" else "1.0", int(p.num_warps)
    head = [] if not n else [
        f"{tensors}, = kc_bcast_numbers(x, [{tensors}])",
        f"if any(t.dtype != x.dtype for t in [{tensors}]):",
        "    raise ValueError(\"tensor operands of another dtype: torch's type promotion is not followed\")",
        f"x = kc_fold_grow(x, [{tensors}])"]
    body = "\n".join([*head, view_lines(op).strip("\n"),
        f"outer, R, inner, grouped, ops = kc_fold_layout(x, [{tensors}], outer, R, inner, d_lo, d_hi)",
        "C = outer * inner  # the view's columns: the results, or (grouped) partial results",
        plan.format("outer", "R", "inner", int(p.split_target), "x.element_size()"),
        "if splits == 1 and not grouped:",
        "    " + kernel.launch("(tiles, 1)", args("y", div), pre_consts, num_warps=warps),
        "    return y",
        "part = torch.empty((splits, tiles if grouped else C), dtype=torch.float32, device=x.device)  # fp32 partials",
        kernel.launch("(tiles, splits)", args("part", "1.0"), pre_consts, num_warps=warps),
        "outer, R, inner = (1, part.numel(), 1) if grouped else (1, splits, C)",
        "C = outer * inner",
        plan.format("outer", "R", "inner", 0, "4"),
        plain.launch("(tiles, 1)", ["part", "y", "R // vr", "inner // vi", "C", "n_cb", "chunk", div], consts,
                     num_warps=warps),
        "return y"])
    helpers = (inspect.getsource(kc_bcast_numbers), inspect.getsource(kc_fold_grow)) if n else ()
    layout = tuple(inspect.getsource(f) for f in (kc_fold_group, kc_fold_read, kc_fold_layout))
    return Rendered((*helpers, *layout, TILES, PLAN, kernel, plain), body)
