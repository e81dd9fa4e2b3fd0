"""Column tiles over a contiguous tensor seen as [outer, R, inner]: the layout of the families that reduce or scan
along one dim (argreduce, scan, the cross-entropy and KL losses). A column is one of the C = outer * inner vectors
of R elements `inner` apart; a program takes BLOCK_C columns and walks R in BLOCK_R tiles.

TILES is the host helper choosing the tile shape (`kc_tiles`, one text for every op, so a chain emits it once);
COLUMNS the kernel prologue that places a program's columns (a kernel body's first lines, a `$columns` slot)."""

from __future__ import annotations

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
