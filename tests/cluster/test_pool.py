"""The cluster's verifier on a local Ray cluster of two CPU "devices": the verdicts of the one-process verifier,
targets measured together spread over the actors and candidates sent where their baselines are, candidates of an
actor killed mid-job judged by the others, and the cluster's one-line errors."""

from __future__ import annotations

import os
import signal
import time

import pytest

ray = pytest.importorskip("ray")

from kernelcraft.cluster import ClusterError, connect, plan  # noqa: E402
from kernelcraft.cluster.connect import hold, release  # noqa: E402
from kernelcraft.cluster.pool import ClusterVerifier  # noqa: E402
from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.verify import Job  # noqa: E402
from tests.helpers import fixture_candidate, small_config  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for the module (each verifier opened on it holds it; this keeps it between tests)."""
    connect("local")
    hold()
    yield
    release()


@pytest.fixture
def events():
    return []


@pytest.fixture
def verifier(cluster, cache_root, events):
    v = ClusterVerifier("local", "cpu", small_config(cache_root), actors=2, on_event=lambda k, d: events.append((k, d)))
    yield v
    v.close()


def test_verdicts_are_those_of_the_one_process_verifier(verifier, cpu_verifier, relu_problem, events):
    names = ["relu_torch", "relu_wrong_math", "relu_raises", "relu_segfault"]
    jobs = [Job(relu_problem, fixture_candidate(n)) for n in names]
    there = verifier.evaluate_many(jobs)
    here = cpu_verifier.evaluate_many(jobs)
    assert [str(r.status) for r in there] == [str(r.status) for r in here] == \
        ["ok", "incorrect", "runtime_error", "runtime_error"]
    assert [r.reasons[:1] for r in there] == [r.reasons[:1] for r in here]
    node = ray.get_runtime_context().get_node_id()[:16]
    assert {r.node for r in there} == {node} and {r.node for r in here} == {""}
    assert len(verifier.devices) == 2 and all(d.startswith("cpu:") for d in verifier.devices)
    usage = verifier.usage()
    assert sum(u["judged"] for u in usage) == 4 and all(u["judged"] for u in usage), usage  # both devices worked
    assert verifier.load() == {"busy": 0, "idle": 2, "queued": 0, "lost": 0, "starting": 0}
    # what the progress line shows, as jobs went and came back (the last heard just after the last verdict)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(k == "devices" and d["busy"] == 0 for k, d in events):
        time.sleep(0.05)
    loads = [d for k, d in events if k == "devices"]
    assert any(d["busy"] == 2 for d in loads) and loads[-1] == {**verifier.load()}, loads
    assert verifier.target(relu_problem).eager is not None
    assert verifier.admit(relu_problem).total > 0


def test_targets_spread_and_candidates_go_where_their_baselines_are(verifier, relu_problem):
    from concurrent.futures import ThreadPoolExecutor

    problems = [relu_problem, load_problem("level1/gelu")]
    with ThreadPoolExecutor(2) as pool:  # a bench's first two runs measure their targets at once
        targets = list(pool.map(verifier.target, problems))
    assert all(t.eager is not None for t in targets)
    assert sorted(u["problems"] for u in verifier.usage()) == [1, 1]  # one on each actor, not both on the first
    source = fixture_candidate("relu_torch").source
    result = verifier.evaluate_many([Job(relu_problem, Candidate(source, "c0"))])[0]
    assert str(result.status) == "ok", result.message
    usage = verifier.usage()
    assert sorted(u["problems"] for u in usage) == [1, 1]  # judged where relu's baselines were: none measured again
    assert sum(u["judged"] for u in usage) == 1


def test_an_actor_killed_mid_job_loses_nothing(verifier, relu_problem, events):
    source = fixture_candidate("relu_torch").source
    futures = [verifier.submit(Job(relu_problem, Candidate(f"{source}\n# copy {i}\n", f"c{i}"))) for i in range(5)]
    deadline = time.monotonic() + 120
    victim = None
    while victim is None and time.monotonic() < deadline:  # an actor with a job in flight
        with verifier._lock:
            victim = next((s for s in verifier._slots if s.alive and s.inflight), None)
        time.sleep(0.05)
    assert victim is not None
    os.kill(victim.info["pid"], signal.SIGKILL)
    results = [f.result(timeout=300) for f in futures]
    assert [r.candidate for r in results] == [f"c{i}" for i in range(5)]
    assert all(str(r.status) == "ok" for r in results), [r.message for r in results]
    lost = [d for k, d in events if k == "actor_lost"]
    assert len(lost) == 1 and lost[0]["device"] == victim.label and "died" in lost[0]["error"]
    usage = verifier.usage()
    assert [u["lost"] is not None for u in usage].count(True) == 1
    assert sum(u["judged"] for u in usage) == 5  # each judged once, by an actor still alive when it finished
    deadline = time.monotonic() + 120  # the jobs may all be judged before Ray has started the replacement
    while len(verifier.devices) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(verifier.devices) == 2  # a replacement took the lost actor's place


def test_a_cuda_run_on_a_cluster_without_a_gpu_is_one_line(cluster):
    with pytest.raises(ClusterError) as info:
        plan("local", "cuda", None)
    assert str(info.value).startswith("--cluster local: the cluster has no GPU for a --device cuda run (1 node(s), ")
    assert "\n" not in str(info.value)
    with pytest.raises(ClusterError, match="on a cluster the device is cuda"):
        plan("local", "cuda:1", None)
    with pytest.raises(ClusterError, match="at least one verifier actor"):
        plan("local", "cpu", 0)
    assert plan("local", "auto", 2) == ("cpu", 2)
