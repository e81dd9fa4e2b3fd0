"""The reward-hack classes whose defence needs a real GPU: output poisoning (1), the profiler's kernel
attribution (15, 17), and the static rejections of CUDA-only cheats (7, 19) in front of a device that
could run them; with honest twins that must pass there, the NVRTC one included. The timed-call re-checks
(6: memoization keyed on the input's identity, 14: warm-up detection, and a call that tells the device-only
calls behind a long lead from the others) run here too, where a batch of timed calls is many calls on the same
inputs.

Skipped where torch sees no CUDA device (the `gpu` marker, tests/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.result import Result
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parents[1]
NVRTC_RELU = REPO / "benchmarks" / "candidates" / "cuda_nvrtc" / "relu.py"

# (candidate file, accepted statuses, accepted reasons; empty: must be ok with no reasons)
CASES = [
    (FIXTURES / "c01_stale_memory_cheat.py", {"incorrect"}, {"non_finite"}),  # the poisoned block shows
    (FIXTURES / "c01_stale_memory_honest.py", {"ok"}, set()),
    # fast only where part of its input changed: its fully fresh timed calls are slower (or a sampled call is wrong)
    (FIXTURES / "c06b_input_fingerprint_cheat.py", {"incorrect", "rejected"}, {"memoized_output", "stateful_output"}),
    (FIXTURES / "c06b_input_fingerprint_honest.py", {"ok"}, set()),
    # the same cheat in the languages beside CUDA and Triton (Gluon's, CuTe's and TileLang's run on a GPU only)
    (FIXTURES / "c06g_gluon_cached_output_cheat.py", {"incorrect"}, {"mismatch"}),
    (FIXTURES / "c06g_gluon_cached_output_honest.py", {"ok"}, set()),
    (FIXTURES / "c06h_helion_cached_output_cheat.py", {"incorrect"}, {"mismatch"}),
    (FIXTURES / "c06h_helion_cached_output_honest.py", {"ok"}, set()),
    (FIXTURES / "c06c_cute_cached_output_cheat.py", {"incorrect"}, {"mismatch"}),
    (FIXTURES / "c06c_cute_cached_output_honest.py", {"ok"}, set()),
    (FIXTURES / "c06t_tilelang_cached_output_cheat.py", {"incorrect"}, {"mismatch"}),
    (FIXTURES / "c06t_tilelang_cached_output_honest.py", {"ok"}, set()),
    (FIXTURES / "c14_warmup_detection_cheat.py", {"incorrect"}, {"timing_output_mismatch"}),
    (FIXTURES / "c14_warmup_detection_honest.py", {"ok"}, set()),
    # host-bound: its cost comes from calls timed behind a long lead, where it stores zeros; one of them is checked
    (FIXTURES / "c14b_lead_detection_cheat.py", {"incorrect"}, {"timing_output_mismatch"}),
    (FIXTURES / "c14b_lead_detection_honest.py", {"ok"}, set()),
    (FIXTURES / "c07_side_stream_cheat.py", {"rejected"}, {"side_stream"}),
    (FIXTURES / "c07_side_stream_honest.py", {"ok"}, set()),
    (FIXTURES / "c15_torch_fallback_cheat.py", {"rejected"}, {"no_custom_kernel"}),
    (FIXTURES / "c15_torch_fallback_honest.py", {"ok"}, set()),
    (FIXTURES / "c17_ghost_fast_path_cheat.py", {"rejected"}, {"no_custom_kernel"}),
    (FIXTURES / "c17_ghost_fast_path_honest.py", {"ok"}, set()),
    (FIXTURES / "c19_persisting_l2_cheat.py", {"rejected"}, {"persisting_l2"}),
    (FIXTURES / "c19_persisting_l2_honest.py", {"ok"}, set()),
    (NVRTC_RELU, {"ok"}, set()),  # the hand-written NVRTC relu: the honest twin of 19 too
]


def _id(path: Path) -> str:
    return path.stem if path.parent == FIXTURES else f"benchmarks/{path.parent.name}/{path.stem}"


@pytest.fixture(scope="module")
def gpu_verdicts(tmp_path_factory) -> dict[str, Result]:
    config = VerifyConfig(small=True, compile_baseline=False, trials=6, timing=TimingConfig(budget_s=0.5),
                          cache_dir=tmp_path_factory.mktemp("kc-adversarial-gpu"))
    relu = load_problem("level1/relu")
    with Verifier("cuda:0", config) as verifier:
        results = verifier.evaluate_many([Job(relu, Candidate.from_file(path)) for path, _, _ in CASES])
    return {_id(path): r for (path, _, _), r in zip(CASES, results)}


@pytest.mark.parametrize("path, statuses, reasons", [pytest.param(*c, id=_id(c[0])) for c in CASES])
def test_gpu_reward_hack_verdict(gpu_verdicts, path, statuses, reasons):
    result = gpu_verdicts[_id(path)]
    json.dumps(result.to_dict())
    seen = f"status={result.status} reasons={result.reasons} message={result.message[:600]!r}"
    assert result.status in statuses, seen
    if reasons:
        assert reasons & set(result.reasons), seen
        assert not result.correct and result.speedup_eager is None, seen
    else:
        assert result.correct and result.reasons == [], seen
        assert result.speedup_eager and result.device != "cpu", seen
