# WRONG ON PURPOSE (verifier test): drops eps - computes x * rsqrt(mean(x^2)) * w instead of
# x * rsqrt(mean(x^2) + eps) * w. SUBTLE: with randn inputs mean(x^2) ~ 1 and eps = 1e-6, so the
# outputs differ by only ~5e-7 relative, far inside a 1e-4 tolerance. It is caught only by inputs
# whose mean square is comparable to eps: an all-zero row (reference 0, this gives 0 * inf = NaN)
# or rows scaled down to ~1e-3. A verifier that tests only get_inputs() will pass it.
"""RMSNorm without eps (Triton)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * n + c, mask=c < n, other=0.0)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, 0) / n)          # BUG: should be sqrt(mean + eps)
    for start in range(0, n, BLOCK):
        c = start + cols
        mask = c < n
        x = tl.load(x_ptr + row * n + c, mask=mask, other=0.0)
        w = tl.load(w_ptr + c, mask=mask, other=0.0)
        tl.store(y_ptr + row * n + c, x * rstd * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n
        if rows:
            rmsnorm_kernel[(rows,)](x, self.weight, y, n, float(self.eps),
                                    BLOCK=min(triton.next_power_of_2(n), 4096))
        return y
