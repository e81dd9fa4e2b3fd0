"""The verifier end to end on the CPU (level1/relu at SMALL_SIZES): honest candidates pass, every kind
of wrong, cheating or crashing candidate gets the verdict it deserves, and the verifier carries on.

One session-wide verifier (tests/conftest.py) serves most tests; each evaluation spawns a worker, so
each test here costs a few seconds.
"""

from __future__ import annotations

import json

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.result import STATUSES
from kernelcraft.verify import Job, Result, TimingConfig, Verifier, VerifyConfig
from tests.helpers import FIXTURES, KERNELBENCH, fixture_candidate, small_config


def evaluate(verifier, problem, name: str) -> Result:
    result = verifier.evaluate(problem, fixture_candidate(name))
    assert result.status in STATUSES
    json.dumps(result.to_dict())  # every verdict is JSON-ready
    return result


def assert_ok(result: Result, trials: int = 3):
    assert result.status == "ok", (result.reasons, result.message)
    # A review flag is advice, not a failure: CPU baselines measured on a busy 2-core machine can make
    # an honest kernel look more than 10x faster than eager.
    assert result.correct and set(result.reasons) <= {"speedup_review"}
    assert result.trials == trials
    assert result.runtime_ms is not None and result.runtime_ms > 0
    assert result.max_rel_error is not None and result.max_rel_error <= 1e-4
    assert result.device == "cpu"


def assert_failed(result: Result, status: str, *reasons: str):
    assert result.status == status, (result.status, result.reasons, result.message)
    assert not result.correct
    assert result.reasons and result.reasons[0] in reasons, result.reasons
    assert result.runtime is None and result.speedup_eager is None


# -- honest candidates --------------------------------------------------------------------------------

def test_a_triton_launch_that_raised_and_fell_back_to_torch_is_no_kernel_of_its_own(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_triton_raises_then_torch")
    assert_failed(result, "rejected", "no_custom_kernel")
    assert result.custom_kernel_fraction == 0.0 and result.kernels == []  # counting launches said 1.0


def test_a_candidate_its_caller_asks_not_to_attribute_is_not_attributed(cpu_verifier, relu_problem):
    """Candidate.attribute=False (set by apply for a model it wrote that replays CUDA graphs, or holds no kernel of
    its own): the same candidate that is no kernel of its own when attributed passes, and says it was not checked."""
    source = fixture_candidate("relu_triton_raises_then_torch").source
    result = cpu_verifier.evaluate(relu_problem, Candidate(source, "unattributed", attribute=False))
    assert_ok(result)
    assert any(n.startswith("kernel attribution: not checked, as its caller asked") for n in result.notes)


def test_honest_triton_candidate(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_triton")
    assert_ok(result)
    assert result.backend == "triton" and result.candidate == "relu_triton" and result.problem == "level1/relu"
    assert result.speedup_eager is not None and result.speedup_eager > 0
    assert result.eager is not None and result.eager.method == "cpu_perf_counter"
    assert result.speedup_eager == pytest.approx(result.eager.median_ms / result.runtime_ms, rel=1e-3, abs=1e-4)
    assert result.eager_control is not None and result.eager_control.samples >= 1  # eager timed beside it
    assert result.compiled is None and result.speedup_compile is None  # compile_baseline=False
    # what the verdict cost, by phase, the timing phase by its parts
    assert {"worker_start", "load", "check", "time", "time.warm", "time.measure"} <= set(result.phases)
    assert result.phases["time"] >= result.phases["time.warm"] + result.phases["time.measure"]
    # the load by its parts, as the worker saw them: the device set, the reference built, the candidate imported, built
    load = [result.phases[f"load.{step}"] for step in ("device", "reference", "import", "build")]
    assert all(s >= 0 for s in load) and sum(load) <= result.phases["load"]
    assert result.roofline_fraction is None  # no spec for a CPU
    assert 0.5 < result.custom_kernel_fraction <= 1.0  # the interpreted launch is most of the call's time
    assert result.kernels[0]["name"] == "relu_kernel" and result.kernels[0]["device_us"] > 0
    assert result.flops == 37 * 1000 and result.bytes == 2 * 37 * 1000 * 4
    assert result.sizes == {"source": "SMALL_SIZES", "constants": {"batch_size": 37, "dim": 1000},
                            "full": {"batch_size": 4096, "dim": 16384}}
    # the trials rotate through the distributions; sampled timed calls are judged too, on their inputs as
    # changed in place between calls
    labels = [e["trial"] for e in result.trial_errors]
    assert labels[:3] == ["trial 0 (natural)", "trial 1 (offset)", "trial 2 (mixed_scale)"]
    timed = [label for label in labels[3:] if not label.startswith("outside clock (spin ")]
    assert timed and all(label.startswith("timed call (round ") for label in timed)
    # and the outside clock's calls, on fresh inputs the supervisor wrote, one entry a spin; a second spin always,
    # on the same tensors with every value rewritten
    spins = [label for label in labels if label.startswith("outside clock (spin ")]
    assert spins[0].startswith("outside clock (spin 1, ") and spins[0].endswith("calls on fresh inputs)")
    assert spins[1].startswith("outside clock (spin 2, ") and spins[1].endswith("the same tensors, rewritten)")
    assert len(spins) == result.outside_clock["attempts"] >= 2 and result.outside_clock["checked"] >= 2
    assert result.timed_checks == len(timed)
    assert len(result.seeds) == 3 and len(set(result.seeds)) == 3
    assert result.wall_seconds > 0 and result.policy == "strict"


@pytest.mark.slow
def test_honest_cpp_candidate(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_cpp")
    assert_ok(result)
    assert result.backend == "cpp"
    assert result.compile_seconds is not None and result.compile_seconds > 0


# -- wrong answers --------------------------------------------------------------------------------------

def test_wrong_math_is_incorrect(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_wrong_math")
    assert_failed(result, "incorrect", "mismatch")
    assert result.max_rel_error > 1e-4
    assert result.message.startswith("trial 0 (natural), output 0: max relative error")


def test_wrong_dtype_is_incorrect(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_wrong_dtype")
    assert_failed(result, "incorrect", "output_dtype")
    assert "torch.float16" in result.message


def test_wrong_shape_is_incorrect(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_wrong_shape")
    assert_failed(result, "incorrect", "output_shape")
    assert "(37000,)" in result.message and "(37, 1000)" in result.message


def test_printed_fake_verdict_changes_nothing(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_fake_json")
    assert_failed(result, "incorrect", "mismatch")


# -- cheating -------------------------------------------------------------------------------------------

def test_writing_into_the_input_is_rejected(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_writes_input")
    assert_failed(result, "rejected", "inputs_modified")


def test_returning_the_input_is_rejected(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_returns_input")
    assert_failed(result, "rejected", "output_aliases_input", "inputs_modified")


def test_cuda_backend_on_cpu_is_rejected(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_nvrtc")
    assert_failed(result, "rejected", "backend_needs_cuda")
    assert result.backend == "cuda_nvrtc"


# -- crashes and hangs ----------------------------------------------------------------------------------

def test_raising_in_forward(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_raises")
    assert_failed(result, "runtime_error", "candidate_raised")
    assert "kc-fixture: forward exploded" in result.message


def test_no_model_new(cpu_verifier, relu_problem):
    source = (FIXTURES / "no_model_new.py").read_text()  # Candidate.from_file would refuse it
    result = cpu_verifier.evaluate(relu_problem, Candidate(source, "no_model_new"))
    assert_failed(result, "runtime_error", "no_model_new")


def test_raising_system_exit_in_forward_is_an_exit_said_as_the_candidates(cpu_verifier, relu_problem):
    """`raise SystemExit(0)` in forward was "the worker exited with status 1", kernelcraft's frames first."""
    source = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
             "        raise SystemExit(0)\n"
    result = cpu_verifier.evaluate(relu_problem, Candidate(source, "system_exit", backend="triton"))
    assert_failed(result, "runtime_error", "early_exit")
    assert result.message.startswith("the candidate's code raised SystemExit: 0 inside its call")
    assert result.message.rstrip().endswith("SystemExit: 0") and "kernelcraft/verify" not in result.message


def test_exit_in_forward_is_a_crash(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_exit")
    assert_failed(result, "runtime_error", "worker_crashed")
    assert "exited with status 3" in result.message


def test_segfault_is_a_crash_and_the_next_candidate_runs(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_segfault")
    assert_failed(result, "runtime_error", "worker_crashed")
    assert "SIGSEGV" in result.message
    assert_ok(evaluate(cpu_verifier, relu_problem, "relu_torch"))


def test_infinite_loop_times_out_and_the_next_candidate_runs(cache_root, relu_problem):
    with Verifier("cpu", small_config(cache_root, run_timeout=5)) as verifier:
        result = evaluate(verifier, relu_problem, "relu_infinite_loop")
        assert_failed(result, "timeout", "timeout")
        assert "no answer within 5 s" in result.message
        assert 5 <= result.wall_seconds < 120  # the timeout's own clock, with room for a loaded machine
        assert_ok(evaluate(verifier, relu_problem, "relu_torch"))


def test_a_candidate_that_compiles_a_model_has_the_load_timeout_for_its_first_call(cache_root, relu_problem):
    """Candidate.compiles (set by apply for its model under torch.compile, never read from the source): the first
    call, which compiles, is given the load timeout; every other candidate's, the run timeout."""
    config = small_config(cache_root, run_timeout=2)
    config.load_timeout = 6
    with Verifier("cpu", config) as verifier:
        candidate = fixture_candidate("relu_infinite_loop")
        candidate.compiles = True
        result = verifier.evaluate(relu_problem, candidate)
        assert_failed(result, "timeout", "timeout")
        assert "no answer within 6 s" in result.message, result.message


# -- batches --------------------------------------------------------------------------------------------

def test_evaluate_many_keeps_order_and_statuses(cpu_verifier, relu_problem):
    uniform_only = load_problem(FIXTURES / "relu_problem_uniform_only.py")
    jobs = [Job(relu_problem, fixture_candidate("relu_wrong_shape")),
            Job(uniform_only, fixture_candidate("relu_torch")),
            Job(relu_problem, fixture_candidate("relu_nvrtc")),
            Job(relu_problem, fixture_candidate("relu_raises"))]
    seen = []
    results = cpu_verifier.evaluate_many(jobs, on_result=lambda i, r: seen.append((i, r)))
    assert [r.candidate for r in results] == ["relu_wrong_shape", "relu_torch", "relu_nvrtc", "relu_raises"]
    assert [r.status for r in results] == ["incorrect", "ok", "rejected", "runtime_error"]
    assert [r.problem for r in results] == ["level1/relu", "relu_problem_uniform_only", "level1/relu",
                                            "level1/relu"]
    assert sorted(i for i, _ in seen) == [0, 1, 2, 3]
    assert all(results[i] is r for i, r in seen)
    # the problem's INPUT_DISTRIBUTIONS restricts every trial to `uniform`
    labels = [e["trial"] for e in results[1].trial_errors]
    assert labels[:3] == [f"trial {i} (uniform)" for i in range(3)]
    assert labels[3:] and all(label.startswith(("timed call", "outside clock (spin ")) for label in labels[3:])


def test_relaxed_policy_is_reported(cache_config, relu_problem):
    cache_config.policy, cache_config.trials = "relaxed", 1
    with Verifier("cpu", cache_config) as verifier:
        result = evaluate(verifier, relu_problem, "relu_wrong_math")
    # 0.01·x where 0 is expected: up to ~0.05 of the output's rms, beyond even the relaxed 1e-2
    assert_failed(result, "incorrect", "mismatch")
    assert result.policy == "relaxed" and "> 0.01 (relaxed)" in result.message


def test_default_guards_reject_a_candidate_without_a_kernel(tmp_path, relu_problem):
    """Plain PyTorch is no kernel: refused before any of it runs, whatever it would compute."""
    with Verifier("cpu", VerifyConfig(small=True, cache_dir=tmp_path)) as verifier:
        result = verifier.evaluate(relu_problem, fixture_candidate("relu_torch"))
    assert result.status == "rejected" and result.reasons == ["no_custom_kernel"]
    assert result.trials == 0 and result.runtime is None


# -- an ill-conditioned output: judged against float64 --------------------------------------------------

def test_a_degenerate_output_is_judged_against_float64(cpu_verifier):
    """Gemm -> GroupNorm -> mean -> ReLU: the output is rounding noise around zero. An honest kernel summing in
    its own order is off by 70% and more against torch's fp32 output, and passes against float64."""
    problem = load_problem(FIXTURES / "problems" / "groupnorm_mean.py")
    result = evaluate(cpu_verifier, problem, "groupnorm_mean_triton")
    assert_ok(result)
    assert any("judged against float64" in note for note in result.notes), result.notes


def test_a_degenerate_output_still_fails_a_wrong_kernel(cpu_verifier):
    problem = load_problem(FIXTURES / "problems" / "groupnorm_mean.py")
    result = evaluate(cpu_verifier, problem, "groupnorm_mean_unnormalised")
    assert_failed(result, "incorrect", "mismatch")
    assert "against float64" in result.message


# -- out of memory: the candidate's, or the harness's ---------------------------------------------------

def test_out_of_memory_in_the_candidates_code_is_the_candidates(cpu_verifier, relu_problem):
    result = evaluate(cpu_verifier, relu_problem, "relu_oom")
    assert_failed(result, "runtime_error", "candidate_oom")
    assert result.message.startswith("out of memory while the candidate's own code allocated")


def test_out_of_memory_in_the_harness_is_the_verifiers_error(cpu_verifier):
    problem = load_problem(FIXTURES / "problems" / "oom_in_worker_harness.py")
    result = evaluate(cpu_verifier, problem, "relu_torch")
    assert result.status == "verifier_error" and result.reasons == ["harness_oom"], (result.reasons, result.message)
    assert "not the candidate's" in result.message
    assert result.trials == 3  # the candidate passed every check before the harness failed


# -- baselines: a stale one is measured again before a speedup is published ---------------------------

def test_a_stale_cached_baseline_is_measured_again(tmp_path, relu_problem):
    from dataclasses import replace

    with Verifier("cpu", small_config(tmp_path)) as verifier:
        first = verifier.evaluate(relu_problem, fixture_candidate("relu_torch"))
        assert first.status == "ok" and not first.baseline_cached
        store = verifier.baselines  # cache_dir/trusted/baselines.json, its entries sealed (verify/trust.py)
        assert store.path == tmp_path / "trusted" / "baselines.json"
        (key,) = store._read().keys()
        stale = replace(first.eager, median_ms=first.eager.median_ms * 50)  # measured under heavy load, say
        store.put(key, stale, None)
        second = verifier.evaluate(relu_problem, fixture_candidate("relu_torch"))
    assert second.status == "ok", second.message
    assert not second.baseline_cached and second.eager.median_ms != stale.median_ms
    assert any(n.startswith("baseline re-measured") for n in second.notes), second.notes
    assert second.speedup_eager == pytest.approx(second.eager.median_ms / second.runtime_ms, rel=1e-3, abs=1e-4)
    assert store.get(key)[0].median_ms == second.eager.median_ms  # the cache holds what was measured


@pytest.mark.slow
@pytest.mark.skipif(not (KERNELBENCH / "level1" / "19_ReLU.py").exists(), reason="no KernelBench copy")
def test_default_config_on_the_cpu_derives_sizes_for_an_upstream_file(tmp_path):
    """VerifyConfig's default size is auto: small on the CPU, derived where a file has no SMALL_SIZES."""
    config = VerifyConfig(cache_dir=tmp_path, compile_baseline=False, trials=2, timing=TimingConfig(budget_s=0.3))
    with Verifier("cpu", config) as verifier:
        result = verifier.evaluate(load_problem(KERNELBENCH / "level1" / "19_ReLU.py"), fixture_candidate("relu_triton"))
    assert_ok(result, trials=2)
    assert result.sizes["source"] == "derived" and result.flops == 192 * 256


@pytest.mark.parametrize("device", ["tpu", "mps", "cuda:x", "xpu"])
def test_a_device_kernelcraft_does_not_run_on_is_named_as_such(device):
    from kernelcraft.verify import resolve_devices

    with pytest.raises(ValueError, match=f"--device {device}: not a device kernelcraft runs on"):
        resolve_devices(device)
    assert resolve_devices("cpu") == ["cpu"]
