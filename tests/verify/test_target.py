"""A problem's target before any candidate: the sizes timed, the baselines (the very ones its candidates
are compared with) and, on a CPU, no roofline floor (no ceilings are known for it)."""

from __future__ import annotations

from kernelcraft.problems import load_problem
from kernelcraft.verify import Verifier
from tests.helpers import fixture_candidate, small_config


def test_the_target_is_measured_once_and_is_what_candidates_are_measured_against(tmp_path):
    relu = load_problem("level1/relu")
    with Verifier("cpu", small_config(tmp_path)) as verifier:
        target = verifier.target(relu)
        assert target.problem == "level1/relu" and target.device == "cpu" and target.sizes == "SMALL_SIZES"
        assert target.inputs == [{"shape": [37, 1000], "dtype": "float32"}]
        assert target.eager is not None and target.eager.median_ms > 0 and target.eager.method == "cpu_perf_counter"
        assert target.compiled is None  # these settings measure no torch.compile baseline
        assert target.floor is None
        again = verifier.target(relu)
        assert again.eager == target.eager  # cached: not measured twice
        result = verifier.evaluate(relu, fixture_candidate("relu_torch"))
    assert result.status == "ok"
    # the candidate used the target's baseline, unless eager beside it disagreed and it was measured again
    assert (result.baseline_cached and result.eager.median_ms == target.eager.median_ms) \
        or any("baseline re-measured" in n for n in result.notes)
