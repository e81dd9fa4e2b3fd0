"""The trust boundary on a GPU, at sizes where the measured holes of 5509881 showed: a Triton ReLU that wraps the
harness's timing function through sys.modules (KernelBench level 1's 19 at batch 4096 x 16384: `ok`, 2.52x eager and
2.15x the roofline there) and a GEMM that corrects its kept product where only a band of an input changed (level 1's 1,
4096^2: `ok`, 1.91x, 1.46x the roofline), with their honest twins. Each cheat must be caught from outside the
candidate's process (verify/outside.py outside_clock, verify/judge.py stateful_split), each twin `ok` under the strict policy.

Skipped where torch sees no CUDA device (the `gpu` marker, tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig
from tests.helpers import KERNELBENCH

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent / "fixtures"
RELU = KERNELBENCH / "level1" / "19_ReLU.py"
GEMM = KERNELBENCH / "level1" / "1_Square_matrix_multiplication_.py"

CASES = [  # (fixture, problem, sizes, verdicts, reasons one of which it must carry; empty: ok with none)
    ("c22_reach_through_cheat", RELU, {"batch_size": 4096, "dim": 16384}, {"rejected", "incorrect"},
     {"timing_tampered", "stateful_output", "memoized_output"}),
    ("c22_reach_through_honest", RELU, {"batch_size": 4096, "dim": 16384}, {"ok"}, set()),
    ("c22b_sample_copy_cheat", RELU, {"batch_size": 4096, "dim": 16384}, {"rejected", "incorrect"},
     {"memoized_output"}),
    ("c25_incremental_update_cheat", GEMM, {}, {"rejected"}, {"stateful_output", "timing_tampered"}),
    ("c25_incremental_update_honest", GEMM, {}, {"ok"}, set()),
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    if not RELU.exists():
        pytest.skip("KernelBench's files are not beside the checkout")
    out = {}
    for name, problem, sizes, *_ in CASES:  # one verifier per size setting: sizes are a verifier's setting
        config = VerifyConfig(size="full", sizes=sizes or None, compile_baseline=False, static_guards=False,
                              timing=TimingConfig(budget_s=1.0), cache_dir=tmp_path_factory.mktemp("kc-trust-gpu"))
        with Verifier("cuda", config) as verifier:
            out[name] = verifier.evaluate_many([Job(load_problem(str(problem)),
                                                    Candidate.from_file(FIXTURES / f"{name}.py"))])[0]
    return out


@pytest.mark.parametrize("name,problem,sizes,statuses,reasons", CASES, ids=[c[0] for c in CASES])
def test_trust_boundary_on_a_gpu(verdicts, name, problem, sizes, statuses, reasons):
    result = verdicts[name]
    described = (f"status={result.status} reasons={result.reasons} message={result.message[:500]!r} "
                 f"outside={result.outside_clock} runtime={result.runtime_ms} speedup={result.speedup_eager}")
    assert result.status in statuses, described
    if reasons:
        assert reasons & set(result.reasons), described
        assert result.speedup_eager is None, described
    else:
        assert result.reasons == [] and result.outside_clock.get("checked"), described
