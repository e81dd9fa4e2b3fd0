# WRONG ON PURPOSE (verifier test): ignores the input and returns torch::zeros_like(x). Right shape,
# dtype and device, right for every negative input, wrong wherever x > 0 - and right for all-negative
# or all-zero test inputs, so a verifier needs inputs with positive values (randn is enough).
"""'ReLU' that returns zeros (CPU C++ extension via load_inline)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r'''
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
    return torch::zeros_like(x);   // BUG: never looks at x
}
'''

ext = load_inline(name="kc_wrong_relu_zeros_cpp", cpp_sources=CPP_SOURCE, functions=["relu_forward"],
                  verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_forward(x)
