# WRONG ON PURPOSE (verifier test): the grid has rows // 2 programs, so only the FIRST HALF of the
# rows is computed; the other rows keep whatever torch.empty_like's memory held. (If the caching
# allocator hands back a freed buffer that already holds the correct softmax - e.g. the reference
# output of the same input - those rows look right: a verifier must keep the reference alive or
# poison outputs.) With one row, nothing at all is computed.
"""Row softmax that only processes the first half of the rows (Triton)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m_run = tl.full([], -float("inf"), tl.float32)
    s_run = tl.full([], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=-float("inf"))
        m_new = tl.maximum(m_run, tl.max(x, 0))
        s_run = s_run * tl.exp(m_run - m_new) + tl.sum(tl.exp(x - m_new), 0)
        m_run = m_new
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * n_cols + c, mask=c < n_cols, other=-float("inf"))
        tl.store(y_ptr + row * n_cols + c, tl.exp(x - m_run) / s_run, mask=c < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n
        block = min(triton.next_power_of_2(n), 4096)
        if rows // 2:
            softmax_kernel[(rows // 2,)](x, y, n, BLOCK=block)   # BUG: should be (rows,)
        return y
