"""The verifier on a GPU as users share it and fill it: several evaluations at once, and problems larger
than the device. Skipped where torch sees no CUDA device (the `gpu` marker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from kernelcraft.verify.memory import ProblemTooLarge
from tests.helpers import FIXTURES, REPO

pytestmark = pytest.mark.gpu

SOFTMAX = REPO / "benchmarks" / "candidates" / "triton" / "softmax.py"


def _eval(tmp_path: Path, tag: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "kernelcraft.cli", "eval", "level1/softmax", str(SOFTMAX), "--device", "cuda:0",
           "--json", "--budget", "2", "--no-compile-baseline", "--cache-dir", str(tmp_path / f"cache-{tag}")]
    env = {**os.environ, "KERNELCRAFT_LOCK_DIR": str(tmp_path / "locks"), "PYTHONPATH": str(REPO / "src")}
    (tmp_path / "locks").mkdir(exist_ok=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _result(proc) -> dict:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out)


@pytest.mark.slow
def test_four_concurrent_evaluations_match_sequential_ones(tmp_path):
    """Four `kernelcraft eval` on one GPU at once: the verdicts of lone ones, speedups within 5% of theirs, and
    no two timing phases overlapping."""
    alone = [_result(_eval(tmp_path, f"alone{i}")) for i in range(2)]
    together = [_result(p) for p in [_eval(tmp_path, f"together{i}") for i in range(4)]]
    assert [r["status"] for r in alone + together] == ["ok"] * 6, [r["message"] for r in alone + together]
    reference = sum(r["speedup_eager"] for r in alone) / len(alone)
    for r in together:
        assert r["speedup_eager"] == pytest.approx(reference, rel=0.05), (r["speedup_eager"], reference)
    windows = sorted(w for r in together for w in r["device_held"])
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), windows


def test_a_problem_larger_than_the_device_is_refused_once(tmp_path):
    problem = load_problem(FIXTURES / "problems" / "relu_too_large.py")
    config = VerifyConfig(compile_baseline=False, timing=TimingConfig(budget_s=0.3), cache_dir=tmp_path)
    with Verifier("cuda:0", config) as verifier:
        with pytest.raises(ProblemTooLarge, match=r"needs ~\d+\.\d GiB .* has \d+\.\d GiB free"):
            verifier.admit(problem)
        result = verifier.evaluate(problem, Candidate.from_file(REPO / "benchmarks" / "candidates" / "triton" / "relu.py"))
    assert result.status == "verifier_error" and result.reasons == ["problem_too_large"], result.message
    assert result.trials == 0 and result.phases.get("load") is None  # nothing of the candidate ran


def test_eval_says_a_problem_is_too_large_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelcraft.cli", "eval", str(FIXTURES / "problems" / "relu_too_large.py"),
                           str(REPO / "benchmarks" / "candidates" / "triton" / "relu.py"), "--device", "cuda:0",
                           "--cache-dir", str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 2 and proc.stdout == ""
    assert "needs ~" in proc.stderr and "GiB free" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
