"""backends/triton_static.py: a module's Triton launches recorded on meta tensors, none run, and each compiled for
sm_90a as its arguments would specialize it, with ptxas's registers and spills read back, on a machine without a
GPU (Triton's bundled toolchain), from compiled kernels and from the interpreter's stand-ins alike."""

import importlib.util
import os

import pytest
import torch

from kernelcraft.backends import triton_static

pytest.importorskip("triton")
if not (triton_static.tools() / "cuobjdump").exists():
    pytest.skip("this Triton has no bundled cuobjdump", allow_module_level=True)

SOURCE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def kc_twice(x):
    return x * 2.0


@triton.jit
def kc_scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, kc_twice(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def forward(x):
    y = torch.empty_like(x)
    kc_scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, num_warps=4)
    return y
'''


def load(tmp_path):
    path = tmp_path / "kc_static_module.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("kc_static_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_launch_recorded_compiled_and_read_back(tmp_path):
    module = load(tmp_path)
    kernel = module.kc_scale_kernel
    launches = triton_static.recorded(module, lambda: module.forward(torch.empty(5000, device="meta")))
    assert [(launch.name, launch.grid, launch.kwargs["BLOCK"]) for launch in launches] == [
        ("kc_scale_kernel", (5,), 1024)]
    assert module.kc_scale_kernel is kernel  # put back
    compiled = triton_static.compile_launch(launches[0])
    res = triton_static.resources(compiled)
    assert 0 < res.registers <= 255 and res.local == 0 and not res.collapsed
    code = triton_static.sass(compiled)
    assert "LDG" in code and "STG" in code and ("FMUL" in code or "FADD" in code)  # the helper's product, inlined
    # a compiled kernel, or (TRITON_INTERPRET=1, as the built-in engineer's tests set it on a CPU) the interpreter's
    # stand-in, compiled from its function with the helper's put back afterwards
    assert type(kernel).__name__ == ("InterpretedFunction" if os.environ.get("TRITON_INTERPRET") == "1"
                                     else "JITFunction")
    assert module.kc_twice is not None and type(module.kc_twice) is type(kernel)


def test_an_argument_it_cannot_type_says_which(tmp_path):
    module = load(tmp_path)
    launch = triton_static.Launch(module.kc_scale_kernel, (1,), (torch.empty(4, device="meta"), "y", 4),
                                  {"BLOCK": 16})
    with pytest.raises(TypeError, match="y_ptr"):
        triton_static.compile_launch(launch)
