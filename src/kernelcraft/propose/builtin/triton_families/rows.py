"""Reduction family (softmax, log_softmax, sum/mean/max/min/logsumexp/2-norm over a dim, or over adjacent dims taken as
one) over a contiguous x seen as
[outer, R, inner]: a program takes a tile of BLOCK_C "columns" (outer*inner of them, R elements each, `inner`
apart) and BLOCK_R of R at a time. inner == 1 is the plain row case (several short rows per program);
inner > 1 takes columns that sit side by side so loads coalesce. Softmax keeps all of R in one tile when it
fits (falls back to an online running max/sum at run time when not); reduce splits R over programs when there
are few columns and combines the fp32 partials with a second launch."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.codegen import attr


def _softmax_moves(op: Op) -> list[tuple]:
    row = ("Whole row in one program: load the reduced extent once (up to {m} elements, short rows packed "
           "{t} elements per program), max/exp/sum in registers, one write; {w} warps")
    online = ("Online {name} in {b}-element tiles: one pass keeps a running max and rescaled sum, a second pass "
              "writes; {w} warps")
    name = op.kind.replace("_", "-")
    def rowp(m, t, w):
        return {"variant": "row", "ROW_MAX": m, "TILE": t, "num_warps": w}

    def onlinep(b, t, w):
        return {"variant": "online", "BLOCK_R": b, "TILE": t, "num_warps": w}

    return [
        (row.format(m=16384, t=4096, w=4), "memory", rowp(16384, 4096, 4)),
        (row.format(m=16384, t=4096, w=8), "memory", rowp(16384, 4096, 8)),
        (row.format(m=16384, t=2048, w=4), "parallelism", rowp(16384, 2048, 4)),
        (online.format(name=name, b=4096, w=8), "control", onlinep(4096, 4096, 8)),
        (row.format(m=8192, t=8192, w=8), "memory", rowp(8192, 8192, 8)),
        (online.format(name=name, b=1024, w=4), "control", onlinep(1024, 2048, 4)),
    ]


def _reduce_moves(op: Op) -> list[tuple]:
    split = ("Tiles of {t} elements over the reduced dim accumulated in fp32 registers, reduced once at the end; "
             "with few output columns the reduced dim is split over programs (aim: {s}) and the partials combined "
             "by a second launch; {w} warps")
    base = {"BLOCK_R": 1024, "TILE": 4096, "num_warps": 4, "split_target": 2048}
    return [
        (split.format(t=4096, s=2048, w=4), "parallelism", base),
        (split.format(t=2048, s=8192, w=4), "parallelism",
         {**base, "BLOCK_R": 256, "TILE": 2048, "split_target": 8192}),
        ("Long reduced tiles (4096 of R by few columns) to keep many loads in flight per program", "memory",
         {**base, "BLOCK_R": 4096, "TILE": 8192, "num_warps": 8}),
        (split.format(t=8192, s=2048, w=8), "parallelism", {**base, "TILE": 8192, "num_warps": 8}),
        ("One program per column tile walks the whole reduced dim: no partial buffer, a single launch", "control",
         {**base, "split_target": 0}),
    ]

# Shared with the argreduce, scan and loss families: the tile-shape helper and the column prologue.
TILES = '''
def kc_tiles(R, C, inner, row_max, block_r, tile):
    """(BLOCK_R, BLOCK_C, whole R in one tile) for reducing R in an [outer, R, inner] view. Columns that sit side
    by side in memory (inner > 1) are taken several at a time so that loads coalesce."""
    np2 = triton.next_power_of_2
    want_c = 1 if inner == 1 else min(np2(inner), 32)
    single = np2(R) * want_c <= row_max
    br = np2(R) if single else min(np2(R), block_r, max(1, tile // want_c))
    return br, min(np2(C), max(want_c, tile // br)), single
'''

# Column c (of C = outer * inner) starts at (c // inner) * R * inner + c % inner; its R elements are `inner` apart.
COLUMNS = '''    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < C
    base = (c // inner) * R * inner + c % inner
    r = tl.arange(0, BLOCK_R)'''

_SOFTMAX = Template('''
@triton.jit
def kc_${name}_kernel(x_ptr, y_ptr, R, inner, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, SINGLE: tl.constexpr):
$columns
    if SINGLE:  # all of R in one tile: one read, one write
        offs = base[None, :] + r.to(tl.int64)[:, None] * inner
        mask = (r < R)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, 0)
        e = tl.exp(x - m[None, :])
        s = tl.sum(e, 0)
        tl.store(y_ptr + offs, ($single).to(y_ptr.dtype.element_ty), mask=mask)
    else:  # online: running max and a sum rescaled whenever the max grows, then a writing pass
        m_run = tl.full([BLOCK_C], -float("inf"), tl.float32)
        s_run = tl.zeros([BLOCK_C], tl.float32)
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            x = tl.load(x_ptr + offs, mask=(rr < R)[:, None] & cmask[None, :], other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_run, tl.max(x, 0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # no -inf - -inf while a column is all -inf
            s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe[None, :]), 0)
            m_run = m_new
        $prelude
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            mask = (rr < R)[:, None] & cmask[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + offs, ($online).to(y_ptr.dtype.element_ty), mask=mask)
''')

_REDUCE = Template('''
@triton.jit
def kc_${name}_kernel(x_ptr, y_ptr, R, inner, C, chunk, div, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (column tile, split): R-range [split * chunk, split * chunk + chunk); result row `split` of y
$columns
    lo = tl.program_id(1) * chunk
    hi = tl.minimum(lo + chunk, R)
$init
    for start in range(lo, hi, BLOCK_R):
        rr = start + r
        mask = (rr < hi)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base[None, :] + rr.to(tl.int64)[:, None] * inner, mask=mask, other=$ident)
$combine
$final
    tl.store(y_ptr + tl.program_id(1).to(tl.int64) * C + c, out.to(y_ptr.dtype.element_ty), mask=cmask)
''')


def _render_softmax(op: Op, p: dict) -> tuple[list[str], str]:
    if op.kind == "softmax":
        single, prelude = "e * (1.0 / s)[None, :]", "inv = 1.0 / s_run"
        online = "tl.exp(x - m_run[None, :]) * inv[None, :]"
    else:
        single, prelude, online = "x - (m + tl.log(s))[None, :]", "lse = m_run + tl.log(s_run)", "x - lse[None, :]"
    kernel = _SOFTMAX.substitute(name=op.kind, columns=COLUMNS, single=single, prelude=prelude, online=online)
    row_max = int(p["ROW_MAX"]) if p["variant"] == "row" else 0
    block_r, tile, warps = int(p.get("BLOCK_R", 4096)), int(p["TILE"]), int(p["num_warps"])
    body = f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
d = {int(op.detail["dim"])} % max(x.dim(), 1)
R = x.shape[d] if x.dim() else 1
inner = math.prod(x.shape[d + 1:])
C = x.numel() // R
br, bc, single = kc_tiles(R, C, inner, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
kc_{op.kind}_kernel[(triton.cdiv(C, bc),)](x, y, R, inner, C, BLOCK_R=br, BLOCK_C=bc, SINGLE=single, num_warps=warps)
return y'''
    return [TILES, kernel], body


# logsumexp: per element of the tile a running max m and a sum s of exp(x - m), rescaled when m grows; the column's
# result max(m) + log(sum(s * exp(m - max(m)))). Split partials are logsumexps, combined by the same kernel.
_LSE_INIT = '''    m = tl.full([BLOCK_R, BLOCK_C], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)'''
_LSE_COMBINE = '''        x = x.to(tl.float32)
        m_new = tl.maximum(m, x, propagate_nan=tl.PropagateNan.ALL)
        m_safe = tl.where((m_new == -float("inf")) | (m_new == float("inf")), 0.0, m_new)  # no inf - inf
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new'''
_LSE_FINAL = '''    mc = tl.max(m, 0)
    mc_safe = tl.where((mc == -float("inf")) | (mc == float("inf")), 0.0, mc)
    sc = tl.sum(s * tl.exp(m - mc_safe[None, :]), 0)
    nan = tl.max((m != m).to(tl.int32), 0) > 0
    out = tl.where(nan, float("nan"), tl.where(mc == float("inf"), float("inf"), mc_safe + tl.log(sc)))'''


def _render_reduce(op: Op, p: dict) -> tuple[list[str], str]:
    kind = op.detail["op"]
    acc = "    acc = tl.full([BLOCK_R, BLOCK_C], {}, tl.float32)"
    if kind in ("sum", "mean"):
        ident, init, combine, final = "0.0", acc.format("0.0"), "acc + x.to(tl.float32)", "tl.sum(acc, 0) / div"
    elif kind in ("max", "min"):
        ident = '-float("inf")' if kind == "max" else 'float("inf")'
        fn = "maximum" if kind == "max" else "minimum"
        init, combine = acc.format(ident), f"tl.{fn}(acc, x.to(tl.float32), propagate_nan=tl.PropagateNan.ALL)"
        final = f'tl.where(tl.max((acc != acc).to(tl.int32), 0) > 0, float("nan"), tl.{kind}(acc, 0))'  # NaN wins
    elif kind == "norm2":  # sqrt of the sum of squares; split partials are norms, whose 2-norm is the whole's
        ident, init = "0.0", acc.format("0.0")
        combine, final = "acc + x.to(tl.float32) * x.to(tl.float32)", "tl.sqrt(tl.sum(acc, 0))"
    elif kind == "logsumexp":
        ident, init, combine, final = '-float("inf")', _LSE_INIT, _LSE_COMBINE, _LSE_FINAL
    else:
        raise ValueError(f"unknown reduction {kind!r}")
    if kind != "logsumexp":
        combine, final = f"        acc = {combine}", f"    out = {final}"
    name = f"{kind}_reduce"
    kernel = _REDUCE.substitute(name=name, columns=COLUMNS, ident=ident, init=init, combine=combine, final=final)
    keep = bool(op.detail.get("keepdim"))
    if isinstance(op.detail.get("dim"), (list, tuple)):  # adjacent dims (analyze.py checks): reduced as one
        dims = [int(d) for d in op.detail["dim"]]
        span = (f"d_lo = min(d % max(x.dim(), 1) for d in {dims!r})\n    "
                f"d_hi = max(d % max(x.dim(), 1) for d in {dims!r}) + 1")
        dim = repr(dims)
    else:
        dim = attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
        span = "d_lo = dim % max(x.dim(), 1)\n    d_hi = d_lo + 1"
    div = "float(R)" if kind == "mean" else "1.0"
    block_r, tile, warps, target = int(p["BLOCK_R"]), int(p["TILE"]), int(p["num_warps"]), int(p["split_target"])
    body = f'''
dim = {dim}
if dim is None:  # all elements
    R, inner, shape = x.numel(), 1, {"[1] * x.dim()" if keep else "[]"}
else:
    {span}
    R, inner, shape = math.prod(x.shape[d_lo:d_hi]), math.prod(x.shape[d_hi:]), list(x.shape)
    if x.dim():
        {"shape[d_lo:d_hi] = [1] * (d_hi - d_lo)" if keep else "del shape[d_lo:d_hi]"}
y = torch.empty(shape, dtype=x.dtype, device=x.device)
C = y.numel()
if C == 0:
    return y
br, bc, _ = kc_tiles(max(R, 1), C, inner, 0, {block_r}, {tile})
col_tiles = triton.cdiv(C, bc)
splits = max(1, min(triton.cdiv(R, br), triton.cdiv({target}, col_tiles), 1024)) if col_tiles < {target} else 1
chunk = triton.cdiv(triton.cdiv(max(R, 1), splits), br) * br
splits = triton.cdiv(max(R, 1), chunk)
if splits == 1:
    kc_{name}_kernel[(col_tiles, 1)](x, y, R, inner, C, chunk, {div}, BLOCK_R=br, BLOCK_C=bc, num_warps={warps})
    return y
part = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # fp32 partials, one row per split
kc_{name}_kernel[(col_tiles, splits)](x, part, R, inner, C, chunk, 1.0, BLOCK_R=br, BLOCK_C=bc, num_warps={warps})
br, bc, _ = kc_tiles(splits, C, C, 0, {block_r}, {tile})
kc_{name}_kernel[(triton.cdiv(C, bc), 1)](part, y, splits, C, C, splits, {div}, BLOCK_R=br, BLOCK_C=bc,
                                          num_warps={warps})
return y'''
    return [TILES, kernel], body


KINDS = {"softmax": (_softmax_moves, _render_softmax), "log_softmax": (_softmax_moves, _render_softmax),
         "reduce": (_reduce_moves, _render_reduce)}
