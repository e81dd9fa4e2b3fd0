"""Chunk statistics of long rows: the first pass of a normalization whose rows are split over programs (the layer
and RMS norms, and the group and instance norms whose rows are (n, group) slabs). Program (row, split) writes the
mean and the sum of squared deviations (RMS: the sum of squares) of one chunk of its row; the normalizing pass
merges them per row."""

from __future__ import annotations

from kernelcraft.propose.builtin.family import Names, TritonKernel

# The chunk's whole tiles are read without a mask (16-byte loads whatever N is); its last, partial tile is masked.
_STATS = '''
# program (row, split): mean and sum of squared deviations (RMS: sum of squares) of one chunk of the row
row = tl.program_id(0).to(tl.int64)
lo = tl.program_id(1).to(tl.int64) * chunk
hi = tl.minimum(lo + chunk, N)
full = (hi - lo) // BLOCK_N  # whole tiles
tail = lo + full * BLOCK_N
base = x_ptr + row * N
cols = tl.arange(0, BLOCK_N)
acc = tl.zeros([BLOCK_N], tl.float32)
if RMS or not WELFORD:
    for i in range(0, full):
        x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
        acc += x * x if RMS else x
    x = tl.load(base + tail + cols, mask=tail + cols < hi, other=0.0).to(tl.float32)
    acc += x * x if RMS else x
if RMS:
    m2 = tl.sum(acc, 0)
elif WELFORD:  # one pass: a running mean and M2 per lane (every lane counts alike over whole tiles)
    mean = tl.zeros([BLOCK_N], tl.float32)
    for i in range(0, full):
        x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
        delta = x - mean
        mean += delta * (1.0 / (i + 1.0))
        acc += delta * (x - mean)
    m = tail + cols < hi
    cnt = full.to(tl.float32) + m.to(tl.float32)
    x = tl.load(base + tail + cols, mask=m, other=0.0).to(tl.float32)
    delta = x - mean
    mean += tl.where(m, delta / tl.maximum(cnt, 1.0), 0.0)
    acc += tl.where(m, delta * (x - mean), 0.0)
    mu = tl.sum(cnt * mean, 0) / tl.sum(cnt, 0)
    m2 = tl.sum(acc, 0) + tl.sum(cnt * (mean - mu) * (mean - mu), 0)
else:  # two passes over the chunk: the mean, then squared deviations from it
    mu = tl.sum(acc, 0) / (hi - lo).to(tl.float32)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for i in range(0, full):
        x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
        acc += (x - mu) * (x - mu)
    x = tl.load(base + tail + cols, mask=tail + cols < hi, other=0.0).to(tl.float32)
    acc += tl.where(tail + cols < hi, (x - mu) * (x - mu), 0.0)
    m2 = tl.sum(acc, 0)
if not RMS:
    tl.store(mean_ptr + row * splits + tl.program_id(1), mu)
tl.store(m2_ptr + row * splits + tl.program_id(1), m2)
'''


def stats_kernel(names: Names) -> TritonKernel:
    """The chunk-statistics kernel, named for the op that launches it: x is [rows, N] contiguous; mean and m2 are
    [rows, splits] fp32 (mean unwritten when RMS); WELFORD picks one-pass Welford over two passes."""
    return TritonKernel(names("kc_norm_stats_kernel"), ("x_ptr", "mean_ptr", "m2_ptr", "N", "chunk", "splits"),
                        ("BLOCK_N", "RMS", "WELFORD"), _STATS)
