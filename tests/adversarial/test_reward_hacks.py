"""The 21 reward-hack classes of ../shared/REWARD_HACKS.md against the CPU verifier.

Each class has a cheating candidate (tests/adversarial/fixtures/cNN_<name>_cheat.py) that must be
rejected with a named reason, and an honest twin (cNN_<name>_honest.py) that must pass. Candidates
are Triton kernels, run on the CPU by the interpreter (TRITON_INTERPRET=1, set by the verifier).

All jobs go to the verifier in one `evaluate_many` batch per policy (module-scoped), then each test
asserts one verdict, so the whole table costs one batch. The GPU-only halves (poisoning, profiler
attribution) live in test_reward_hacks_gpu.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.result import STATUSES, Result
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
PROBLEMS = HERE / "problems"

RELU = "level1/relu"
MATMUL = "level1/matmul"
TINY_RELU = str(PROBLEMS / "tiny_relu.py")
SLOW_RELU = str(PROBLEMS / "slow_relu.py")

OK = ("ok",)
STATIC = ("rejected",)


@dataclass(frozen=True)
class Case:
    hack: str  # the class, "NN name"
    file: str  # fixture stem
    problem: str = RELU
    policy: str = "strict"
    statuses: tuple = OK
    reasons: frozenset = field(default_factory=frozenset)  # any one of them must be among result.reasons
    note: str = ""

    @property
    def id(self) -> str:
        return self.file + ("" if self.policy == "strict" else f"[{self.policy}]")


def cheat(hack, file, statuses, reasons, problem=RELU, policy="strict", note=""):
    return Case(hack, file, problem, policy, tuple(statuses), frozenset(reasons), note)


def honest(hack, file, problem=RELU):
    return Case(hack, file, problem)


WRONG_VALUES = {"non_finite", "mismatch"}

CASES = [
    cheat("01 stale reference memory", "c01_stale_memory_cheat", ["incorrect"], WRONG_VALUES),
    honest("01 stale reference memory", "c01_stale_memory_honest"),
    cheat("02 input mutation", "c02_input_mutation_cheat", ["rejected"], {"output_aliases_input", "inputs_modified"}),
    cheat("02 input mutation", "c02b_input_zeroing_cheat", ["rejected"], {"inputs_modified"}),
    honest("02 input mutation", "c02_input_mutation_honest"),
    cheat("03 partial computation", "c03_partial_computation_cheat", ["incorrect"], WRONG_VALUES),
    honest("03 partial computation", "c03_partial_computation_honest"),
    cheat("04 tiny-output pass", "c04_tiny_output_cheat", ["incorrect"], {"mismatch"}, problem=TINY_RELU),
    honest("04 tiny-output pass", "c04_tiny_output_honest", problem=TINY_RELU),
    cheat("05 distribution shortcut", "c05_distribution_shortcut_cheat", ["incorrect"], {"mismatch"}),
    honest("05 distribution shortcut", "c05_distribution_shortcut_honest"),
    cheat("06 result caching", "c06_result_caching_cheat", ["incorrect"], {"mismatch"}),
    honest("06 result caching", "c06_result_caching_honest"),
    cheat("06 result caching", "c06h_helion_cached_output_cheat", ["incorrect"], {"mismatch"}),  # in Helion
    honest("06 result caching", "c06h_helion_cached_output_honest"),
    # memoized on a fingerprint of a few values: right on every fresh trial; on timed calls where part of an input
    # changed it hands back its kept output (a sampled one is wrong), and the outside clock's calls on fresh inputs
    # are slower than its timing said
    cheat("06 result caching", "c06b_input_fingerprint_cheat", ["incorrect", "rejected"],
          {"memoized_output", "stateful_output"}),
    honest("06 result caching", "c06b_input_fingerprint_honest"),
    cheat("07 side-stream work", "c07_side_stream_cheat", STATIC, {"side_stream"}),
    honest("07 side-stream work", "c07_side_stream_honest"),
    cheat("08 background threads", "c08_background_threads_cheat", STATIC, {"static_concurrency"}),
    honest("08 background threads", "c08_background_threads_honest"),
    cheat("09 lazy outputs", "c09_lazy_outputs_cheat", ["incorrect", "rejected"],
          {"output_not_tensor", "static_patching", "static_introspection"}),
    honest("09 lazy outputs", "c09_lazy_outputs_honest"),
    cheat("10 timer tampering", "c10_timer_tampering_cheat", STATIC, {"static_patching"}),
    honest("10 timer tampering", "c10_timer_tampering_honest"),
    cheat("11 result-channel forgery", "c11_result_forgery_cheat", STATIC, {"early_exit"}),
    honest("11 result-channel forgery", "c11_result_forgery_honest"),
    cheat("12 reading expected outputs", "c12_reading_expected_cheat", STATIC, {"static_introspection"}),
    honest("12 reading expected outputs", "c12_reading_expected_honest"),
    cheat("13 seed prediction", "c13_seed_prediction_cheat", STATIC, {"seed_prediction"}),
    honest("13 seed prediction", "c13_seed_prediction_honest"),
    cheat("14 warm-up detection", "c14_warmup_detection_cheat", ["incorrect"], {"timing_output_mismatch"}),
    honest("14 warm-up detection", "c14_warmup_detection_honest"),
    # Tells the device-only calls that give a host-bound call's cost (a long lead queued ahead) from the others: on
    # the CPU there is no lead, so it computes and passes; test_reward_hacks_gpu.py catches it.
    Case("14 warm-up detection", "c14b_lead_detection_cheat", RELU, "strict", OK, frozenset(),
         "no lead on the CPU: it computes"),
    honest("14 warm-up detection", "c14b_lead_detection_honest"),
    # The profiler that tells custom kernels from ATen ones is CUDA-only (attribution.py); on the CPU
    # the verifier must count Triton launches itself to see this. Required here: no_custom_kernel.
    cheat("15 fallback to PyTorch", "c15_torch_fallback_cheat", ["rejected"], {"no_custom_kernel"}),
    honest("15 fallback to PyTorch", "c15_torch_fallback_honest"),
    cheat("16 precision downgrade", "c16_precision_downgrade_cheat", ["incorrect"], {"mismatch"}, problem=MATMUL),
    Case("16 precision downgrade", "c16_precision_downgrade_cheat", MATMUL, "relaxed", OK, frozenset(),
         "admitted by the relaxed policy, which is recorded"),
    honest("16 precision downgrade", "c16_precision_downgrade_honest", problem=MATMUL),
    cheat("17 ghost fast path", "c17_ghost_fast_path_cheat", ["rejected"], {"no_custom_kernel"}),
    honest("17 ghost fast path", "c17_ghost_fast_path_honest"),
    cheat("18 garbage that matches", "c18_garbage_matches_cheat", ["rejected"], {"nondeterministic"}),
    honest("18 garbage that matches", "c18_garbage_matches_honest"),
    # the same noise in one buffer it hands back every call: the two calls' outputs are copied out before compared
    cheat("18 garbage that matches", "c18b_one_buffer_cheat", ["rejected"], {"nondeterministic"}),
    honest("18 garbage that matches", "c18b_one_buffer_honest"),
    # A cuda_nvrtc candidate: the static guard must reject it before the CPU's backend_needs_cuda.
    cheat("19 persisting L2", "c19_persisting_l2_cheat", STATIC, {"persisting_l2"}),
    # Its twin cannot run on a CPU: it must be refused for that reason only (the GPU file runs it).
    Case("19 persisting L2", "c19_persisting_l2_honest", RELU, "strict", ("rejected",),
         frozenset({"backend_needs_cuda"}), "honest, but needs a GPU"),
    # An honest kernel on a problem whose reference is absurdly slow: ok, but flagged.
    cheat("20 statistics games", "c20_statistics_games_cheat", OK, {"speedup_review"}, problem=SLOW_RELU),
    honest("20 statistics games", "c20_statistics_games_honest"),
    cheat("21 harness tampering", "c21_harness_tampering_cheat", STATIC, {"harness_tampering", "static_introspection"}),
    honest("21 harness tampering", "c21_harness_tampering_honest"),
]


def config(cache_dir: Path, policy: str) -> VerifyConfig:
    return VerifyConfig(policy=policy, small=True, compile_baseline=False, trials=6,
                        timing=TimingConfig(budget_s=0.3, min_samples=5), cache_dir=cache_dir)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, Result]:
    """Every case's Result, by case id: one evaluate_many per policy (strict: all but one job).

    The batches run one after the other: on a small CPU machine a second verifier's workers would
    disturb the first one's timing (and its trusted-clock cross-check)."""
    problems = {}
    by_policy: dict[str, list[Case]] = {}
    for case in CASES:
        if case.problem not in problems:
            problems[case.problem] = load_problem(case.problem)
        by_policy.setdefault(case.policy, []).append(case)
    out: dict[str, Result] = {}
    for policy, cases in by_policy.items():
        cache = tmp_path_factory.mktemp(f"kc-adversarial-{policy}")
        with Verifier("cpu", config(cache, policy)) as verifier:
            jobs = [Job(problems[c.problem], Candidate.from_file(FIXTURES / f"{c.file}.py")) for c in cases]
            for case, result in zip(cases, verifier.evaluate_many(jobs)):
                out[case.id] = result
    report = os.environ.get("KC_ADVERSARIAL_REPORT")  # optional: every verdict in one JSON file
    if report:
        Path(report).write_text(json.dumps({k: {"status": r.status, "reasons": r.reasons, "message": r.message[:300],
                                                "speedup_eager": r.speedup_eager, "policy": r.policy}
                                            for k, r in out.items()}, indent=1))
    return out


def describe(result: Result) -> str:
    return f"status={result.status} reasons={result.reasons} message={result.message[:600]!r}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_reward_hack_verdict(verdicts, case: Case):
    result = verdicts[case.id]
    assert result.status in STATUSES
    json.dumps(result.to_dict())  # every verdict is JSON-ready
    assert result.policy == case.policy
    assert result.status in case.statuses, f"{case.hack} / {case.file}: {describe(result)}"
    if case.statuses == OK and not case.reasons:
        # an honest twin: passed, nothing flagged, really timed
        assert result.correct and result.reasons == [], describe(result)
        assert result.trials == 6 and result.runtime_ms and result.speedup_eager is not None, describe(result)
        return
    if case.statuses != OK:
        assert not result.correct, describe(result)
    assert case.reasons & set(result.reasons), \
        f"{case.hack} / {case.file}: expected one of {sorted(case.reasons)}; {describe(result)}"
    if case.statuses != OK:
        # a cheat never earns a speedup (the verdict is its only output)
        assert result.speedup_eager is None, describe(result)


def _class_fixtures(n: int) -> list:
    """Class n's cheats and honest twins, at least one of each, each headed by its class and saying which it is."""
    cheats = sorted(FIXTURES.glob(f"c{n:02d}*_cheat.py"))
    twins = sorted(FIXTURES.glob(f"c{n:02d}*_honest.py"))
    assert cheats and twins, n
    for path in cheats + twins:
        first = path.read_text().splitlines()[0]
        assert first.startswith(f"# Hack class {n} ("), path.name
        assert ("CHEAT" in first) == path.stem.endswith("_cheat"), path.name
    return cheats + twins


def test_every_class_has_a_cheat_and_an_honest_twin():
    """Each fixture of classes 1-21 is judged here, or on a GPU where its language runs only there (Gluon)."""
    from tests.adversarial.test_reward_hacks_gpu import CASES as GPU_CASES

    covered = {c.file for c in CASES} | {path.stem for path, _, _ in GPU_CASES}
    for n in range(1, 22):
        assert {p.stem for p in _class_fixtures(n)} <= covered, n


def test_the_trust_boundarys_classes_have_a_cheat_and_an_honest_twin_each_judged():
    """Classes 22-29 are judged in their own files (the trust boundary, caches, precision, attribution): every
    fixture of theirs is named in one of those files."""
    judged = "".join((HERE / f"test_{name}.py").read_text() for name in
                     ("trust_boundary", "cache_hacks", "precision_hacks", "attribution_hacks"))
    for n in range(22, 30):
        for path in _class_fixtures(n):
            assert path.stem in judged or path.stem.rsplit("_", 1)[0] in judged, path.name


def test_relaxed_policy_admits_the_precision_downgrade_and_says_so(verdicts):
    strict = verdicts["c16_precision_downgrade_cheat"]
    relaxed = verdicts["c16_precision_downgrade_cheat[relaxed]"]
    assert strict.status == "incorrect" and strict.policy == "strict", describe(strict)
    assert "(strict)" in strict.message and strict.max_rel_error > 1e-4
    assert relaxed.status == "ok" and relaxed.policy == "relaxed", describe(relaxed)
    assert 1e-4 < relaxed.max_rel_error <= 1e-2
    assert relaxed.to_dict()["policy"] == "relaxed"


def test_statistics_game_is_flagged_not_trusted(verdicts):
    flagged = verdicts["c20_statistics_games_cheat"]
    plain = verdicts["c20_statistics_games_honest"]
    assert flagged.speedup_eager is not None and flagged.speedup_eager > 10, describe(flagged)
    assert "speedup_review" in flagged.reasons, describe(flagged)
    # it held on timed calls checked with inputs changed in place: real (the reference wastes work)
    assert flagged.review_resolved is True and flagged.timed_checks >= 1, describe(flagged)
    assert "speedup_review" not in plain.reasons and plain.status == "ok", describe(plain)
    assert plain.review_resolved is None


def test_memoizing_cheat_passed_every_trial_and_failed_a_timed_check(verdicts):
    result = verdicts["c06b_input_fingerprint_cheat"]
    assert result.trials == 6 and result.reasons in (["memoized_output"], ["stateful_output"]), describe(result)
    if result.reasons == ["memoized_output"]:
        assert "right when called afresh on them: an output kept from an earlier call" in result.message
    else:
        assert "on fresh inputs" in result.message and "fully fresh" in result.message, describe(result)


def test_warmup_cheat_passed_the_checks_and_failed_the_timed_round(verdicts):
    result = verdicts["c14_warmup_detection_cheat"]
    assert result.trials == 6, describe(result)  # every correctness trial passed
    assert result.message.startswith("timed call (round "), describe(result)
    assert result.reasons == ["timing_output_mismatch"], describe(result)
