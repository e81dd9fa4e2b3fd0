"""The helion backend (backends/kinds/helion.py): its kernels read from the source, the workers' environment (no
autotuning; Helion's interpreter on the CPU, Triton's off while a candidate is imported), and the bundled Helion
examples judged by the verifier, on the CPU in Helion's interpreter and on a GPU compiled: the honest ones `ok`,
their wrong twins `incorrect`."""

from __future__ import annotations

import os
import types

import pytest

from kernelcraft import backends
from kernelcraft.backends import detect_backend, get_backend
from kernelcraft.candidate import EXAMPLES, Candidate
from kernelcraft.verify import TimingConfig, VerifyConfig
from tests.helpers import assert_examples_judged

HELION = get_backend("helion")
helion_here = pytest.mark.skipif(HELION.unavailable("cpu") is not None, reason="helion is not installed here")
CASES = [("level1/softmax", "softmax_helion", "ok"), ("level1/softmax", "softmax_helion_wrong", "incorrect"),
         ("level1/matmul", "matmul_helion", "ok"), ("level1/matmul", "matmul_helion_wrong", "incorrect")]


def test_the_examples_are_helion_and_declare_the_triton_kernels_helion_makes():
    kernels = {"softmax_helion": {"_helion_softmax_rows"}, "matmul_helion": {"_helion_matmul"}}
    for stem, declared in kernels.items():
        for path in (EXAMPLES / f"{stem}.py", EXAMPLES / f"{stem}_wrong.py"):
            source = path.read_text()
            assert detect_backend(source) == "helion" and Candidate.from_file(path).backend == "helion"
            assert HELION.declared_kernels(source) == declared
    stacked = "@helion.kernel(\n    config=helion.Config(block_sizes=[64]),\n)\ndef add(x, y):\n    pass\n"
    assert HELION.declared_kernels(stacked) == {"_helion_add"}


def test_the_workers_never_autotune_and_run_helions_interpreter_on_the_cpu(monkeypatch):
    assert HELION.worker_env("cuda") == HELION.worker_env("cpu") == {"HELION_AUTOTUNE_EFFORT": "none"}
    assert backends.worker_env("cuda")["HELION_AUTOTUNE_EFFORT"] == "none" and \
        "TRITON_INTERPRET" not in backends.worker_env("cuda")
    assert backends.worker_env("cpu")["TRITON_INTERPRET"] == "1"
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv("HELION_INTERPRET", raising=False)
    source = (EXAMPLES / "softmax_helion.py").read_text()
    with HELION.importing(None, [], source):  # Helion refuses to run beside Triton's interpreter: off meanwhile
        assert "TRITON_INTERPRET" not in os.environ and os.environ["HELION_INTERPRET"] == "1"
    assert os.environ["TRITON_INTERPRET"] == "1" and "HELION_INTERPRET" not in os.environ
    with backends.importing(None, [], (EXAMPLES / "softmax_triton.py").read_text()):  # a Triton candidate: as it was
        assert os.environ["TRITON_INTERPRET"] == "1" and "HELION_INTERPRET" not in os.environ
    monkeypatch.delenv("TRITON_INTERPRET")
    with HELION.importing(None, [], source):  # a GPU: nothing changes
        assert "HELION_INTERPRET" not in os.environ


def test_only_the_candidates_own_helion_kernels_name_modules_whose_launches_count():
    assert HELION.launch_modules(types.ModuleType("kernelcraft_candidate")) == set()


@helion_here
def test_the_examples_are_judged_on_the_cpu(tmp_path):
    config = VerifyConfig(small=True, trials=3, compile_baseline=False, timing=TimingConfig(budget_s=0.3),
                          cache_dir=tmp_path)
    assert_examples_judged("cpu", CASES, config)


@pytest.mark.gpu
@helion_here
def test_the_examples_are_judged_on_a_gpu(tmp_path):
    """On a GPU its kernels are the Triton kernels Helion generated, counted as the candidate's."""
    config = VerifyConfig(trials=3, compile_baseline=False, timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path)
    assert_examples_judged("cuda:0", CASES, config)
