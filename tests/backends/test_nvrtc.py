"""The cuda_nvrtc backend without a GPU: signature parsing, argument packing, NVRTC compilation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from kernelcraft.backends import CompileError, nvrtc
from kernelcraft.backends.cuda_inline import ptxas_summary
from kernelcraft.backends.nvrtc import (KernelModule, Launcher, Param, _dims, _packer, _option_kwargs, compile_cubin,
                                        cuda_include_dirs, parse_signatures)

ARCH = "sm_90a"

SIGNATURES = r'''
// extern "C" __global__ void commented_out(int* p) {}
/* extern "C" __global__ void block_commented(float* q,
                                              int n) {} */
__device__ float helper(float v) { return v * 2.0f; }

extern "C" __global__ void __launch_bounds__(256) scale(const float* __restrict__ x, float* y,
                                                        float alpha, long long n)
{
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = helper(alpha * x[i]);
}

extern "C" __global__ __launch_bounds__(128, 2) void add(const float *a, const float * b, float *c,
                                                         unsigned int n, const int m /* a scalar */)
{
}

extern "C" __global__ void no_args(void) {}

extern "C" __global__ void arrays(float out[], const double in[], unsigned long long n) {}
'''

SCALE = r'''
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float alpha, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
'''


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KERNELCRAFT_CACHE", str(tmp_path))
    return tmp_path / "nvrtc"


# -- signatures ---------------------------------------------------------------------------------------

def test_parse_signatures_finds_every_kernel_and_skips_comments():
    sigs = parse_signatures(SIGNATURES)
    assert sorted(sigs) == ["add", "arrays", "no_args", "scale"]


def test_parse_signatures_pointer_vs_scalar():
    sigs = parse_signatures(SIGNATURES)
    assert sigs["scale"] == [Param("x", "float", True), Param("y", "float", True),
                             Param("alpha", "float", False), Param("n", "long long", False)]
    assert sigs["add"] == [Param("a", "float", True), Param("b", "float", True), Param("c", "float", True),
                           Param("n", "unsigned int", False), Param("m", "int", False)]
    assert sigs["no_args"] == []
    assert sigs["arrays"] == [Param("out", "float", True), Param("in", "double", True),
                              Param("n", "unsigned long long", False)]


# -- launching, as far as a CPU goes ----------------------------------------------------------------

def _launcher(source=SIGNATURES, name="scale") -> Launcher:
    sigs = parse_signatures(source)
    return Launcher(KernelModule(source, b"", "", sigs), name, sigs[name])


def test_scalar_arguments_are_packed_to_their_c_type():
    packed = _packer("scale", Param("n", "unsigned int", False))(7, 0)
    assert packed == 7 and packed.dtype == np.uint32
    packed = _packer("scale", Param("n", "long long", False))(torch.tensor(5), 0)
    assert packed == 5 and packed.dtype == np.int64
    packed = _packer("scale", Param("alpha", "float", False))(0.5, 0)
    assert packed == np.float32(0.5) and packed.dtype == np.float32


def test_pointer_arguments():
    assert _packer("scale", Param("x", "float", True))(4096, 0) == np.uint64(4096)
    with pytest.raises(ValueError, match=r"scale\(x\): tensor on cpu"):
        _packer("scale", Param("x", "float", True))(torch.zeros(4), 0)
    with pytest.raises(TypeError, match="pointer parameter needs a tensor"):
        _packer("scale", Param("x", "float", True))(1.5, 0)


def test_struct_scalars_need_a_numpy_scalar():
    with pytest.raises(TypeError, match="not a plain scalar"):
        _packer("scale", Param("v", "float2", False))(1.0, 0)
    value = np.float64(2.0)
    assert _packer("scale", Param("v", "float2", False))(value, 0) is value


def test_wrong_argument_count_is_refused_before_any_launch():
    with pytest.raises(TypeError, match=r"scale takes 4 arguments \(float x, float y, float alpha, "
                                        r"long long n\), got 2"):
        _launcher()(1, 2, grid=(1,), block=(1,))


def test_unknown_kernel_name():
    module = KernelModule(SIGNATURES, b"", "", parse_signatures(SIGNATURES))
    assert module.scale.params == module["scale"].params
    assert module.scale is module["scale"]  # one launcher a kernel, its packers and configurations kept
    with pytest.raises(AttributeError, match=r"no __global__ kernel named 'scal'.*'add'"):
        module.scal


def test_dims():
    assert _dims(5) == (5,)
    assert _dims((2, 3)) == (2, 3)
    assert _dims([1, 2, 3]) == (1, 2, 3)
    for bad in ((0,), (1, 1, 1, 1), ()):
        with pytest.raises(ValueError):
            _dims(bad)


# -- options, arch, cache ---------------------------------------------------------------------------

def test_option_kwargs():
    assert _option_kwargs(("--use_fast_math", "-lineinfo")) == {"use_fast_math": True, "lineinfo": True}
    assert _option_kwargs(("--maxrregcount=32",)) == {"max_register_count": 32}
    assert _option_kwargs(("-DA=3", "-DB")) == {"define_macro": [("A", "3"), "B"]}
    assert _option_kwargs(()) == {}


@pytest.mark.parametrize("option", ["-I/etc", "--include-path=/tmp", "-G", "--fmad=false", "use_fast_math"])
def test_option_kwargs_rejects_unknown_options(option):
    with pytest.raises(CompileError, match="unsupported NVRTC option"):
        _option_kwargs((option,))


def test_default_arch_from_environment(monkeypatch):
    monkeypatch.setenv("KERNELCRAFT_ARCH", "sm_80")
    assert nvrtc.default_arch() == "sm_80"


def test_cache_dir_follows_environment(cache):
    assert nvrtc.cache_dir() == cache


def test_cuda_include_dirs_find_cuda_fp16():
    dirs = cuda_include_dirs()
    assert len(dirs) == 1
    assert (Path(dirs[0]) / "cuda_fp16.h").exists()


# -- compiling on a machine without a GPU -------------------------------------------------------------

def _ptxas_logs() -> bool:
    """Whether NVRTC's log must hold ptxas's lines. On a machine with a GPU driver it may not: on an H100 with
    NVRTC 13 the log came back empty for code compiled before, in the same process or an earlier one (comments
    apart); KernelModule.resources asks the driver instead there."""
    return not torch.cuda.is_available()


def test_compile_cubin_without_gpu(cache):
    if not _ptxas_logs():
        pytest.skip("a GPU machine: NVRTC may leave out ptxas's lines (see _ptxas_logs)")
    cubin, log, hit = compile_cubin(SCALE, ARCH)
    assert cubin[:4] == b"\x7fELF"
    assert not hit
    assert re.search(r"Used \d+ registers", log)
    assert "ptxas" in log
    [summary] = ptxas_summary(log)
    assert summary["kernel"] == "scale" and summary["registers"] > 0 and summary["spill_stores"] == 0
    assert len(list(cache.glob("*.cubin"))) == 1


def test_second_compile_is_a_cache_hit(cache):
    cubin, log, hit = compile_cubin(SCALE, ARCH)
    assert not hit
    cubin2, log2, hit2 = compile_cubin(SCALE, ARCH)
    assert hit2 and (cubin2, log2) == (cubin, log)
    _, _, other_arch_hit = compile_cubin(SCALE, "sm_80")
    assert not other_arch_hit
    _, _, other_options_hit = compile_cubin(SCALE, ARCH, ("-lineinfo",))
    assert not other_options_hit


def test_compile_log_has_no_nul_characters(cache):
    _, log, _ = compile_cubin(SCALE, ARCH)
    assert "\x00" not in log


def test_syntax_error_raises_compile_error_naming_the_line(cache):
    broken = 'extern "C" __global__ void k(float* x)\n{\n    float v = x[0]\n    x[0] = v;\n}\n'
    with pytest.raises(CompileError) as info:
        compile_cubin(broken, ARCH)
    log = info.value.log
    assert re.search(r"kernel\.cu\(4\): error: expected a \";\"", log), log
    assert "x[0] = v;" in log  # the offending source line is quoted
    assert "default_program" not in log
    assert not list(cache.glob("*.cubin"))  # failures are not cached


def test_cuda_headers_are_found_by_nvrtc(cache):
    source = '#include <cuda_fp16.h>\nextern "C" __global__ void h(__half* x) { x[0] = __float2half(1.0f); }\n'
    cubin, _, _ = compile_cubin(source, ARCH)
    assert cubin[:4] == b"\x7fELF"


def test_defines_reach_the_compiler(cache):
    source = '#ifndef KC_VALUE\n#error "KC_VALUE is not defined"\n#endif\n' \
             'extern "C" __global__ void k(int* x) { x[0] = KC_VALUE; }\n'
    compile_cubin(source, ARCH, ("-DKC_VALUE=3",))
    with pytest.raises(CompileError, match="KC_VALUE is not defined"):
        compile_cubin(source, ARCH)


def test_unknown_option_is_a_compile_error(cache):
    with pytest.raises(CompileError, match="unsupported NVRTC option '-G'"):
        compile_cubin(SCALE, ARCH, ("-G",))


def test_load_kernels_with_an_explicit_arch(cache):
    before = len(nvrtc.COMPILE_RECORDS)
    module = nvrtc.load_kernels(SCALE + "\n// load_kernels test\n", arch=ARCH)
    assert list(module.signatures) == ["scale"]
    assert [p.name for p in module.scale.params] == ["x", "y", "alpha", "n"]
    assert len(nvrtc.COMPILE_RECORDS) == before + 1
    record = nvrtc.COMPILE_RECORDS[-1]
    assert not record.cached and record.seconds > 0 and record.module is module
    assert "registers" in record.log or not _ptxas_logs()
    again = nvrtc.load_kernels(SCALE + "\n// load_kernels test\n", arch=ARCH)
    assert again is module  # the in-process cache: no second compile, no second record
    assert len(nvrtc.COMPILE_RECORDS) == before + 1


def test_load_kernels_without_a_kernel(cache):
    with pytest.raises(CompileError, match="no __global__ kernel found"):
        nvrtc.load_kernels('__device__ float f(float x) { return x; }\n', arch=ARCH)


def test_cluster_grids_are_counted_in_blocks_and_must_divide():
    from kernelcraft.backends.nvrtc import _clusters

    assert _clusters((32,), (4,)) == ((8,), (4,))
    assert _clusters((8, 3), 2) == ((4, 3), (2, 1))
    with pytest.raises(ValueError, match="whole number of clusters"):
        _clusters((30,), (4,))


STAGED = r'''
extern "C" __global__ void staged(const float* __restrict__ x, float* __restrict__ y, int n)
{
    __shared__ float tile[64];
    int i = blockIdx.x * 64 + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = tile[63 - threadIdx.x];
}
'''


@pytest.mark.gpu
def test_resources_come_from_the_driver(cache):
    module = nvrtc.load_kernels(STAGED + "\n// resources test\n")
    [res] = module.resources(0)
    assert res["kernel"] == "staged" and res["registers"] > 0 and res["smem"] == 64 * 4 and res["local"] == 0


@pytest.mark.gpu
def test_launches_keep_one_configuration_per_shape_and_stay_correct(cache):
    """A launcher packs and configures from what it kept: the same grid given as a tuple or a list is one
    configuration, another grid another; each launch writes what the kernel computes; a CPU tensor is refused by
    name; a launch on a side stream runs there."""
    module = nvrtc.load_kernels(STAGED + "\n// configurations test\n")
    x = torch.arange(256, dtype=torch.float32, device="cuda")
    want = x.reshape(4, 64).flip(1).reshape(-1)
    for grid in ((4,), [4], 4):
        y = torch.zeros_like(x)
        module.staged(x, y, 256, grid=grid, block=(64,))
        assert torch.equal(y, want)
    module.staged(x, torch.zeros_like(x), 128, grid=(2,), block=(64,))
    assert len(module.staged._configs) == 2
    with pytest.raises(ValueError, match=r"staged\(x\): tensor on cpu, kernel launches on cuda:0"):
        module.staged(x.cpu(), y, 256, grid=(4,), block=(64,))
    side, y = torch.cuda.Stream(), torch.zeros_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        module.staged(x, y, 256, grid=(4,), block=(64,))
    side.synchronize()
    assert torch.equal(y, want)
