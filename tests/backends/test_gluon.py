"""The gluon backend (backends/kinds/gluon.py): its kernels read from the source, the bundled Gluon examples compiled
for a Hopper GPU on any machine (Triton's own compiler, no GPU needed), and on a GPU each judged by the verifier:
the honest ones `ok`, their wrong twins `incorrect`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelcraft.backends import detect_backend, get_backend
from kernelcraft.candidate import EXAMPLES, Candidate
from kernelcraft.verify import TimingConfig, VerifyConfig
from tests.helpers import assert_examples_judged

gluon_here = pytest.mark.skipif(get_backend("gluon").unavailable("cuda") is not None,
                                reason="no Triton with Gluon here")

# each example's kernel, and its signature as a launch on fp32 tensors and int32 sizes specializes it
SIGNATURES = {
    "softmax_gluon": ("softmax_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_cols": "i32", "BLOCK": "constexpr",
                                         "WARPS": "constexpr"}, {"BLOCK": 2048, "WARPS": 8}, 8),
    "matmul_gluon": ("matmul_kernel", {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                       "K": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"},
                     {"BM": 64, "BN": 64, "BK": 16}, 4),
}
COMPILE = '''
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import GluonASTSource
path, name, signature, constexprs, warps = json.loads(sys.argv[1])
spec = importlib.util.spec_from_file_location("example", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
kernel = triton.compile(GluonASTSource(getattr(module, name), signature, constexprs),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
print(json.dumps({"name": kernel.name, "shared": kernel.metadata.shared, "ptx": "ptx" in kernel.asm}))
'''


def test_the_examples_are_gluon_and_declare_their_kernels():
    for stem, (kernel, *_) in SIGNATURES.items():
        for path in (EXAMPLES / f"{stem}.py", EXAMPLES / f"{stem}_wrong.py"):
            source = path.read_text()
            assert detect_backend(source) == "gluon" and Candidate.from_file(path).backend == "gluon"
            assert get_backend("gluon").declared_kernels(source) == {kernel}
            assert get_backend("triton").declared_kernels(source) == set()  # no @triton.jit in a Gluon file


@gluon_here
@pytest.mark.parametrize("stem", sorted(SIGNATURES) + [f"{s}_wrong" for s in sorted(SIGNATURES)])
def test_the_examples_compile_for_hopper_without_a_gpu(stem):
    kernel, signature, constexprs, warps = SIGNATURES[stem.removesuffix("_wrong")]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", COMPILE, json.dumps([str(EXAMPLES / f"{stem}.py"), kernel, signature,
                                                                     constexprs, warps])],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert built["name"] == kernel and built["ptx"]


@pytest.mark.gpu
def test_the_examples_are_judged_on_a_gpu(tmp_path):
    config = VerifyConfig(trials=3, compile_baseline=False, timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path)
    assert_examples_judged("cuda:0", [("level1/softmax", "softmax_gluon", "ok"),
                                      ("level1/softmax", "softmax_gluon_wrong", "incorrect"),
                                      ("level1/matmul", "matmul_gluon", "ok"),
                                      ("level1/matmul", "matmul_gluon_wrong", "incorrect")], config)

BROKEN = '''
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def broken(x_ptr, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, BLOCK, layout=layout)
    gl.store(x_ptr + offs, offs * scale)  # `scale` is defined nowhere
'''


BROKEN_COMPILE = '''
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import GluonASTSource
from kernelcraft.verify.worker import _trimmed_traceback
namespace = {}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), namespace)
try:
    triton.compile(GluonASTSource(namespace["broken"], {"x_ptr": "*i32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
                   target=GPUTarget("cuda", 90, 32))
except Exception as exc:
    print(json.dumps(_trimmed_traceback(exc)))
'''


@gluon_here
def test_a_compile_error_reaches_the_model_as_its_cause_not_the_compilers_frames(tmp_path):
    """The worker's message for a kernel the compiler refused: the kernel's line, a caret and why. In a process of
    its own without Triton's interpreter, which leaves its semantics in triton.language once it has run."""
    path = tmp_path / "candidate.py"
    path.write_text(BROKEN)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", BROKEN_COMPILE, str(path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    message = json.loads(proc.stdout.strip().splitlines()[-1])
    assert message.startswith("CompilationError: at ") and "offs * scale" in message and "scale" in \
        message.splitlines()[-1], message
    assert "compiler.py" not in message and "site-packages" not in message, message
