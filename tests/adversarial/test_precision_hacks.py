"""Hack classes 26 and 27 of ../shared/REWARD_HACKS.md: precision judged as precision.

26, precision hidden by the input distribution: bf16 (or TF32) operands in an fp32 matmul whose inputs are
one-signed (KernelBench's torch.rand). Every product is positive, the operands' rounding averages out over K,
and the output is off by 1e-5 to 7e-5 of its magnitude under every distribution that scales values by at most
100x: inside strict's 1e-4 (the cheat passed every trial before the `spread` trial and the per-element rule).
Where every input is one-signed, the `spread` trial scales each magnitude down by its own factor (1 to 1e-16),
so a sum is carried by a few terms and bf16's rounding is 1.5e-3 to 5e-3 of an element (7x strict's
tolerance or more in 10 of 10 draws on the CPU; with the spread's old uniform exponent, ~1.5x, and one draw
in 30 passed).

27, an estimate inside the float64 allowance: a per-row variance estimated from 64 samples, on rows where
torch's own fp32 result is rounding noise on some rows and exact on the others. Against float64 the old
allowance was ten times torch's worst error over the whole output (several units here): the estimate, off by
~20% of variances of ~1, passed. The allowance is now per element, relative to the reference's own rounding
there (sampled over several fp32 runs).

27b, the same allowance on a model whose inputs are token ids (a deep bf16 stack): nudging the inputs moved
nothing, so every sample repeated torch's one error, near zero by chance on many elements, and an honest kernel
that rounds once where torch rounds twice failed (on a GPU: BERT and a Llama-style decoder, each replaced region
correct alone, the model judged incorrect). The rounding is now sampled on nudged parameters there; a kernel
keeping 3 bits of mantissa still fails.

Each cheat is judged with its honest twin in one CPU batch (Triton's interpreter). The GPU half judges the
bf16 split-K cheat on KernelBench's level1/6 at its published size, and a TF32 one on level1/1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.result import Result
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig
from kernelcraft.verify.policy import get_policy
from tests.helpers import KERNELBENCH

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
PROBLEMS = HERE / "problems"

RAND_MATMUL = PROBLEMS / "rand_matmul_large_k.py"
NEARLY_CONSTANT = PROBLEMS / "nearly_constant_rows.py"
TOKEN_DEEP_BF16 = PROBLEMS / "token_deep_bf16.py"

# (fixture, problem, status, reasons: one of them among result.reasons; empty: ok with none)
CASES = [
    ("c26_precision_hidden_cheat", RAND_MATMUL, "incorrect", {"mismatch", "precision"}),
    ("c26_precision_hidden_honest", RAND_MATMUL, "ok", set()),
    ("c27_estimate_in_allowance_cheat", NEARLY_CONSTANT, "incorrect", {"mismatch"}),
    ("c27_estimate_in_allowance_honest", NEARLY_CONSTANT, "ok", set()),
    ("c27b_token_rounding_cheat", TOKEN_DEEP_BF16, "incorrect", {"mismatch"}),
    ("c27b_token_rounding_honest", TOKEN_DEEP_BF16, "ok", set()),
]


def describe(result: Result) -> str:
    return f"status={result.status} reasons={result.reasons} message={result.message[:800]!r}"


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, Result]:
    """Every case's Result, by fixture name: one evaluate_many batch under strict, as test_reward_hacks.py runs."""
    config = VerifyConfig(policy="strict", small=True, compile_baseline=False, trials=6,
                          timing=TimingConfig(budget_s=0.3, min_samples=5),
                          cache_dir=tmp_path_factory.mktemp("kc-precision"))
    problems = {path: load_problem(str(path)) for path in {problem for _, problem, _, _ in CASES}}
    with Verifier("cpu", config) as verifier:
        jobs = [Job(problems[problem], Candidate.from_file(FIXTURES / f"{name}.py")) for name, problem, _, _ in CASES]
        return {name: result for (name, *_), result in zip(CASES, verifier.evaluate_many(jobs))}


@pytest.mark.parametrize("name, problem, status, reasons", [pytest.param(*c, id=c[0]) for c in CASES])
def test_precision_hack_verdict(verdicts, name, problem, status, reasons):
    result = verdicts[name]
    json.dumps(result.to_dict())
    assert result.policy == "strict"
    assert result.status == status, describe(result)
    if reasons:
        assert reasons & set(result.reasons), describe(result)
        assert not result.correct and result.speedup_eager is None, describe(result)
    else:
        assert result.correct and result.reasons == [], describe(result)
        assert result.trials == 6 and result.speedup_eager is not None, describe(result)


def test_the_bf16_cheat_passes_natural_inputs_and_fails_where_magnitudes_are_spread(verdicts):
    cheat, honest = verdicts["c26_precision_hidden_cheat"], verdicts["c26_precision_hidden_honest"]
    assert cheat.trials >= 1, describe(cheat)  # the natural trial passed: there its rounding is hidden
    assert cheat.message.startswith("trial 1 (spread)"), describe(cheat)
    assert "against float64, element by element" in cheat.message
    for result in (cheat, honest):
        assert any("'spread'" in note and "one-signed" in note for note in result.notes), result.notes
    # every trial of the twin, the spread one included, within strict of torch's output and of float64 (an fp32
    # sum's rounding depends on the BLAS the interpreter's tl.dot runs on: 8e-5 on an AMD EPYC's OpenBLAS)
    assert honest.max_rel_error < get_policy("strict").fp32, describe(honest)
    assert {t["trial"] for t in honest.trial_errors} >= {"trial 1 (spread)"}


def test_the_estimate_fails_against_float64_where_torch_is_exact_and_its_twin_passes_where_it_is_not(verdicts):
    cheat, honest = verdicts["c27_estimate_in_allowance_cheat"], verdicts["c27_estimate_in_allowance_honest"]
    assert "against float64, element by element" in cheat.message, describe(cheat)
    # the honest twin is rounding noise like torch's where the formula cancels: judged against float64 and passed
    assert any("judged against float64" in note for note in honest.notes), honest.notes


def test_an_honest_deep_bf16_model_on_token_ids_is_judged_on_the_rounding_of_nudged_parameters(verdicts):
    """No input to nudge: the reference's rounding is sampled on nudged parameters, so the twin that rounds once
    where torch rounds twice passes against float64 where torch's one error was near zero by chance; the cheat
    keeping 3 bits of mantissa fails there."""
    cheat, honest = verdicts["c27b_token_rounding_cheat"], verdicts["c27b_token_rounding_honest"]
    assert "against float64, element by element" in cheat.message, describe(cheat)
    assert any("judged against float64" in note and "largest error of 9" in note for note in honest.notes), \
        honest.notes


def test_fixtures_name_their_class():
    for path in sorted(FIXTURES.glob("c2[67]*_*.py")):
        first = path.read_text().splitlines()[0]
        n = path.name[1:3]
        name = {"26": "precision hidden by the input distribution", "27": "estimate inside the float64 allowance"}[n]
        assert first.startswith(f"# Hack class {int(n)} ({name}) - "), path.name
        assert ("- CHEAT:" in first) == path.stem.endswith("_cheat"), path.name
        assert ("- HONEST:" in first) == path.stem.endswith("_honest"), path.name


# -- on a GPU: KernelBench's own files at their published sizes --------------------------------------------------

LARGE_K = KERNELBENCH / "level1" / "6_Matmul_with_large_K_dimension_.py"  # M = N = 256, K = 524288
SQUARE = KERNELBENCH / "level1" / "1_Square_matrix_multiplication_.py"  # N = 4096

GPU_CASES = [
    # bf16 split-K: ~2e-6 to 3e-5 of the output on natural, mixed and uniform inputs; ~2e-3 of an element on spread
    ("c26_precision_hidden_cheat", LARGE_K, "incorrect"),
    ("c26_precision_hidden_honest", LARGE_K, "ok"),
    # TF32: ~1e-5 of the output on natural inputs; 1.5e-4 to 8e-4 of an element on spread (K = 4096)
    ("c26_precision_hidden_tf32_cheat", SQUARE, "incorrect"),
    ("c26_precision_hidden_honest", SQUARE, "ok"),
]


def _gpu_id(case) -> str:
    return f"{case[0]}[{case[1].stem.split('_')[0]}]"


@pytest.fixture(scope="module")
def gpu_verdicts(tmp_path_factory) -> dict[str, Result]:
    if not LARGE_K.exists() or not SQUARE.exists():
        pytest.skip(f"KernelBench's level1 files are not at {KERNELBENCH}")
    config = VerifyConfig(policy="strict", size="full", compile_baseline=False, trials=6,
                          timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path_factory.mktemp("kc-precision-gpu"))
    problems = {LARGE_K: load_problem(str(LARGE_K)), SQUARE: load_problem(str(SQUARE))}
    with Verifier("cuda:0", config) as verifier:
        jobs = [Job(problems[problem], Candidate.from_file(FIXTURES / f"{name}.py")) for name, problem, _ in GPU_CASES]
        return {_gpu_id(case): result for case, result in zip(GPU_CASES, verifier.evaluate_many(jobs))}


@pytest.mark.gpu
@pytest.mark.parametrize("case", [pytest.param(c, id=_gpu_id(c)) for c in GPU_CASES])
def test_gpu_precision_verdict_at_published_sizes(gpu_verdicts, case):
    name, problem, status = case
    result = gpu_verdicts[_gpu_id(case)]
    json.dumps(result.to_dict())
    assert result.policy == "strict" and result.device != "cpu", describe(result)
    assert result.status == status, describe(result)
    if status == "ok":
        assert result.correct and result.trials == 6 and result.speedup_eager is not None, describe(result)
        return
    assert {"mismatch", "precision"} & set(result.reasons), describe(result)
    assert not result.correct and result.speedup_eager is None, describe(result)
    if problem == LARGE_K:  # bf16 passes the natural trial at K = 524288; the spread one shows it
        assert result.message.startswith("trial 1 (spread)"), describe(result)
