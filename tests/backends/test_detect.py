"""Which backend a candidate's source uses, detected from what it imports and calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.backends import BACKENDS, detect_backend, get_backend
from kernelcraft.candidate import Candidate, CandidateError
from tests.helpers import FIXTURES, REPO

NVRTC = '''
from kernelcraft.backends.nvrtc import load_kernels
kernels = load_kernels(SOURCE)
'''
NVRTC_BARE_CALL = 'k = load_kernels(r"""extern "C" __global__ void f() {}""")\n'
TRITON = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr):
    pass
'''
TRITON_FROM = "from triton import language as tl\n"
TRITON_JIT_ONLY = "@ triton.jit\ndef k(x):\n    pass\n"
CUDA_INLINE = '''
from torch.utils.cpp_extension import load_inline
ext = load_inline(
    name="relu",
    cpp_sources=CPP,
    cuda_sources=CUDA,
    functions=["relu"],
)
'''
CPP = '''
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="relu", cpp_sources=CPP, functions=["relu"])
'''
TORCH = '''
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''
GLUON = '''
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

@gluon.jit
def k(x_ptr):
    pass
'''
GLUON_MODULE_ONLY = "import triton.experimental.gluon.language as gl\n"
HELION = '''
import helion
import helion.language as hl
import torch

@helion.kernel(config=helion.Config(block_sizes=[64]))
def add(x, y):
    pass
'''
HELION_FROM = "from helion import language as hl\n"
COMMENTED = '''
import torch
# import triton
# kernels = load_kernels(SOURCE)   (the NVRTC version, kept for reference)
# ext = load_inline(name="x", cuda_sources=CUDA)
'''


@pytest.mark.parametrize("source, expected", [
    (NVRTC, "cuda_nvrtc"), (NVRTC_BARE_CALL, "cuda_nvrtc"),
    (TRITON, "triton"), (TRITON_FROM, "triton"), (TRITON_JIT_ONLY, "triton"),
    (GLUON, "gluon"), (GLUON_MODULE_ONLY, "gluon"), (HELION, "helion"), (HELION_FROM, "helion"),
    ("# import helion\nimport torch\n", "torch"), ("x = 'helion'\nimport triton\n", "triton"),
    (CUDA_INLINE, "cuda_inline"), (CPP, "cpp"),
    (TORCH, "torch"), (COMMENTED, "torch"), ("", "torch"),
])
def test_detect_backend(source, expected):
    assert detect_backend(source) == expected


@pytest.mark.parametrize("name, expected", [
    ("relu_triton", "triton"), ("relu_cpp", "cpp"), ("relu_cuda_inline", "cuda_inline"),
    ("relu_nvrtc", "cuda_nvrtc"), ("relu_torch", "torch"),
])
def test_detect_fixture_files(name, expected):
    assert Candidate.from_file(FIXTURES / f"{name}.py").backend == expected


BENCHMARKS = sorted(p for backend in BACKENDS for p in (REPO / "benchmarks" / "candidates" / backend).glob("*.py"))


@pytest.mark.skipif(not BENCHMARKS, reason="no benchmark candidates")
@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_benchmark_candidates_are_detected_as_their_folder(path: Path):
    assert detect_backend(path.read_text()) == path.parent.name


def test_get_backend():
    assert get_backend("triton").devices == ("cuda", "cpu")
    assert get_backend("cuda_inline").prebuild and get_backend("cpp").prebuild
    assert not get_backend("cuda_nvrtc").prebuild
    assert get_backend("cuda_nvrtc").devices == ("cuda",)
    with pytest.raises(ValueError, match="unknown backend 'opencl'"):
        get_backend("opencl")


def test_candidate_backend_override_and_validation():
    source = (FIXTURES / "relu_torch.py").read_text()
    assert Candidate(source).backend == "torch"
    assert Candidate(source, backend="triton").backend == "triton"
    with pytest.raises(ValueError, match="unknown backend"):
        Candidate(source, backend="nope")
    assert Candidate(source).sha == Candidate(source, name="other").sha
    assert Candidate(source).sha != Candidate(source + "\n").sha


def test_candidate_from_file_errors(tmp_path):
    with pytest.raises(CandidateError, match="defines no ModelNew"):
        Candidate.from_file(FIXTURES / "no_model_new.py")
    with pytest.raises(CandidateError, match="does not exist"):
        Candidate.from_file(tmp_path / "missing.py")
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"class ModelNew: pass\n\x00\x00")
    with pytest.raises(CandidateError, match="binary"):
        Candidate.from_file(binary)
    c = Candidate.from_file(FIXTURES / "relu_triton.py")
    assert (c.name, c.backend) == ("relu_triton", "triton")
