"""RMSNorm over the last dim (level1/rmsnorm): y = x * rsqrt(mean(x^2, -1) + eps) * weight.

One program per row. Rows up to SINGLE_MAX are loaded once and kept in registers; longer rows take
two passes (sum of squares, then scale). `self.weight` is created exactly as the problem's Model.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n
    yr = y_ptr + row * n
    cols = tl.arange(0, BLOCK)
    if SINGLE:
        mask = cols < n
        x = tl.load(xr + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / n + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(yr + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n, BLOCK):
            c = start + cols
            x = tl.load(xr + c, mask=c < n, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n + eps)
        for start in range(0, n, BLOCK):
            c = start + cols
            mask = c < n
            x = tl.load(xr + c, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
            tl.store(yr + c, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


SINGLE_MAX = 8192
LOOP_BLOCK = 4096


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        if rows:
            if n <= SINGLE_MAX:
                block = triton.next_power_of_2(n)
                rmsnorm_kernel[(rows,)](x, w, y, n, float(self.eps), BLOCK=block, SINGLE=True,
                                        num_warps=4 if block <= 2048 else 8)
            else:
                rmsnorm_kernel[(rows,)](x, w, y, n, float(self.eps), BLOCK=LOOP_BLOCK, SINGLE=False,
                                        num_warps=8)
        return y
