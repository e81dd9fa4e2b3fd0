"""LayerNorm over the trailing dims (level1/layernorm: LayerNorm((64,256,256)) on (16,64,256,256)).

Rows are 4M elements and there are only 16 of them, so the row is split:
  1. ln_partial_kernel: program = (row, chunk); sums (x - K) and (x - K)^2 over CHUNK elements in
     fp32 vectors (K = the row's first element, a shift that keeps the variance accurate when
     |mean| >> std); the block totals are stored as fp64.
  2. ln_stats_kernel: program = row; adds the row's chunk partials in fp64 -> mean and
     rstd = 1/sqrt(biased var + eps), as torch.
  3. ln_apply_kernel: program = (row, tile); y = (x - mean) * rstd * weight + bias, weight/bias
     indexed by the position in the row (they have the normalized_shape).
The parameters live in `self.ln`, an nn.LayerNorm built exactly like the problem's.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_partial_kernel(x_ptr, part_ptr, n, chunks, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // chunks
    chunk = pid - row * chunks
    xr = x_ptr + row * n
    k = tl.load(xr).to(tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    q = tl.zeros([BLOCK], tl.float32)
    base = chunk * (BLOCK * ITERS)
    for it in range(ITERS):
        offs = base + it * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        d = tl.where(mask, tl.load(xr + offs, mask=mask, other=0.0).to(tl.float32) - k, 0.0)
        s += d
        q += d * d
    tl.store(part_ptr + 2 * pid, tl.sum(s, 0).to(tl.float64))
    tl.store(part_ptr + 2 * pid + 1, tl.sum(q, 0).to(tl.float64))


@triton.jit
def ln_stats_kernel(x_ptr, part_ptr, stats_ptr, n, chunks, eps, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.zeros([BLOCK_C], tl.float64)
    q = tl.zeros([BLOCK_C], tl.float64)
    for start in range(0, chunks, BLOCK_C):
        c = start + tl.arange(0, BLOCK_C)
        mask = c < chunks
        p = part_ptr + 2 * (row * chunks + c)
        s += tl.load(p, mask=mask, other=0.0)
        q += tl.load(p + 1, mask=mask, other=0.0)
    nf = tl.full([], 0.0, tl.float64) + n  # (n may arrive as a constexpr 1)
    mean_shifted = tl.sum(s, 0) / nf
    var = tl.maximum(tl.sum(q, 0) / nf - mean_shifted * mean_shifted, 0.0)
    k = tl.load(x_ptr + row * n).to(tl.float64)
    tl.store(stats_ptr + 2 * row, (k + mean_shifted).to(tl.float32))
    tl.store(stats_ptr + 2 * row + 1, (1.0 / tl.sqrt(var + eps)).to(tl.float32))


@triton.jit
def ln_apply_kernel(x_ptr, w_ptr, b_ptr, stats_ptr, y_ptr, n, tiles,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // tiles
    tile = pid - row * tiles
    mean = tl.load(stats_ptr + 2 * row)
    rstd = tl.load(stats_ptr + 2 * row + 1)
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


PART_BLOCK, PART_ITERS = 2048, 4     # 8192 elements per partial program
APPLY_BLOCK = 4096
STATS_BLOCK = 256


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = math.prod(self.ln.normalized_shape)
        rows = x.numel() // n if n else 0
        if rows == 0:
            return y
        w, b = self.ln.weight, self.ln.bias
        w = w.contiguous() if w is not None else None
        b = b.contiguous() if b is not None else None
        chunks = triton.cdiv(n, PART_BLOCK * PART_ITERS)
        partials = torch.empty(rows * chunks * 2, dtype=torch.float64, device=x.device)
        stats = torch.empty(rows * 2, dtype=torch.float32, device=x.device)
        ln_partial_kernel[(rows * chunks,)](x, partials, n, chunks, BLOCK=PART_BLOCK, ITERS=PART_ITERS,
                                            num_warps=8)
        ln_stats_kernel[(rows,)](x, partials, stats, n, chunks, float(self.ln.eps), BLOCK_C=STATS_BLOCK,
                                 num_warps=4)
        tiles = triton.cdiv(n, APPLY_BLOCK)
        ln_apply_kernel[(rows * tiles,)](x, w if w is not None else x, b if b is not None else x, stats, y,
                                         n, tiles, HAS_W=w is not None, HAS_B=b is not None,
                                         BLOCK=APPLY_BLOCK, num_warps=8)
        return y
