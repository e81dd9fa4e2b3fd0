"""The hand-written benchmark candidates on a real GPU, at full size: honest ones pass, wrong ones do not.

Skipped where torch sees no CUDA device (see the `gpu` marker in tests/conftest.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem, suite_names
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from tests.helpers import REPO

CANDIDATES = REPO / "benchmarks" / "candidates"


def problem_for(path: Path) -> str:
    """`# problem: levelN/name` in the file, else the suite name whose stem is the file's, else the
    longest level-1 name the stem starts with (wrong/relu_off_by_one.py -> level1/relu)."""
    m = re.search(r"^#\s*problem:\s*(\S+)", path.read_text(), re.M)
    if m:
        return m.group(1)
    names = suite_names()
    exact = [n for n in names if n.split("/")[1] == path.stem]
    if exact:
        return exact[0]
    prefixed = [n for n in names if n.startswith("level1/") and path.stem.startswith(n.split("/")[1])]
    return max(prefixed, key=len) if prefixed else f"level1/{path.stem}"


def _files(*kinds: str) -> list:
    files = [p for kind in kinds for p in sorted((CANDIDATES / kind).glob("*.py"))]
    return [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for p in files] or \
        [pytest.param(None, marks=pytest.mark.skip(reason=f"no candidates in {', '.join(kinds)}"))]


def test_problem_for_mapping(tmp_path):
    """Runs anywhere: the mapping the GPU tests rely on."""
    assert problem_for(CANDIDATES / "triton" / "gemm_gelu_scale.py") == "level2/gemm_gelu_scale"
    assert problem_for(CANDIDATES / "cuda_nvrtc" / "softmax.py") == "level1/softmax"
    wrong = tmp_path / "relu_off_by_one_nvrtc.py"
    wrong.write_text("class ModelNew: pass\n")
    assert problem_for(wrong) == "level1/relu"
    log_softmax = tmp_path / "log_softmax_no_max.py"  # the longest matching name wins
    log_softmax.write_text("class ModelNew: pass\n")
    assert problem_for(log_softmax) == "level1/log_softmax"
    tagged = tmp_path / "anything.py"
    tagged.write_text("# problem: level2/swish_add\nclass ModelNew: pass\n")
    assert problem_for(tagged) == "level2/swish_add"


@pytest.fixture(scope="module")
def gpu_verifier(tmp_path_factory):
    # The default six trials: one per input distribution (small_scale is what catches a dropped eps).
    config = VerifyConfig(compile_baseline=False, timing=TimingConfig(budget_s=1.0),
                          cache_dir=tmp_path_factory.mktemp("kc-gpu-cache"))
    verifier = Verifier("cuda:0", config)
    # The load_inline builds (about a minute each) start now, in parallel, while the other tests run.
    for path in sorted((CANDIDATES / "cuda_inline").glob("*.py")):
        verifier.builds.submit(Candidate.from_file(path), verifier.supervisors[0].arch_list)
    yield verifier
    verifier.close()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", _files("cuda_nvrtc", "triton", "cuda_inline"))
def test_honest_candidate_passes_at_full_size(gpu_verifier, path):
    result = gpu_verifier.evaluate(load_problem(problem_for(path)), Candidate.from_file(path))
    assert result.status == "ok", (result.reasons, result.message)
    assert result.correct and result.trials == 6
    assert result.runtime_ms > 0 and result.speedup_eager is not None
    assert result.device != "cpu"
    if path.parent.name == "cuda_nvrtc":  # from ptxas's log, or from the driver where the log has none
        assert result.kernels_resources and all(r["registers"] > 0 for r in result.kernels_resources)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", _files("wrong"))
def test_wrong_candidate_fails(gpu_verifier, path):
    result = gpu_verifier.evaluate(load_problem(problem_for(path)), Candidate.from_file(path))
    assert result.status != "ok" and not result.correct, result.message
    assert result.reasons


@pytest.mark.gpu
@pytest.mark.slow
def test_exact_convolution_passes_strict(gpu_verifier):
    """PyTorch runs cuDNN convolutions in TF32 by default (about 1e-3 off); under strict the reference must
    compute fp32 exactly, or no exact kernel could pass. The built-in engineer's exact conv, rendered now."""
    from kernelcraft.propose.builtin.analyze import analyze
    from tests.propose.builtin.kernel_check import moves, render

    problem = load_problem("level1/conv2d_alexnet")
    op = analyze(problem).single
    exact = next(m for m in moves(op) if m.params.precision == "ieee")
    result = gpu_verifier.evaluate(problem, Candidate(render(op, problem.source, exact.params), "exact_conv"))
    assert result.status == "ok", (result.reasons, result.message)
    assert result.max_rel_error < 1e-5


@pytest.mark.gpu
def test_a_target_compiles_its_baselines_beside_an_evaluation(tmp_path):
    """A target's torch.compile baseline compiles with the supervisor's lock released: a candidate of another
    problem is judged meanwhile, and both come out right (the target with both baselines)."""
    import threading
    import time

    config = VerifyConfig(timing=TimingConfig(budget_s=0.2), trials=1, cache_dir=tmp_path)
    with Verifier("cuda:0", config) as verifier:
        sup = verifier.supervisors[0]
        problem, path = load_problem("level1/relu"), CANDIDATES / "triton" / "relu.py"
        assert verifier.evaluate(problem, Candidate.from_file(path)).status == "ok"  # its baselines are measured
        targets: list = []
        thread = threading.Thread(target=lambda: targets.append(verifier.target(load_problem("level1/softmax"))))
        thread.start()
        deadline = time.monotonic() + 60
        while not sup.beside_need and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert sup.beside_need, "the target was measured holding the supervisor's lock"
        assert sup.lock.acquire(timeout=5)  # free while the baseline worker starts and compiles
        sup.lock.release()
        result = verifier.evaluate(problem, Candidate.from_file(path))
        thread.join(timeout=300)
        assert result.status == "ok", result.message
        assert targets and targets[0].eager is not None and targets[0].compiled is not None
        assert not sup.beside_need


@pytest.mark.gpu
def test_a_stream_of_candidates_keeps_a_worker_started(tmp_path):
    """Candidates judged one at a time, nothing queued behind them (a search's rounds): from the second on, a
    worker is started ahead for the next, so none waits for a worker's start."""
    config = VerifyConfig(compile_baseline=False, timing=TimingConfig(budget_s=0.2), trials=1, cache_dir=tmp_path)
    problem, path = load_problem("level1/relu"), CANDIDATES / "triton" / "relu.py"
    with Verifier("cuda:0", config) as verifier:
        sup = verifier.supervisors[0]
        first = verifier.evaluate(problem, Candidate.from_file(path))
        assert first.status == "ok", first.message
        assert not sup.workers.standby  # one evaluation alone starts no spare
        second = verifier.evaluate(problem, Candidate.from_file(path))
        assert second.status == "ok", second.message
        assert len(sup.workers.standby) == 1
        third = verifier.evaluate(problem, Candidate.from_file(path))
        assert third.status == "ok", third.message
        assert third.phases["worker_start"] < first.phases["worker_start"]
