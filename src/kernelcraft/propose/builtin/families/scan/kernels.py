"""The scan kernel (with its helper combining a tile along the scanned dim) and its launches: one pass (PASS 0),
or chunk totals (PASS 1) then chunks scanned from the totals before them (PASS 2). A scan with a prologue (the op's
"pre": the pointwise steps of an elementwise op only it reads, torch.cumsum(x * mask, 1)) applies them to each tile
as it loads it, tensor operands read at x's own offsets (each made x's shape and contiguous first, a copy only
where it is not already), so the elementwise result is never written."""

from __future__ import annotations

from string import Template

import inspect

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.columns import COLUMNS, TILES
from kernelcraft.propose.builtin.families.pointwise.kernels import (kc_bcast_numbers, kc_promotes_to,
                                                                   operand_checks)
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines

_OPS = {"cumsum": ("0.0", "+"), "cumprod": ("1.0", "*")}  # identity, combine
_TOTALS = {"cumsum": "return tl.sum(x, 0)",
           "cumprod": "return tl.sum(tl.where((tl.arange(0, BLOCK) == BLOCK - 1)[:, None], tl.cumprod(x, 0), 0.0), 0)"}

_SCAN = Template('''
# program (column tile, split) over R-range [split * chunk, split * chunk + chunk).
# PASS 0: scan it from the identity; 1: only write its total to t[split]; 2: scan it from the totals before
$columns
split = tl.program_id(1)
lo = split * chunk
hi = tl.minimum(lo + chunk, R)
carry = tl.full([BLOCK_C], $ident, tl.float32)
if PASS == 2:
    for s0 in range(0, split, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        tmask = (s < split)[:, None] & cmask[None, :]
        t = tl.load(t_ptr + s.to(tl.int64)[:, None] * C + c[None, :], mask=tmask, other=$ident)
        carry = carry $op $total(t, BLOCK_S)
for start in range(lo, hi, BLOCK_R):
    rr = start + r
    mask = (rr < hi)[:, None] & cmask[None, :]
    offs = base[None, :] + $row[:, None] * inner
    x = tl.load(x_ptr + $src, mask=mask$src_mask, other=$ident).to(tl.float32)
$prologue    if PASS == 1:
        carry = carry $op $total(x, BLOCK_R)
    else:
        y = carry[None, :] $op tl.$fn(x, 0)  # masked rows hold the identity: the last row is the total
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
        carry = tl.sum(tl.where((r == BLOCK_R - 1)[:, None], y, 0.0), 0)
if PASS == 1:
    tl.store(t_ptr + split.to(tl.int64) * C + c, carry, mask=cmask)
''')


def scan(op: Op, p, names: Names) -> Rendered:
    kind = op.detail["op"]
    if kind not in _OPS:
        raise ValueError(f"unknown scan {kind!r}")
    ident, sym = _OPS[kind]
    reverse = bool(op.detail.get("reverse"))  # row r of the scan is row R - 1 - r of x and y
    shifted = bool(op.detail.get("exclusive"))  # row r of the scan reads row r - 1 of x (row 0: the identity)
    if reverse and shifted:
        raise ValueError("an exclusive reverse scan is not one this family reads")
    tag = f"{kind}_rev" if reverse else f"{kind}_excl" if shifted else kind
    total = TritonKernel(names(f"kc_{tag}_total"), ("x",), ("BLOCK",), _TOTALS[kind],
                         comment="the combination of x along axis 0")
    src, src_mask = ("offs - inner", " & (rr >= 1)[:, None]") if shifted else ("offs", "")
    pre = op.detail.get("pre") or []
    n = len(operand_refs(pre))
    prologue = ""
    if pre:  # the steps on each loaded tile; lanes outside the rows read set back to the identity after them
        load = f"tl.load(o{{}}_ptr + {src}, mask=mask{src_mask}, other=0.0).to(tl.float32)"
        lines = [*epilogue_lines(pre, lambda k: load.format(k)), f"x = tl.where(mask{src_mask}, x, {ident})"]
        prologue = indent("\n".join(lines), 4) + "\n"
    body = _SCAN.substitute(columns=COLUMNS, ident=ident, op=sym, total=total.name, fn=kind, prologue=prologue,
                            row="(R - 1 - rr).to(tl.int64)" if reverse else "rr.to(tl.int64)",
                            src=src, src_mask=src_mask)
    operands = [f"o{k}" for k in range(n)]
    kernel = TritonKernel(names(f"kc_{tag}_kernel"),
                          ("x_ptr", *(f"{o}_ptr" for o in operands), "y_ptr", "t_ptr", "R", "inner", "C", "chunk"),
                          ("BLOCK_R", "BLOCK_C", "BLOCK_S", "PASS"), body, Scalars.of(op))
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(int(op.detail["dim"]))
    block_r, tile, warps, target = int(p.BLOCK_R), int(p.TILE), int(p.num_warps), int(p.split_target)

    def launch(grid: str, rest: str, block_s: str, n: int) -> str:
        """A launch reading x and the prologue's operands, then `rest` (y, totals and the sizes)."""
        return kernel.launch(grid, ["x", *operands, *rest.split(", ")], {"BLOCK_R": "br", "BLOCK_C": "bc",
                                                                        "BLOCK_S": block_s, "PASS": n},
                             num_warps=warps)

    listed = ", ".join(operands)
    head = "" if not n else "\n".join([
        operand_checks(listed, listed),
        *(f"{o} = {o}.expand(x.shape).contiguous()  # read at x's offsets (a copy only where it is not x's layout)"
          for o in operands)])
    body = head + f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
d = {dim} % max(x.dim(), 1)
R = x.shape[d] if x.dim() else 1
inner = math.prod(x.shape[d + 1:])
C = x.numel() // R
br, bc, _ = kc_tiles(R, C, inner, 0, {block_r}, {tile})
col_tiles = triton.cdiv(C, bc)
splits = max(1, min(triton.cdiv(R, br), triton.cdiv({target}, col_tiles), 1024)) if col_tiles < {target} else 1
chunk = triton.cdiv(triton.cdiv(R, splits), br) * br
splits = triton.cdiv(R, chunk)
if splits == 1:
    {launch("(col_tiles, 1)", "y, y, R, inner, C, chunk", "1", 0)}
    return y
totals = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # fp32 total of each chunk
bs = min(triton.next_power_of_2(splits), max(1, {tile} // bc))
{launch("(col_tiles, splits)", "y, totals, R, inner, C, chunk", "bs", 1)}
{launch("(col_tiles, splits)", "y, totals, R, inner, C, chunk", "bs", 2)}
return y'''
    helpers = (inspect.getsource(kc_bcast_numbers), inspect.getsource(kc_promotes_to)) if n else ()
    return Rendered((*helpers, TILES, total, kernel), body)
