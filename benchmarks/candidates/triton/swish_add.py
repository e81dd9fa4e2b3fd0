"""level2/swish_add fused in one Triton kernel: z = x * sigmoid(x) + y (one read of each input,
one write, instead of torch's three elementwise passes)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swish_add_kernel(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    z = x * tl.sigmoid(x) + y
    tl.store(z_ptr + offs, z.to(z_ptr.dtype.element_ty), mask=mask)


BLOCK = 2048


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x, y = torch.broadcast_tensors(x, y)
        x = x.contiguous()
        y = y.contiguous()
        z = torch.empty_like(x)
        n = z.numel()
        if n:
            swish_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, z, n, BLOCK=BLOCK, num_warps=8)
        return z
