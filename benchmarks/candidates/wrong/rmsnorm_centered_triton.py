# WRONG ON PURPOSE (verifier test): normalises by the row's standard deviation (subtracts the row
# mean before squaring, LayerNorm-style) instead of the root mean square, but still scales the
# UN-centred x. For randn rows the mean is ~1/sqrt(n), so the scale is off by ~1/(2n) relative:
# ~4e-3 at the small size (hidden 130), ~1.2e-4 at hidden 4096 - a subtle math error that a 1e-4
# check catches at small sizes, and on any input with a non-zero row mean (e.g. randn + 1) easily.
"""RMSNorm that uses the variance instead of the mean square (Triton)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    q = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * n + c, mask=c < n, other=0.0)
        s += x
        q += x * x
    mean = tl.sum(s, 0) / n
    var = tl.sum(q, 0) / n - mean * mean            # BUG: RMSNorm uses mean(x^2), not the variance
    rstd = 1.0 / tl.sqrt(var + eps)
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
