"""Scan family (inclusive cumsum, cumprod along any dim, forward or reverse: flip(scan(flip(x)))) over a contiguous x seen as [outer, R, inner], like
rows.py: a program takes BLOCK_C columns and walks R in BLOCK_R tiles; each tile is scanned in fp32 registers
(tl.cumsum / tl.cumprod) and offset by the running carry of the tiles before it, so rows of any length take one
read and one write. With few columns R is split in chunks over programs: a first launch writes each chunk's
total, a second scans each chunk starting from the combined totals of the chunks before it."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.families.rows.columns import COLUMNS, TILES

_OPS = {"cumsum": ("0.0", "+"), "cumprod": ("1.0", "*")}  # identity, combine


def _scan_moves(op: Op) -> list[tuple]:
    walk = ("Column tiles walk the scanned dim in {b}-element tiles: each tile scanned in fp32 registers and offset "
            "by the running carry of the tiles before it: one read, one write; {w} warps")
    split = ("Few long rows: the scanned dim split in chunks over programs (aim: {s}); a first launch writes each "
             "chunk's total, a second re-reads its chunk and starts from the totals before it; {b}-element tiles")
    base = {"BLOCK_R": 2048, "TILE": 4096, "num_warps": 4, "split_target": 0}
    return [
        (walk.format(b=2048, w=4), "control", base),
        (walk.format(b=4096, w=8), "memory", {**base, "BLOCK_R": 4096, "TILE": 8192, "num_warps": 8}),
        (split.format(s=2048, b=1024), "parallelism", {**base, "BLOCK_R": 1024, "split_target": 2048}),
        (split.format(s=8192, b=2048), "parallelism", {**base, "split_target": 8192}),
        (walk.format(b=512, w=2), "control", {**base, "BLOCK_R": 512, "TILE": 1024, "num_warps": 2}),
    ]


_SCAN = Template('''
@triton.jit
def kc_${name}_total(x, BLOCK: tl.constexpr):  # the combination of x along axis 0
    $total


@triton.jit
def kc_${name}_kernel(x_ptr, y_ptr, t_ptr, R, inner, C, chunk, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                      BLOCK_S: tl.constexpr, PASS: tl.constexpr):
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
            carry = carry $op kc_${name}_total(t, BLOCK_S)
    for start in range(lo, hi, BLOCK_R):
        rr = start + r
        mask = (rr < hi)[:, None] & cmask[None, :]
        offs = base[None, :] + $row[:, None] * inner
        x = tl.load(x_ptr + offs, mask=mask, other=$ident).to(tl.float32)
        if PASS == 1:
            carry = carry $op kc_${name}_total(x, BLOCK_R)
        else:
            y = carry[None, :] $op tl.$fn(x, 0)  # masked rows hold the identity: the last row is the total
            tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
            carry = tl.sum(tl.where((r == BLOCK_R - 1)[:, None], y, 0.0), 0)
    if PASS == 1:
        tl.store(t_ptr + split.to(tl.int64) * C + c, carry, mask=cmask)
''')

_TOTALS = {"cumsum": "return tl.sum(x, 0)",
           "cumprod": "return tl.sum(tl.where((tl.arange(0, BLOCK) == BLOCK - 1)[:, None], tl.cumprod(x, 0), 0.0), 0)"}


def _render_scan(op: Op, p: dict) -> tuple[list[str], str]:
    kind = op.detail["op"]
    if kind not in _OPS:
        raise ValueError(f"unknown scan {kind!r}")
    ident, sym = _OPS[kind]
    reverse = bool(op.detail.get("reverse"))  # row r of the scan is row R - 1 - r of x and y
    row = "(R - 1 - rr).to(tl.int64)" if reverse else "rr.to(tl.int64)"
    tag = f"{kind}_rev" if reverse else kind
    kernel = _SCAN.substitute(name=tag, fn=kind, columns=COLUMNS, ident=ident, op=sym, total=_TOTALS[kind], row=row)
    dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(int(op.detail["dim"]))
    block_r, tile, warps, target = int(p["BLOCK_R"]), int(p["TILE"]), int(p["num_warps"]), int(p["split_target"])
    name = f"kc_{tag}_kernel"
    body = f'''
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
    {name}[(col_tiles, 1)](x, y, y, R, inner, C, chunk, BLOCK_R=br, BLOCK_C=bc, BLOCK_S=1, PASS=0,
        num_warps={warps})
    return y
totals = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # fp32 total of each chunk
bs = min(triton.next_power_of_2(splits), max(1, {tile} // bc))
{name}[(col_tiles, splits)](x, y, totals, R, inner, C, chunk, BLOCK_R=br, BLOCK_C=bc, BLOCK_S=bs, PASS=1,
    num_warps={warps})
{name}[(col_tiles, splits)](x, y, totals, R, inner, C, chunk, BLOCK_R=br, BLOCK_C=bc, BLOCK_S=bs, PASS=2,
    num_warps={warps})
return y'''
    return [TILES, kernel], body


KINDS = {"scan": (_scan_moves, _render_scan)}
