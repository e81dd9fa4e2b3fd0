"""The cute backend (backends/kinds/cute.py): its kernels read from the source and told by their compiled names, its
runtime's calls recorded by kernel name, the bundled CuTe DSL examples compiled for a Hopper GPU on any machine (the
DSL compiles without one, `CUTE_DSL_ARCH`), and on a GPU each judged by the verifier: the honest ones `ok`, their
wrong twins `incorrect`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelcraft import backends
from kernelcraft.backends import detect_backend, get_backend
from kernelcraft.candidate import EXAMPLES, Candidate
from kernelcraft.verify import TimingConfig, VerifyConfig
from kernelcraft.verify.attribution import Launches, Ran, attribute
from tests.helpers import assert_examples_judged

CUTE = get_backend("cute")
cute_here = pytest.mark.skipif(CUTE.unavailable("cuda") is not None, reason="the CuTe DSL is not installed here")
KERNELS = {"softmax_cute": "softmax_kernel", "matmul_cute": "matmul_kernel"}
COMPILE = '''
import importlib.util, json, sys
import torch
spec = importlib.util.spec_from_file_location("example", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
compiled = module.compiled(torch.empty(2, 2))  # traced and compiled for the arch CUTE_DSL_ARCH names, no GPU touched
print(json.dumps(sorted(compiled.kernel_info)))
'''


def test_the_examples_are_cute_and_declare_their_kernels():
    for stem, kernel in KERNELS.items():
        for path in (EXAMPLES / f"{stem}.py", EXAMPLES / f"{stem}_wrong.py"):
            source = path.read_text()
            assert detect_backend(source) == "cute" and Candidate.from_file(path).backend == "cute"
            assert CUTE.declared_kernels(source) == {kernel}


def test_a_compiled_name_carries_the_kernel_function_it_was_traced_from():
    declared = {"softmax_kernel"}
    assert CUTE.carries("kernel_cutlass_softmax_kernel_ptrf32gmem_ptrf32gmem__0", declared)
    assert CUTE.carries("kernel_softmax_kernel_0", declared)  # the mangling prefix removed
    assert not CUTE.carries("kernel_cutlass_softmax_kernel2_ptrf32gmem__0", declared)  # another function
    assert not CUTE.carries("kernel_cutlass_online_softmax_kernel_ptrf32gmem__0", declared)  # a library's
    assert not CUTE.carries("softmax_kernel", declared)  # not the DSL's naming


def test_the_workers_load_nothing_another_candidate_compiled():
    assert backends.worker_env("cuda")["CUTE_DSL_DISABLE_FILE_CACHING"] == "1"


def test_a_runtime_launch_counts_only_where_it_carries_a_declared_kernel():
    """Attribution (verify/attribution.py) over what the profiler saw and what the DSL's runtime ran: a launch
    recorded and carrying a declared kernel is the candidate's; one the runtime ran for a library's kernel is not,
    and its count is a bound, so a kernel launched twice in one call still counts."""
    own = "kernel_cutlass_relu_kernel_ptrf32gmem__0"
    other = "kernel_cutlass_layernorm_fwd_ptrf32gmem__0"
    launches = Launches(recorded={"cute": {own: 1, other: 1}})
    found = attribute([Ran(own, 7, 10.0), Ran(own, 7, 10.0), Ran(other, 7, 5.0)], launches, {"relu_kernel"}, 7)
    shares = {k.name: k for k in found.kernels}
    assert shares[own].custom and shares[own].evidence == "cute_launch" and shares[own].calls == 2
    assert not shares[other].custom and shares[other].evidence is None
    assert found.custom_fraction == 0.8
    unrecorded = attribute([Ran(own, 7, 10.0)], Launches(recorded={"cute": {}}), {"relu_kernel"}, 7)
    assert not unrecorded.kernels[0].custom and unrecorded.kernels[0].evidence == "name_only"


def test_a_missing_dsl_is_one_line_naming_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("cutlass") else
                        real(name, *a))
    assert CUTE.unavailable("cuda") == ("backend_unavailable", "a cute candidate needs cutlass, not installed here "
                                                               "(pip install 'kernelcraft[cute]')")
    assert CUTE.unavailable("cpu")[0] == "backend_needs_cuda"


@cute_here
@pytest.mark.parametrize("stem", sorted(KERNELS) + [f"{s}_wrong" for s in sorted(KERNELS)])
def test_the_examples_compile_for_hopper_without_a_gpu(stem):
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    proc = subprocess.run([sys.executable, "-c", COMPILE, str(EXAMPLES / f"{stem}.py")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = json.loads(proc.stdout.strip().splitlines()[-1])
    kernel = KERNELS[stem.removesuffix("_wrong")]
    assert len(names) == 1 and CUTE.carries(names[0], {kernel}), names


@pytest.mark.gpu
@cute_here
def test_the_examples_are_judged_on_a_gpu(tmp_path):
    """On a GPU their kernels are recorded as the DSL's runtime launched them, and counted as the candidate's."""
    config = VerifyConfig(trials=3, compile_baseline=False, timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path)
    assert_examples_judged("cuda:0", [("level1/softmax", "softmax_cute", "ok"),
                                      ("level1/softmax", "softmax_cute_wrong", "incorrect"),
                                      ("level1/matmul", "matmul_cute", "ok"),
                                      ("level1/matmul", "matmul_cute_wrong", "incorrect")], config)


BROKEN = '''
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_ptr


@cute.kernel
def broken_kernel(x: cute.Pointer, n: cutlass.Int32):
    tid, _, _ = cute.arch.thread_idx()
    gx = cute.make_tensor(x, cute.make_layout(n))
    gx[tid] = gx[tid] * scale  # `scale` is defined nowhere


@cute.jit
def broken(x: cute.Pointer, n: cutlass.Int32):
    broken_kernel(x, n).launch(grid=(1, 1, 1), block=(32, 1, 1))


def build():
    return cute.compile(broken, make_ptr(cutlass.Float32, 16, cute.AddressSpace.gmem, assumed_align=4),
                        cutlass.Int32(1))
'''
BROKEN_COMPILE = '''
import importlib.util, json, sys
from kernelcraft.verify.worker import _trimmed_traceback
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
try:
    module.build()
except Exception as exc:
    print(json.dumps(_trimmed_traceback(exc)))
'''


@cute_here
def test_a_compile_error_reaches_the_model_as_the_dsls_own_account(tmp_path):
    """The DSL's error names the kernel's line with a caret and says why: the model gets that, without its terminal
    colours or the DSL's frames."""
    path = tmp_path / "candidate.py"
    path.write_text(BROKEN)
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    proc = subprocess.run([sys.executable, "-c", BROKEN_COMPILE, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    message = json.loads(proc.stdout.strip().splitlines()[-1])
    assert message.startswith('File "candidate.py", line ') and "DSLUserCodeError" in message, message
    assert "name 'scale' is not defined" in message and "gx[tid] = gx[tid] * scale" in message, message
    assert "\x1b[" not in message and "site-packages" not in message, message


def test_a_recorded_name_that_is_not_the_dsls_naming_is_never_the_candidates():
    """A compiled function whose kernel_info a candidate filled with a cuBLAS kernel's name, beside a declared
    `@cute.kernel` of that name: the DSL's runtime did not name it, so it does not count."""
    launches = Launches(recorded={"cute": {"sm90_xmma_gemm_f32f32_tf32f32": 1}})
    found = attribute([Ran("sm90_xmma_gemm_f32f32_tf32f32", 7, 9.0)], launches, {"sm90_xmma_gemm_f32f32_tf32f32"}, 7)
    assert not found.custom_ran and found.custom_fraction == 0.0
