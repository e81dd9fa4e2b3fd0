"""The verifier's trust boundary on the CPU: classes 22 (harness reach-through), 25 (incremental recomputation) and 28
(unfair machine) of ../shared/REWARD_HACKS.md. Every cheat here gets past the static rules (they are turned off: a
determined candidate writes around them) and acts inside its own process, where the harness's timing, output copies and
eager control also run; each must be caught by what the supervisor checks from outside (verify/outside.py
outside_clock; verify/judge.py stateful_split, fair; verify/process.py's freezing), and each honest twin must pass.
One more (c22c) lies about its time only once: it must gain nothing from that, and is published at its true time.
c28c orphans a grandchild in a session of its own, out of the worker's group and tree: found under the fork server,
killed, and the candidate rejected (`process_escaped`).

On 5509881 (before the outside clock), every cheat here came back `ok`: c22 at about 4x its real speed, c22b at
hundreds of times (its calls handed back a kept output), c25 about 2x, c28 with a core its baselines never had. On
e1dc11c, c22b came back `ok` once in CI: with the Triton interpreter's 60 ms a call, its timed rounds were two calls,
one computed and one kept, and the outside clock's 2x CPU allowance held the halved time. The outside clock's second
spin on the same tensors, rewritten, now finds every kept output whatever the timing (`memoized_output`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.containment import cpu_seconds
from kernelcraft.verify.outside import OUTSIDE_RATIO, OUTSIDE_SLACK_MS
from kernelcraft.verify.supervisor import Supervisor

FIXTURES = Path(__file__).parent / "fixtures"
RELU, MATMUL = "level1/relu", "level1/matmul"

# (fixture, problem, verdicts the cheat may get, reasons one of which it must carry)
CHEATS = [
    ("c22_reach_through_cheat", RELU, {"rejected", "incorrect"},
     {"timing_tampered", "stateful_output", "memoized_output"}),
    ("c22b_sample_copy_cheat", RELU, {"rejected", "incorrect"},
     {"memoized_output"}),
    ("c25_incremental_update_cheat", MATMUL, {"rejected"}, {"stateful_output", "timing_tampered"}),
    ("c28_unfair_machine_cheat", RELU, {"rejected"}, {"unfair_machine"}),
    ("c28c_escaped_process_cheat", RELU, {"rejected"}, {"process_escaped"}),
]
HONEST = [("c22_reach_through_honest", RELU), ("c22b_sample_copy_honest", RELU),
          ("c25_incremental_update_honest", MATMUL), ("c28_unfair_machine_honest", RELU),
          ("c28c_escaped_process_honest", RELU)]
# judged, neither caught nor trusted on its word: it quarters only its first timing (outside.OUTSIDE_RETIMES)
RETIMED = [("c22c_first_timing_cheat", RELU)]


def _config(cache: Path) -> VerifyConfig:
    # N=64: the Triton interpreter takes ~0.25 s a call at the matmul's SMALL_SIZES (197), too few timed calls
    return VerifyConfig(small=True, sizes={"N": 64}, compile_baseline=False, trials=3, cache_dir=cache,
                        static_guards=False, timing=TimingConfig(budget_s=0.3, min_samples=8))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    names = [(name, problem) for name, problem, *_ in CHEATS] + HONEST + RETIMED
    problems = {p: load_problem(p) for p in {RELU, MATMUL}}
    with Verifier("cpu", _config(tmp_path_factory.mktemp("kc-trust"))) as verifier:
        jobs = [Job(problems[p], Candidate.from_file(FIXTURES / f"{n}.py")) for n, p in names]
        return {n: r for (n, _), r in zip(names, verifier.evaluate_many(jobs))}


def _describe(r) -> str:
    return f"status={r.status} reasons={r.reasons} message={r.message[:500]!r} outside={r.outside_clock}"


@pytest.mark.parametrize("name,problem,statuses,reasons", CHEATS, ids=[c[0] for c in CHEATS])
def test_cheat_is_caught_from_outside(verdicts, name, problem, statuses, reasons):
    if name.startswith("c28") and os.cpu_count() < 2:
        pytest.skip("one core: there is no other core to take")
    result = verdicts[name]
    assert result.status in statuses and reasons & set(result.reasons), _describe(result)
    assert result.speedup_eager is None, _describe(result)


@pytest.mark.parametrize("name,problem", HONEST, ids=[h[0] for h in HONEST])
def test_honest_twin_passes_with_the_outside_clock(verdicts, name, problem):
    result = verdicts[name]
    assert result.status == "ok" and result.reasons == [], _describe(result)
    assert result.speedup_eager is not None
    clock = result.outside_clock
    assert clock["checked"] >= clock["calls"] >= 1 and clock["per_call_ms"] <= clock["limit_ms"], _describe(result)


def test_no_process_a_candidate_orphaned_outlives_its_verdict(verdicts):
    """c28c's grandchild left the worker's session and tree (its parent exited): the fork server took it in, and it
    was killed with the verdict, not left to run on where later candidates and baselines are timed."""
    mark = "kc-c28c-escaped-process"
    assert not [p.pid for p in psutil.process_iter(["cmdline"]) if mark in " ".join(p.info["cmdline"] or [])]


def test_a_time_reported_low_once_is_timed_again_and_published_as_the_clock_saw_it(verdicts):
    """c22c quarters its first timing only. Every spin is over the limit that time set; the candidate is timed again
    (as where a shared machine's load moved between its timing and the clock), passes against its true time, and
    that time is the one published: within the clock's ratio of what the clock saw, never the quartered one."""
    result = verdicts["c22c_first_timing_cheat"]
    clock = result.outside_clock
    assert result.status == "ok" and clock["retimed"] == 1, _describe(result)
    assert result.runtime_ms * OUTSIDE_RATIO["cpu"] >= clock["per_call_ms"] - OUTSIDE_SLACK_MS["cpu"][1], \
        _describe(result)
    assert any("over its limit" in note and "timed again" in note for note in result.notes), result.notes


def test_a_loaded_candidate_runs_only_inside_a_request(tmp_path):
    """c28b's thread burns a core whenever it can: frozen between requests, it uses no CPU there (so nothing timed
    meanwhile, a baseline on the same cores, is slowed), and it still answers the next request."""
    sup = Supervisor("cpu", _config(tmp_path / "cache"), BaselineStore(tmp_path / "baselines.json"))
    try:
        problem = load_problem(RELU)
        sup.plan(problem)
        worker = sup.workers.take(0)
        worker.ready()
        source = (FIXTURES / "c28b_idle_burner_cheat.py").read_text()
        worker.freeze_between = True
        assert "error" not in worker.ask(sup._load_request(problem, source), 120)
        before = cpu_seconds(worker.proc.pid)
        time.sleep(0.5)
        assert cpu_seconds(worker.proc.pid) - before < 0.05
        assert worker.ask({"op": "unstage"}, 30) == {"ok": True}  # thawed for the request, frozen after it
    finally:
        sup.close()
