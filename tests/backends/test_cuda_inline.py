"""The cuda_inline and cpp backends: log trimming, ptxas figures, and real builds in the build process.

The builds are slow on a CPU-only machine (torch's headers through g++ or nvcc): marked `slow`, still
run by default. The C++ build goes into the session cache, where the verifier's tests find it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelcraft.backends import cuda_inline
from kernelcraft.backends.cuda_inline import _key, ptxas_summary, trim_log
from kernelcraft.candidate import Candidate
from kernelcraft.verify.build import BuildPool, inline_cache, run_build
from tests.helpers import FIXTURES

NINJA_FAILURE = """\
Using /root/.cache/torch_extensions/py311_cpu as PyTorch extensions root...
Emitting ninja build file /tmp/b/build.ninja...
Building extension module relu...
Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)
[1/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile --dependency-output cuda.cuda.o.d -c /tmp/b/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile --dependency-output cuda.cuda.o.d -c /tmp/b/cuda.cu -o cuda.cuda.o
/tmp/b/cuda.cu(12): error: identifier "undefined_thing" is undefined
      y[i] = undefined_thing;
             ^

/tmp/b/cuda.cu(14): warning #177-D: variable "unused" was declared but never referenced

1 error detected in the compilation of "/tmp/b/cuda.cu".
ninja: build stopped: subcommand failed.
"""

GCC_FAILURE = """\
[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=relu -isystem /torch/include -fPIC -std=c++20 -c /tmp/b/main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=relu -isystem /torch/include -fPIC -std=c++20 -c /tmp/b/main.cpp -o main.o
In file included from /tmp/b/helpers.h:2,
                 from /tmp/b/main.cpp:3:
/tmp/b/main.cpp:6:12: error: 'not_declared' was not declared in this scope
ninja: build stopped: subcommand failed.
"""

PTXAS = """\
ptxas info    : 28 bytes gmem
ptxas info    : Compiling entry function '_Z11relu_kernelPKfPfx' for 'sm_90'
ptxas info    : Function properties for _Z11relu_kernelPKfPfx
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'softmax_kernel' for 'sm_90a'
ptxas info    : Function properties for softmax_kernel
    48 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]
"""


# -- logs ---------------------------------------------------------------------------------------------

def test_trim_log_drops_ninja_noise_and_keeps_errors():
    kept = trim_log(NINJA_FAILURE).splitlines()
    assert kept == [
        '/tmp/b/cuda.cu(12): error: identifier "undefined_thing" is undefined',
        "      y[i] = undefined_thing;",
        "             ^",
        '/tmp/b/cuda.cu(14): warning #177-D: variable "unused" was declared but never referenced',
        '1 error detected in the compilation of "/tmp/b/cuda.cu".',
    ]


def test_trim_log_drops_gcc_command_lines():
    assert trim_log(GCC_FAILURE).splitlines() == [
        "/tmp/b/main.cpp:6:12: error: 'not_declared' was not declared in this scope"]


def test_trim_log_cuts_long_logs_in_the_middle():
    text = "\n".join(f"/tmp/x.cu({i}): error: number {i}" for i in range(200))
    kept = trim_log(text, limit=20).splitlines()
    assert len(kept) == 21
    assert kept[0].endswith("number 0") and kept[-1].endswith("number 199")
    assert kept[10] == "... (180 lines cut) ..."


def test_ptxas_summary():
    assert ptxas_summary(PTXAS) == [
        {"kernel": "_Z11relu_kernelPKfPfx", "stack": 0, "spill_stores": 0, "spill_loads": 0, "registers": 10},
        {"kernel": "softmax_kernel", "stack": 48, "spill_stores": 8, "spill_loads": 12, "registers": 255,
         "smem": 8192},
    ]
    assert ptxas_summary("no ptxas output here") == []


def test_build_key_depends_on_what_shapes_the_binary(monkeypatch):
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    base = {"name": "relu", "cpp_sources": "int f();", "cuda_sources": "x", "build_directory": "/a",
            "verbose": False}
    key = _key(base)
    assert re.fullmatch(r"[0-9a-f]{24}", key)
    assert _key({**base, "build_directory": "/elsewhere", "verbose": True}) == key
    assert _key({**base, "cuda_sources": "y"}) != key
    assert _key({**base, "extra_cuda_cflags": ["-O3"]}) != key
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    assert _key(base) != key


OBJECT_ONLY = pytest.mark.skipif(cuda_inline.torch_has_cuda(), reason="the object-only path of a torch without CUDA")


@OBJECT_ONLY
def test_this_torch_has_no_cuda():
    # The object-only path below is taken exactly because of this.
    assert not cuda_inline.torch_has_cuda()
    assert cuda_inline.find_nvcc() is not None


# -- real builds, in the build subprocess ---------------------------------------------------------------

def _build(name: str, build_cache: Path):
    return run_build((FIXTURES / f"{name}.py").read_text(), build_cache, "9.0", 600)


@pytest.mark.slow
@OBJECT_ONLY
def test_cuda_candidate_compiles_to_objects_with_ptxas_figures(tmp_path):
    outcome = _build("relu_cuda_inline", tmp_path)
    assert outcome.ok, outcome.log
    assert outcome.object_only
    assert not outcome.deferred
    assert "ptxas info" in outcome.log and re.search(r"Used \d+ registers", outcome.log)
    assert [r["kernel"] for r in outcome.resources] == ["_Z11relu_kernelPKfPfx"]
    assert outcome.resources[0]["registers"] > 0
    assert list(tmp_path.glob("kc_test_relu_cuda-*/cuda_0.o"))


@pytest.mark.slow
@OBJECT_ONLY
def test_cuda_candidate_with_an_error_fails_the_build(tmp_path):
    outcome = _build("relu_cuda_inline_error", tmp_path)
    assert not outcome.ok
    assert not outcome.object_only
    # The .cu file is one '#include <torch/extension.h>' line and then the candidate's CUDA source.
    cuda = re.search(r'CUDA = r"""(.*?)"""', (FIXTURES / "relu_cuda_inline_error.py").read_text(), re.S)[1]
    line = 1 + next(i for i, text in enumerate(cuda.split("\n"), 1) if "kc_undeclared_identifier" in text)
    assert re.search(rf'cuda_0\.cu\({line}\): error: identifier "kc_undeclared_identifier" is undefined',
                     outcome.log), outcome.log
    assert "float v = kc_undeclared_identifier;" in outcome.log  # nvcc quotes the line
    assert "nvcc" not in outcome.log.split("\n")[0]


@pytest.mark.slow
def test_cpp_candidate_builds_for_real(cache_root):
    # into the candidate's own part of the session cache, where the verifier's tests find it built
    own = inline_cache(cache_root, (FIXTURES / "relu_cpp.py").read_text(), "9.0")
    outcome = _build("relu_cpp", own)
    assert outcome.ok, outcome.log
    assert not outcome.object_only and not outcome.deferred
    assert outcome.resources == []
    assert list(own.glob("kc_test_relu_cpp-*/kc_test_relu_cpp.so"))


@pytest.mark.slow
def test_cpp_candidate_with_an_error_fails_the_build(tmp_path):
    outcome = _build("relu_cpp_error", tmp_path)
    assert not outcome.ok
    assert re.search(r"main\.cpp:6:12: error: .not_declared_anywhere. was not declared", outcome.log), outcome.log


@pytest.mark.slow
def test_build_pool_records_outcomes(cache_root):
    """A second pool finds the outcome on disk (the C++ build itself is already cached above)."""
    candidate = Candidate.from_file(FIXTURES / "relu_cpp.py")
    first = BuildPool(cache_root, workers=1)
    try:
        outcome = first.submit(candidate, "9.0").result()
        assert first.submit(candidate, "9.0").result() is outcome  # one build per candidate in flight
    finally:
        first.close()
    assert outcome.ok and not outcome.object_only
    second = BuildPool(cache_root, workers=1)
    try:
        again = second.submit(candidate, "9.0").result()
    finally:
        second.close()
    assert again.cached and again.ok and again.log == outcome.log
