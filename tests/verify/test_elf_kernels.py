"""The kernels an extension's shared object holds (verify/elf_kernels.py), read from ELF files built here with g++
and, where it is installed, nvcc (no GPU needed to build), demangled as the profiler names them."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from kernelcraft.verify.elf_kernels import elf_kernel_symbols, extension_kernels

HOST_CODE = r'''
// What nvcc's host code holds for each kernel: a host function of the kernel's name, whose device name it
// registers with the CUDA runtime as a string (here kept in a table).
void relu_kernel(const float*, float*, int) {}
template <typename T> void tkernel(const T*, T*, int) {}
namespace { void hidden_kernel(float*) {} }
extern "C" void vectorized_elementwise_kernel(float*) {}
void not_a_kernel(float*) {}
extern "C" void ampere_sgemm_128x64_nn_not_registered(float*) {}
void* handles[] = {(void*)&relu_kernel, (void*)&tkernel<float>, (void*)&hidden_kernel,
                   (void*)&vectorized_elementwise_kernel, (void*)&not_a_kernel};
const char* registered[] = {"_Z11relu_kernelPKfPfi", "_Z7tkernelIfEvPKT_PS0_i",
                            "_ZN12_GLOBAL__N_113hidden_kernelEPf", "vectorized_elementwise_kernel",
                            "ampere_sgemm_128x64_nn"};
'''


def test_the_kernels_an_elf_shared_object_registers_are_read_demangled(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("no g++ here")
    (tmp_path / "host.cpp").write_text(HOST_CODE)
    lib = tmp_path / "host.so"
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", str(tmp_path / "host.cpp"), "-o", str(lib)], check=True)
    assert elf_kernel_symbols(lib.read_bytes()) == {
        "_Z11relu_kernelPKfPfi", "_Z7tkernelIfEvPKT_PS0_i", "_ZN12_GLOBAL__N_113hidden_kernelEPf",
        "vectorized_elementwise_kernel"}  # not_a_kernel is registered nowhere; the GEMM name is no function here
    assert extension_kernels([lib, tmp_path / "missing.so", tmp_path / "host.cpp"]) == {
        "relu_kernel(float const*, float*, int)", "void tkernel<float>(float const*, float*, int)",
        "(anonymous namespace)::hidden_kernel(float*)", "vectorized_elementwise_kernel"}
    assert elf_kernel_symbols(b"") == set() and elf_kernel_symbols(b"\x7fELF" + bytes(60)) == set()


NVCC_SOURCE = r'''
__global__ void relu_kernel(const float* x, float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = x[0]; }
template <typename T> __global__ void tkernel(const T* x, T* y, int n) { if (threadIdx.x < n) y[0] = x[0]; }
extern "C" __global__ void vectorized_elementwise_kernel(float* y) { y[0] = 1; }
namespace { __global__ void hidden_kernel(float* y) { y[0] = 2; } }
__device__ float helper(float v) { return v * 2; }
void not_a_kernel(float* y) {}
void launch(const float* x, float* y, int n) {
    relu_kernel<<<1, 32>>>(x, y, n); tkernel<float><<<1, 32>>>(x, y, n); hidden_kernel<<<1, 1>>>(y);
}
'''


def test_the_kernels_of_an_nvcc_built_shared_object_are_the_ones_it_registers(tmp_path):
    """As a load_inline build holds them (nvcc's own registration, no GPU needed to build)."""
    from kernelcraft.backends.cuda_inline import find_nvcc

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc here")
    (tmp_path / "k.cu").write_text(NVCC_SOURCE)
    lib = tmp_path / "k.so"
    subprocess.run([nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", str(tmp_path / "k.cu"),
                    "-o", str(lib)], check=True, capture_output=True)
    assert extension_kernels([lib]) == {
        "relu_kernel(float const*, float*, int)", "void tkernel<float>(float const*, float*, int)",
        "(anonymous namespace)::hidden_kernel(float*)", "vectorized_elementwise_kernel"}


def test_demangling_is_the_profilers():
    """libkineto names a kernel by __cxa_demangle of its device name, as c10::demangle (torch._C._demangle) does."""
    assert torch._C._demangle("_Z11relu_kernelPKfPfi") == "relu_kernel(float const*, float*, int)"
    assert torch._C._demangle("vectorized_elementwise_kernel") == "vectorized_elementwise_kernel"
