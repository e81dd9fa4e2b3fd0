"""Column tiles over a contiguous tensor seen as [outer, R, inner]: the layout of the families that reduce or scan
along one dim (the reduce family, argreduce, scan, the cross-entropy and KL losses). A column is one of the
C = outer * inner vectors of R elements `inner` apart; a program takes BLOCK_C columns and walks R in BLOCK_R tiles.

TILES is the host helper choosing the tile shape (`kc_tiles`, one text for every op, so a chain emits it once);
COLUMNS the kernel prologue that places a program's columns (a kernel body's first lines, a `$columns` slot).

PLAN and PLACE are the reductions' pair (reduce, argreduce): `kc_plan` also picks how a program's columns are
placed and the grid, and PLACE places them. Columns found by dividing a flat column index by `inner` cannot be
proven adjacent in memory, so the compiler loads them one element at a time; over a leading or middle dim PLACE
instead takes BLOCK_C adjacent columns of one outer index (WITHIN), the program id split once into (outer index,
column block) on the host's n_cb, and the row length and column stride enter as multiples of the widest vector they
allow (VEC_R, VEC_I), so the loads are provably contiguous and aligned and become vector loads. `lean_walk` is the
loop of their lean kernels (reduce's and argreduce's) over a split's R tiles after PLACE."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent

TILES = '''
def kc_tiles(R, C, inner, row_max, block_r, tile, columns=32):
    """(BLOCK_R, BLOCK_C, whole R in one tile) for reducing R in an [outer, R, inner] view. Columns that sit side
    by side in memory (inner > 1) are taken up to `columns` at a time so that loads coalesce."""
    np2 = triton.next_power_of_2
    want_c = 1 if inner == 1 else min(np2(inner), columns)
    single = np2(R) * want_c <= row_max
    br = np2(R) if single else min(np2(R), block_r, max(1, tile // want_c))
    return br, min(np2(C), max(want_c, tile // br)), single
'''

# Column c (of C = outer * inner) starts at (c // inner) * R * inner + c % inner; its R elements are `inner` apart.
COLUMNS = '''c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
cmask = c < C
base = (c // inner) * R * inner + c % inner
r = tl.arange(0, BLOCK_R)'''

PLAN = '''
def kc_plan(outer, R, inner, row_max, block_r, tile, columns, target, item):
    """How to reduce R in a contiguous [outer, R, inner] view of `item`-byte elements: (BLOCK_R, BLOCK_C, WITHIN,
    n_cb, column tiles, splits, chunk, VEC_R, VEC_I). WITHIN: a tile is BLOCK_C adjacent columns of one outer index
    (n_cb column blocks per outer index), taken where such tiles are at least a quarter of `tile`; else BLOCK_C
    consecutive columns (whole rows when inner == 1). With fewer tiles than `target` R is split over programs,
    `chunk` R tiles each. VEC_R, VEC_I: the widest vectors (16 bytes at most) that R and inner are multiples of,
    for the row length (inner == 1) and the column stride (WITHIN)."""
    np2 = triton.next_power_of_2
    rows = max(R, 1)
    br, bc, single = kc_tiles(rows, outer * inner, inner, row_max, block_r, tile, columns)
    bc_within = min(np2(inner), max(min(np2(inner), columns), tile // br))
    within = inner > 1 and 4 * br * bc_within >= tile
    if within:
        bc, n_cb = bc_within, triton.cdiv(inner, bc_within)
        tiles = outer * n_cb
    else:
        n_cb, tiles = 1, triton.cdiv(outer * inner, bc)
    steps = triton.cdiv(rows, br)
    splits = 1 if single or tiles >= target else max(1, min(steps, triton.cdiv(target, tiles), 1024))
    chunk = triton.cdiv(steps, splits)
    # R and inner reach the kernels as R // VEC_R and inner // VEC_I, int32 below 2**31, multiplied back there: a
    # size of 2**31 or more takes no vector width, so that it arrives, and is multiplied, as int64
    vr = next(v for v in (8, 4, 2, 1) if v * item <= 16 and R % v == 0) if inner == 1 and R < 2**31 else 1
    vi = next(v for v in (8, 4, 2, 1) if v * item <= 16 and inner % v == 0) if within and inner < 2**31 else 1
    return br, bc, within, n_cb, tiles, triton.cdiv(steps, chunk), chunk, vr, vi
'''

# A program's columns: c (their indices, into the result), cmask, base (where each starts), r (a tile's rows).
PLACE = '''R = R_v * VEC_R  # as multiples of their vector widths, so the compiler knows the loads' alignment
inner = inner_v * VEC_I
if WITHIN:  # BLOCK_C adjacent columns of outer index o: contiguous in memory, vector loads
    pid = tl.program_id(0)
    o = (pid // n_cb).to(tl.int64)
    col = (pid % n_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = col < inner
    c = o * inner + col
    base = o * R * inner + col
else:  # BLOCK_C consecutive columns of C (whole rows when inner == 1)
    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < C
    base = (c // inner) * R * inner + c % inner
r = tl.arange(0, BLOCK_R)'''


# The lean walk over a split's R tiles [k0, k1) (the reductions' lean kernels, after PLACE): a tile's address is a
# uniform start plus loop-invariant offsets (int32 over adjacent columns: the host checks BLOCK_R * inner fits)
# instead of 64-bit offsets recomputed per element, and rows are masked only in a ragged last tile (full tiles'
# masked-off columns load no identity: their results are never stored).
_LEAN_WALK = Template('''k0 = tl.program_id(1) * chunk
k1 = tl.minimum(k0 + chunk, tl.cdiv(R, BLOCK_R))
k_full = tl.minimum(k1, R // BLOCK_R)  # tiles wholly inside R: no row mask
step = tl.full([], BLOCK_R, tl.int64) * inner  # elements from one tile to the next (int64: k * step is too)
if WITHIN:  # the program's first column at a uniform start, its columns at int32 offsets from it
    pid = tl.program_id(0)
    start = (pid // n_cb).to(tl.int64) * R * inner + (pid % n_cb) * BLOCK_C
    offs = r[:, None] * inner + tl.arange(0, BLOCK_C)[None, :]
else:
    start = tl.zeros([], tl.int64)
    offs = base[None, :] + r.to(tl.int64)[:, None] * inner
$init
for k in range(k0, k_full):
    x = tl.load(x_ptr + (start + k * step) + offs, mask=cmask[None, :])$cast
$tile
if k_full < k1:  # the ragged last tile
    k = k_full
    x = tl.load(x_ptr + (start + k * step) + offs, mask=((k * BLOCK_R + r) < R)[:, None] & cmask[None, :], other=$ident)$cast
$tile''')


def lean_walk(init: str, tile: str, ident: str, cast: str = "") -> str:
    """Kernel lines walking a split's R tiles the lean way (_LEAN_WALK): `init` before the loop, then each tile
    loaded into x (`cast` appended to the load, e.g. ".to(tl.float32)"; masked rows hold `ident`) and folded in by
    the `tile` lines (unindented; run once in the loop and once for the ragged last tile)."""
    return _LEAN_WALK.substitute(init=init, tile=indent(tile, 4), ident=ident, cast=cast)


# The online statistics of each column's R values (softmax, logsumexp, cross-entropy): a running max and a sum of
# exponentials rescaled whenever the max grows, one pass over R in BLOCK_R tiles (statements at one indent, inside
# the kernel's `else:` when R does not fit one tile)
ONLINE_MAX_SUM = '''    m_run = tl.full([BLOCK_C], -float("inf"), tl.float32)
    s_run = tl.zeros([BLOCK_C], tl.float32)
    for start in range(0, R, BLOCK_R):
        rr = start + r
        offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
        x = tl.load(x_ptr + offs, mask=(rr < R)[:, None] & cmask[None, :], other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_run, tl.max(x, 0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # no -inf - -inf while a column is all -inf
        s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe[None, :]), 0)
        m_run = m_new'''
