"""The [outer, R, inner] column view of a reduction over one dim (or adjacent dims taken as one), shared by the
families that reduce along R (rows here; argreduce, scan, loss): the tile-shape host helper and the kernels'
column prologue.

Column c (of C = outer * inner) starts at (c // inner) * R * inner + c % inner; its R elements are `inner` apart.
A program takes a tile of BLOCK_C columns and BLOCK_R of R at a time; columns that sit side by side in memory
(inner > 1) are taken several at a time so that loads coalesce.
"""

from __future__ import annotations

from textwrap import dedent

# A module-level host helper, the same for every op (a chain emits it once).
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

# The kernel's first lines (as they sit in its def): the program's columns c, their mask, the offset `base` of each
# column's first element, and the R offsets r of one tile.
COLUMNS = '''    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < C
    base = (c // inner) * R * inner + c % inner
    r = tl.arange(0, BLOCK_R)'''


def prologue() -> str:
    """COLUMNS at a kernel body's own level (a TritonKernel spec's body, which its definition indents)."""
    return dedent(COLUMNS)
