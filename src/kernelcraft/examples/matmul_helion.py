"""Matrix product C = A @ B (level1/matmul, 4096 x 4096 fp32) in Helion: a 64 x 64 tile of C a program.

Helion's tile loops over (M, N) and, inside, over K, accumulating `x @ y` of each K tile in fp32, lowered by Helion
to one Triton kernel with `tl.dot`. `dot_precision="ieee"`: no TF32, so the product is a float32 one on every
precision policy. The config is fixed, so nothing is autotuned; Helion masks the edges, so any M, N and K run.
fp16 and bf16 inputs are accumulated in fp32 and written back in their dtype.
"""
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), static_shapes=True,
               dot_precision="ieee")
def matmul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    _, n = y.size()
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = acc + x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        if A.shape[1] == 0 or A.numel() == 0 or B.numel() == 0:
            return A.new_zeros((A.shape[0], B.shape[1]))
        return matmul(A, B)
