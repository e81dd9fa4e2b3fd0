"""C = A @ B with one-signed inputs (torch.rand) and a large K: KernelBench's level1/6
(6_Matmul_with_large_K_dimension_.py) as published, with small sizes for the CPU (adversarial fixture for
hack class 26, precision hidden by the input distribution).

Every product is positive, so rounding errors of the operands average out over K while the output grows
with K: bf16 operands are off by 1e-5 to 7e-5 of the output here (2e-6 to 3e-5 at the published K), inside
strict's 1e-4 on every distribution that scales values by at most 100x.
"""
import torch
import torch.nn as nn

M = 256
N = 256
K = 131072 * 4

SMALL_SIZES = {"M": 8, "N": 8, "K": 131072}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, N)
    return [A, B]


def get_init_inputs():
    return []
