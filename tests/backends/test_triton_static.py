"""backends/triton_static.py: a candidate's Triton launches recorded on meta tensors, none run, and each compiled for
sm_90a as its arguments would specialize it, with ptxas's registers and spills read back, on a machine without a GPU
(Triton's bundled toolchain); from a process whose kernels are the interpreter's stand-ins too."""

import pytest
import torch

from kernelcraft.backends import triton_static

pytest.importorskip("triton")
if not (triton_static.tools() / "cuobjdump").exists():
    pytest.skip("this Triton has no bundled cuobjdump", allow_module_level=True)

SOURCE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


@triton.jit
def kc_scale(x, s):
    return x * s


@triton.jit
def kc_scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, kc_scale(tl.load(x_ptr + offs, mask=offs < n), s), mask=offs < n)


class ModelNew(Model):
    def forward(self, x):
        y = torch.empty_like(x)
        kc_scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), float(self.scale), BLOCK=1024,
                                                         num_warps=4)
        return y
'''


def load(tmp_path):
    import importlib.util

    path = tmp_path / "kc_static_candidate.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("kc_static_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_launches_recorded_and_put_back(tmp_path):
    _, module = load(tmp_path)
    kernel = module.kc_scale_kernel
    model = module.ModelNew(2.0).to("meta")
    launches = triton_static.recorded(module, lambda: model(torch.empty(5000, device="meta")))
    assert [(launch.name, launch.grid, launch.args[2:], launch.kwargs) for launch in launches] == [
        ("kc_scale_kernel", (5,), (5000, 2.0), {"BLOCK": 1024, "num_warps": 4})]
    assert module.kc_scale_kernel is kernel


def test_builds_compiled_for_sm90_in_a_process_of_their_own(tmp_path):
    path, _ = load(tmp_path)
    rows = triton_static.candidate_builds(path, [[[2.0], [[5000]]], [[0.5], [[7, 33]]]])
    assert [(r["case"], r["kernel"]) for r in rows] == [(0, "kc_scale_kernel"), (1, "kc_scale_kernel")]
    assert all(0 < r["registers"] <= 255 and r["local"] == 0 for r in rows)


def test_what_it_cannot_compile_says_why(tmp_path):
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    _, module = load(tmp_path)
    fn = module.kc_scale_kernel.fn
    with pytest.raises(TypeError, match="no compiled kernel"):
        triton_static.compile_launch(triton_static.Launch(InterpretedFunction(fn), (1,), (), {}))
    meta = torch.empty(4, device="meta")
    with pytest.raises(TypeError, match="y_ptr"):
        triton_static.compile_launch(triton_static.Launch(JITFunction(fn), (1,), (meta, "y", 4, 1.0), {"BLOCK": 16}))
    with pytest.raises(RuntimeError, match="ModelNew"):
        bad = tmp_path / "kc_no_model.py"
        bad.write_text("x = 1\n")
        triton_static.candidate_builds(bad, [[[], [[4]]]])
