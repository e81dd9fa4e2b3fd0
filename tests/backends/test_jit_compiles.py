"""The compiles of the just-in-time languages, timed apart from their calls (backends/jit_compiles.py): the log a
backend drains, Triton's own compilation listener (a real compile for a Hopper GPU, no GPU needed), the CuTe DSL's
compile pipeline timed once the candidate imported it, and the supervisor's account of them (judge.record_compiles)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelcraft.backends import get_backend
from kernelcraft.backends.jit_compiles import CompileLog
from kernelcraft.candidate import EXAMPLES
from kernelcraft.result import Result
from kernelcraft.verify.judge import record_compiles


def test_a_timed_method_is_logged_once_a_call_and_drained():
    class Compiler:
        def compile(self, name):
            if name == "bad":
                raise ValueError(name)
            return [name + "_kernel"]

    log = CompileLog()
    log.timed(Compiler, "compile", lambda _, out: out)
    log.timed(Compiler, "compile", lambda _, out: out)  # once a process: not timed twice
    assert Compiler().compile("a") == ["a_kernel"]
    with pytest.raises(ValueError):
        Compiler().compile("bad")  # a compile that raised compiled nothing
    rows = log.drain()
    assert [r["kernels"] for r in rows] == [["a_kernel"]] and rows[0]["seconds"] >= 0 and rows[0]["module"] is None
    assert log.drain() == []


LISTEN = '''
import json, sys
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from kernelcraft.backends import get_backend

source = """
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""
import importlib.util, pathlib
path = pathlib.Path(sys.argv[1]) / "candidate.py"
path.write_text(source)
spec = importlib.util.spec_from_file_location("kernelcraft_candidate", path)
module = importlib.util.module_from_spec(spec)
sys.modules["kernelcraft_candidate"] = module
triton_backend = get_backend("triton")
with triton_backend.importing(None, [], source):
    spec.loader.exec_module(module)
triton.compile(ASTSource(module.scale_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 256}),
               target=GPUTarget("cuda", 90, 32))
print(json.dumps(triton_backend.compiles(None)))
'''


def test_tritons_compiles_are_heard_with_their_time_kernel_and_module(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")  # a compile, not a cache hit
    proc = subprocess.run([sys.executable, "-c", LISTEN, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 1, rows
    assert rows[0]["kernels"] == ["scale_kernel"] and rows[0]["module"] == "kernelcraft_candidate"
    assert rows[0]["seconds"] > 0 and rows[0]["cached"] is False


CUTE_COMPILE = '''
import importlib.util, json, sys
import torch
from kernelcraft.backends import get_backend
cute_backend = get_backend("cute")
spec = importlib.util.spec_from_file_location("kernelcraft_candidate", sys.argv[1])
module = importlib.util.module_from_spec(spec)
with cute_backend.importing(None, [], open(sys.argv[1]).read()):
    spec.loader.exec_module(module)
module.compiled(torch.empty(2, 2))
print(json.dumps(cute_backend.compiles(None)))
'''


@pytest.mark.skipif(get_backend("cute").unavailable("cuda") is not None, reason="the CuTe DSL is not installed here")
def test_the_cute_dsls_compiles_are_timed_once_a_candidate_imported_it():
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_DISABLE_FILE_CACHING": "1"}
    proc = subprocess.run([sys.executable, "-c", CUTE_COMPILE, str(EXAMPLES / "softmax_cute.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == 1 and rows[0]["seconds"] > 0, rows
    assert len(rows[0]["kernels"]) == 1 and get_backend("cute").carries(rows[0]["kernels"][0], {"softmax_kernel"})


def test_the_supervisor_adds_each_compile_to_the_results_account():
    result = Result(problem="p", candidate="c", backend="triton")
    record_compiles(result, [{"seconds": 0.25, "log": "", "cached": False, "kernels": ["k"], "resources": []}])
    record_compiles(result, [])
    record_compiles(result, [{"seconds": 0.5, "log": "ptxas info    : Compiling entry function 'k2'\n"
                                                     "ptxas info    : Used 40 registers, 0 bytes smem",
                              "cached": False, "resources": []}])
    assert result.compile_seconds == 0.75
    assert result.kernels_resources == [{"kernel": "k2", "registers": 40, "smem": 0}]
    assert "Compiling entry function 'k2'" in result.compile_log


def test_the_worker_reports_the_candidates_own_compiles_not_torch_compiles(monkeypatch):
    """Triton compiles torch.compile's kernels in the same process: the worker keeps those of the candidate's module
    (and of the modules its language generated), and every compile that names no module (the CuTe DSL's)."""
    import types

    import torch

    from kernelcraft.verify.worker import Worker

    worker = Worker.__new__(Worker)
    worker.device = torch.device("cpu")
    monkeypatch.setitem(sys.modules, "kernelcraft_candidate", types.ModuleType("kernelcraft_candidate"))
    get_backend("triton").log.add(0.5, ["own_kernel"], module="kernelcraft_candidate")
    get_backend("triton").log.add(2.0, ["triton_poi_fused_add_0"], module="torch._inductor.runtime.compile_tasks.ab")
    get_backend("cute").log.add(0.25, ["kernel_cutlass_k_ptrf32gmem_0"])
    kernels = {k for row in worker._own_compiles() for k in row.get("kernels", [])}  # NVRTC's name none
    assert {"own_kernel", "kernel_cutlass_k_ptrf32gmem_0"} <= kernels and "triton_poi_fused_add_0" not in kernels
    assert worker._own_compiles() == []  # each compile reported once
