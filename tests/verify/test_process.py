"""The worker process: a scrubbed environment, a private channel, and a group kill on timeout (spawned and, where
the test says, forked from the fork server: tests/verify/test_forkserver.py has the rest of the forked start)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from kernelcraft.problems import load_problem
from kernelcraft.verify.process import WorkerDied, WorkerLimit, WorkerProcess, WorkerTimeout, worker_environment
from tests.helpers import CPU_WORKER_ENV, FIXTURES

SECRETS = {"OPENAI_API_KEY": "sk-test", "MY_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s", "GH_PASSWORD": "p",
           "CUDA_API_KEY": "c", "TORCH_AUTH_HEADER": "h"}


def test_worker_environment_strips_secrets(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/triton-cache")
    monkeypatch.setenv("KC_SOMETHING_UNRELATED", "x")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    env, stripped = worker_environment({"EXTRA": "1"})
    assert not set(SECRETS) & set(env)
    assert set(SECRETS) <= set(stripped)
    assert stripped == sorted(stripped)
    assert env["PATH"] == os.environ["PATH"]
    assert env["TRITON_CACHE_DIR"] == "/tmp/triton-cache" and env["OMP_NUM_THREADS"] == "2"
    assert "KC_SOMETHING_UNRELATED" not in env and "KC_SOMETHING_UNRELATED" not in stripped
    assert env["EXTRA"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    package_root = Path(__file__).resolve().parents[2] / "src"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(package_root)


def test_worker_environment_extra_may_set_kept_names(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    env, _ = worker_environment({"CUDA_VISIBLE_DEVICES": ""})
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_worker_starts_answers_ready_and_cleans_up(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    worker = WorkerProcess({"CUDA_VISIBLE_DEVICES": ""})
    try:
        info = worker.ready()
        assert info["ready"] is True and info["pid"] == worker.proc.pid
        assert "torch" in info and "device" not in info
        assert "OPENAI_API_KEY" in worker.stripped
        assert worker.ready() is info  # the handshake happens once
        assert psutil.Process(worker.proc.pid).cwd() == str(worker.dir)
        assert "OPENAI_API_KEY" not in psutil.Process(worker.proc.pid).environ()
        assert os.getpgid(worker.proc.pid) == worker.proc.pid  # its own process group
    finally:
        worker.kill()
    assert worker.proc.poll() is not None
    assert not worker.dir.exists()


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_request_the_worker_never_answers_times_out_and_kill_takes_the_group(start, request, tmp_path):
    """Spawned, or forked from the fork server, a worker times out on a request it never answers, and its kill takes
    its whole group: the candidate's child too."""
    server = request.getfixturevalue("fork_server") if start == "fork" else None
    pid_file = tmp_path / "child.pid"
    worker = WorkerProcess({**CPU_WORKER_ENV, "KC_TEST_PID_FILE": str(pid_file)}, server=server)
    try:
        assert worker.ready()["start"] == start
        load = {"op": "load", "problem_source": load_problem("level1/relu").source,
                "candidate_source": (FIXTURES / "spawn_child_and_hang.py").read_text(), "device": "cpu",
                "init_seed": 1, "sizes": {"batch_size": 37, "dim": 1000}, "build_cache": str(tmp_path / "inline"),
                "arch_list": "9.0"}
        began = time.monotonic()
        with pytest.raises(WorkerTimeout, match="no answer within 4 s"):
            worker.ask(load, 4)
        assert 3.9 <= time.monotonic() - began < 10
        child = int(pid_file.read_text())
        assert psutil.pid_exists(child)
        assert os.getpgid(child) == worker.proc.pid  # the candidate's child is in the worker's group
    finally:
        worker.kill()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the candidate's child process {child} outlived the worker's kill")


def test_a_worker_that_dies_mid_request():
    worker = WorkerProcess({"CUDA_VISIBLE_DEVICES": ""})
    try:
        worker.ready()
        os.kill(worker.proc.pid, 9)
        with pytest.raises(WorkerDied, match="killed by SIGKILL") as info:
            worker.ask({"op": "exit"}, 5)
        assert info.value.exitcode == -9
    finally:
        worker.kill()


# A candidate that starts a child in a session of its own (out of the worker's process group) and leaves it running.
SESSION_CHILD = '''import os, time
child = os.fork()
if child == 0:
    os.setsid()
    with open(os.environ["KC_TEST_PID_FILE"] + ".new", "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.environ["KC_TEST_PID_FILE"] + ".new", os.environ["KC_TEST_PID_FILE"])
    while True:
        time.sleep(0.01)
while not os.path.exists(os.environ["KC_TEST_PID_FILE"]):
    time.sleep(0.01)
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
'''

# One that orphans a grandchild in a session of its own: the child exits, so the grandchild leaves the worker's tree.
ORPHAN = '''import os, time
first = os.fork()
if first == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        with open(os.environ["KC_TEST_PID_FILE"] + ".new", "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.environ["KC_TEST_PID_FILE"] + ".new", os.environ["KC_TEST_PID_FILE"])
        time.sleep(60)
    os._exit(0)
os.waitpid(first, 0)
while not os.path.exists(os.environ["KC_TEST_PID_FILE"]):
    time.sleep(0.01)
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
'''


def _load(source: str, tmp_path: Path) -> dict:
    return {"op": "load", "problem_source": load_problem("level1/relu").source, "candidate_source": source,
            "device": "cpu", "init_seed": 1, "sizes": {"batch_size": 37, "dim": 1000},
            "build_cache": str(tmp_path / "inline"), "arch_list": "9.0"}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_child_in_a_session_of_its_own_is_frozen_and_killed_with_the_worker(start, request, tmp_path):
    """Frozen between requests and killed by the tree, not only the group: a candidate's child that left the group
    (setsid) runs no more than one in it."""
    server = request.getfixturevalue("fork_server") if start == "fork" else None
    pid_file = tmp_path / "child.pid"
    worker = WorkerProcess({**CPU_WORKER_ENV, "KC_TEST_PID_FILE": str(pid_file)}, server=server)
    try:
        worker.ready()
        worker.freeze_between = True
        assert worker.ask(_load(SESSION_CHILD, tmp_path), 60).get("ok"), worker.log_tail()
        child = int(pid_file.read_text())
        assert os.getpgid(child) != worker.proc.pid  # out of the worker's group
        deadline = time.monotonic() + 5
        while psutil.Process(child).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.02)
        assert psutil.Process(child).status() == psutil.STATUS_STOPPED  # frozen with the worker
    finally:
        worker.kill()
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(child)


def test_a_process_orphaned_out_of_a_forked_workers_tree_is_found_and_killed(fork_server, tmp_path):
    """The fork server takes in the orphan (a subreaper); the supervisor finds it at the request's end, kills it
    and the worker, and the candidate is rejected for it (`process_escaped`)."""
    pid_file = tmp_path / "grandchild.pid"
    worker = WorkerProcess({**CPU_WORKER_ENV, "KC_TEST_PID_FILE": str(pid_file)}, server=fork_server)
    try:
        worker.ready()
        worker.freeze_between = True
        with pytest.raises(WorkerLimit, match="left the worker's process tree") as info:
            worker.ask(_load(ORPHAN, tmp_path), 60)
        assert (info.value.reason, info.value.status) == ("process_escaped", "rejected")
        grandchild = int(pid_file.read_text())
    finally:
        worker.kill()
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(grandchild)
    assert fork_server.escaped() == []  # nothing left over for the next candidate's worker
