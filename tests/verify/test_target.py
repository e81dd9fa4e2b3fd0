"""A problem's target before any candidate: the sizes timed, the baselines (the very ones its candidates
are compared with) and, on a CPU, no roofline floor (no ceilings are known for it)."""

from __future__ import annotations

import pytest
import torch

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


def test_a_target_goes_to_the_least_busy_device():
    from kernelcraft.verify.verifier import least_busy

    assert least_busy(1, {0}, [3]) == 0  # one device: always it
    assert least_busy(3, set(), [0, 0, 0]) == 0  # all idle: the first
    assert least_busy(3, {0}, [0, 0, 0]) == 1  # the first judging a candidate
    assert least_busy(3, {0}, [0, 1, 0]) == 2  # the second measuring a target
    assert least_busy(2, {0, 1}, [1, 0]) == 1  # all busy: the one with the least in flight


@pytest.mark.gpu
def test_targets_asked_at_once_are_measured_on_different_gpus(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    from concurrent.futures import ThreadPoolExecutor

    problems = [load_problem("level1/relu"), load_problem("level1/gelu")]
    with Verifier("cuda", small_config(tmp_path)) as verifier:
        with ThreadPoolExecutor(2) as pool:  # a bench's first two runs
            targets = list(pool.map(verifier.target, problems))
        assert all(t.eager is not None for t in targets)
        loaded = [len(sup.references) for sup in verifier.supervisors]
    assert loaded[:2] == [1, 1] and sum(loaded) == 2, loaded  # one on each of two GPUs, not both on the first


def test_the_floor_of_a_half_precision_model_fed_integers_is_at_the_half_rate():
    """A bf16 model fed token ids (BERT-base, 32 x 128 tokens: about 0.72 TFLOP): its matmuls run on tensor cores,
    so its floor is at the fp16 rate, not the fp32 rate its integer inputs alone would say (5.5x higher on an H200,
    which flagged an honest 1.93 ms model as faster than its floor)."""
    from kernelcraft import hardware
    from kernelcraft.problems.cost import Cost, TensorSpec
    from kernelcraft.verify.target import floor

    spec = hardware.spec_for("NVIDIA H200")
    ids = [TensorSpec((32, 128), torch.int64)]
    half = floor(spec, Cost(720 * 10**9, 200 * 10**6, 700 * 10**9, "bfloat16", ids), allow_tf32=False)
    single = floor(spec, Cost(720 * 10**9, 200 * 10**6, 700 * 10**9, "float32", ids), allow_tf32=False)
    assert half.math == "fp16" and single.math == "fp32"
    assert half.ms < 1.0 < single.ms
