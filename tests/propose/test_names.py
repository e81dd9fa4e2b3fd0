"""propose/names.py: what a block defines at module level and what it reads without defining."""

from __future__ import annotations

from kernelcraft.propose.names import names
from tests.helpers import FIXTURES


def test_a_kernel_file_reads_nothing_it_does_not_define():
    found = names((FIXTURES / "relu_cuda_inline.py").read_text())
    assert found.free == set()
    assert {"torch", "nn", "load_inline", "CPP", "CUDA", "ext", "ModelNew"} <= found.defines
    assert found.imports == {"torch", "nn", "load_inline"}


def test_a_modelnew_block_without_its_kernel_reads_the_kernels_names():
    source = (FIXTURES / "relu_triton.py").read_text()
    model = source[source.index("\nclass ModelNew"):]
    assert names(model).free >= {"nn", "torch", "relu_kernel", "triton", "BLOCK"}


def test_local_names_are_no_module_definitions_and_builtins_are_not_free():
    found = names("import math\n"
                  "def f(x, *rest, scale=2):\n    y = [i * scale for i in range(len(rest))]\n    return max(y), x\n"
                  "class C:\n    attr = 1\n"
                  "for k in range(3):\n    pass\n"
                  "with open('p') as handle:\n    pass\n"
                  "try:\n    pass\nexcept ValueError as err:\n    pass\n"
                  "total = sum(v for v in undefined_list)\n")
    assert found.defines == {"math", "f", "C", "k", "handle", "err", "total"}
    assert found.free == {"undefined_list"}


def test_not_python_is_none():
    assert names("__global__ void k(float* y) { y[threadIdx.x] = 0.0f; }") is None
    assert names("pip install triton") is None
