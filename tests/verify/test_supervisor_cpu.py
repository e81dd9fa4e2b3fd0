"""The supervisor's CPU-specific behaviour: how its workers are started, what it decides before they run."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import Future

import psutil

from kernelcraft.problems import load_problem
from kernelcraft.verify import Verifier
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildOutcome
from kernelcraft.verify.supervisor import Supervisor
from tests.helpers import fixture_candidate, small_config


def _supervisor(tmp_path, **overrides) -> Supervisor:
    config = small_config(tmp_path / "cache", **overrides)
    return Supervisor("cpu", config, BaselineStore(tmp_path / "baselines.json"))


def test_cpu_workers_time_on_one_intra_op_thread(tmp_path, monkeypatch):
    # A thread pool on a shared machine made CPU timings noise; candidate and baseline workers alike
    # come from Workers.spawn, so both are pinned.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sup = _supervisor(tmp_path)
    worker = sup.workers.spawn()
    try:
        assert worker.ready()["threads"] == 1
    finally:
        worker.kill()


def test_cpu_threads_none_leaves_torch_its_default(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sup = _supervisor(tmp_path, cpu_threads=None)
    assert "OMP_NUM_THREADS" not in sup.worker_env
    assert _supervisor(tmp_path, cpu_threads=2).worker_env["OMP_NUM_THREADS"] == "2"


def test_a_cuda_candidate_on_the_cpu_is_rejected_before_any_build(tmp_path):
    problem = load_problem("level1/relu")
    with Verifier("cpu", small_config(tmp_path / "cache")) as verifier:
        verifier.builds.submit = _no_build
        start = time.perf_counter()
        result = verifier.evaluate(problem, fixture_candidate("relu_cuda_inline"))
    assert result.status == "rejected" and result.reasons == ["backend_needs_cuda"], (result.reasons, result.message)
    assert time.perf_counter() - start < 10 and result.compile_seconds is None


def test_the_wall_time_counts_the_wait_for_the_build(tmp_path):
    def slow_build(candidate, arch):
        future = Future()
        threading.Timer(0.6, future.set_result, [BuildOutcome(False, 0.6, "error: no such thing")]).start()
        return future

    with Verifier("cpu", small_config(tmp_path / "cache")) as verifier:
        verifier.builds.submit = slow_build
        result = verifier.evaluate(load_problem("level1/relu"), fixture_candidate("relu_cpp"))
    assert result.status == "compile_error"
    assert result.phases["build_wait"] >= 0.5 and result.wall_seconds >= 0.5


def _no_build(candidate, arch):
    raise AssertionError("a candidate no device here can run was sent to the build pool")


def test_admitting_a_problem_builds_nothing_and_only_two_reference_models_are_kept(tmp_path):
    sup = _supervisor(tmp_path)
    names = ["level1/relu", "level1/softmax", "level1/gelu"]
    problems = [load_problem(n) for n in names]
    need = sup.admit(problems[0])
    assert need.total > 0 and sup.references[problems[0].sha].model is None  # a plan: no model yet
    for p in problems:
        assert sup.reference(p).model is not None
    assert [sup.references[p.sha].model is not None for p in problems] == [False, True, True]
    assert sup.reference(problems[0]).model is not None  # built again when it is judged again


def test_a_killed_worker_exits_in_the_background_and_is_gone_before_the_next_candidates_checks(tmp_path, monkeypatch):
    from kernelcraft.verify import judge

    sup = _supervisor(tmp_path)
    problem = load_problem("level1/relu")
    seen = []  # at each candidate's checks: the earlier workers' processes and directories, still there or not
    workers = []
    real_trials, real_retire = judge.trials, sup.workers.retire

    def trials(case):
        seen.append([(psutil.pid_exists(w.proc.pid) and psutil.Process(w.proc.pid).status() != psutil.STATUS_ZOMBIE,
                      w.dir.exists()) for w in workers])
        return real_trials(case)

    def retire(worker):
        workers.append(worker)
        reap = worker.reap
        worker.reap = lambda: (time.sleep(1.0), reap())  # an exit slower than the next candidate's start
        real_retire(worker)
        assert sup.workers.exiting  # the reaper runs on; the evaluation does not wait for the exit

    monkeypatch.setattr(judge, "trials", trials)
    monkeypatch.setattr(sup.workers, "retire", retire)
    try:
        results = [sup.evaluate(problem, fixture_candidate("relu_triton"), None) for _ in range(3)]
    finally:
        sup.close()
    assert [r.status for r in results] == ["ok"] * 3, [r.message for r in results]
    assert seen == [[], [(False, False)], [(False, False)] * 2]
    assert not sup.workers.exiting and not any(w.dir.exists() for w in workers)


def test_baselines_go_beside_evaluations_only_where_safe():
    """A target's baselines compile with the supervisor's lock released only on a GPU, with the device lock on
    (timings stay exclusive), and while all measured beside fit a quarter of the device's memory."""
    from kernelcraft.verify.supervisor import goes_beside

    gib = 1 << 30
    assert goes_beside("cuda", True, beside=0, need=2 * gib, total=80 * gib)
    assert goes_beside("cuda", True, beside=18 * gib, need=2 * gib, total=80 * gib)
    assert not goes_beside("cuda", True, beside=19 * gib, need=2 * gib, total=80 * gib)
    assert not goes_beside("cuda", True, beside=0, need=21 * gib, total=80 * gib)  # a large problem: alone
    assert not goes_beside("cuda", False, beside=0, need=gib, total=80 * gib)  # no device lock: nothing exclusive
    assert not goes_beside("cpu", True, beside=0, need=gib, total=80 * gib)  # the compile would share the cores


def test_a_baseline_worker_starts_loads_and_warms_with_the_lock_released_and_times_holding_it(tmp_path):
    """The mechanism `Supervisor.target` uses on a GPU, run here with real CPU workers: the baseline worker's start,
    load and warm-up inside `unlocked` (another thread can take the supervisor's lock then), its timing after it,
    the lock held again; the baselines measured."""
    import contextlib

    from kernelcraft.verify import speed

    sup = _supervisor(tmp_path)
    problem = load_problem("level1/relu")
    taken = []

    def take_and_give_back():
        taken.append(sup.lock.acquire(timeout=10))
        if taken[-1]:
            sup.lock.release()

    @contextlib.contextmanager
    def unlocked():
        with sup._unlocked():
            other = threading.Thread(target=take_and_give_back)
            other.start()
            other.join()
            yield

    try:
        with sup.lock:
            measured = speed.measure_target(sup, problem, unlocked=unlocked)
            assert sup.lock.locked()
        assert taken == [True]  # the other thread took the lock while the worker started
        assert measured.eager is not None and measured.eager.median_ms > 0
    finally:
        sup.close()


def test_a_timing_waits_for_the_standby_workers_to_have_started(tmp_path):
    """Standby workers are started on a GPU only, but the wait is the supervisor's own: real workers, spawned here.
    Before an exclusive (timing) phase each has handshaken; one that died starting is dropped; a shared phase
    (the checks) does not wait."""
    from kernelcraft.result import Result

    sup = _supervisor(tmp_path)
    try:
        starting, dead = sup.workers.spawn(), sup.workers.spawn()
        os.kill(dead.proc.pid, signal.SIGKILL)  # it dies starting, as a crash would end it
        sup.workers.standby = [starting, dead]
        result = Result("level1/relu", "c", "triton")
        with sup.device_phase(result, shared=True):
            assert starting.conn is None  # the checks go on beside a start
        with sup.device_phase(result):
            assert starting.conn is not None and starting.info["ready"]
        assert sup.workers.standby == [starting]
        assert result.phases["standby_wait"] > 0
    finally:
        sup.close()
