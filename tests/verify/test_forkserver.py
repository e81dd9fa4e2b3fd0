"""The fork server: workers forked with torch already imported, each set up and contained as a spawned one is, and
the verifier end to end with them."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import psutil
import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.verify import Verifier, VerifyConfig
from kernelcraft.verify.forkserver import ForkServer, ForkServerError
from kernelcraft.verify.process import WorkerDied, WorkerProcess, sandbox_paths, worker_environment
from tests.helpers import CPU_WORKER_ENV, fixture_candidate, small_config


def _sockets(pid: int) -> int:
    fds = Path(f"/proc/{pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("socket:"))


def test_the_server_preloads_torch_and_never_initialises_cuda(fork_server):
    assert fork_server.alive() and fork_server.info["ready"] is True  # it refuses to serve once CUDA is initialised
    assert {"torch", "kernelcraft.verify.worker"} <= set(fork_server.info["preloaded"])


def test_a_forked_worker_is_set_up_as_a_spawned_one(fork_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    worker = WorkerProcess(CPU_WORKER_ENV, server=fork_server, limits=None)
    try:
        info = worker.ready()
        assert info["start"] == "fork" and info["pid"] == worker.proc.pid
        assert info["start_marks_s"]["ready"] < 2.0  # no torch import of its own (a spawn takes seconds here)
        proc = psutil.Process(worker.proc.pid)
        assert proc.ppid() == fork_server.proc.pid
        assert proc.cwd() == str(worker.dir)
        env = proc.environ()  # /proc's copy: the server's environment at its exec, scrubbed as a worker's is
        assert "OPENAI_API_KEY" not in env and "OPENAI_API_KEY" in worker.stripped
        assert os.getpgid(worker.proc.pid) == worker.proc.pid  # its own session and group
        assert proc.rlimit(resource.RLIMIT_CORE)[0] == 0 and proc.rlimit(resource.RLIMIT_FSIZE)[0] == 8 << 30
        assert _sockets(worker.proc.pid) == 1  # its own channel; the server's was closed before it ran anything
        assert (worker.dir / "worker.log").exists()
        assert worker.containment_info()["network_off"] == fork_server.sandbox.network_off
    finally:
        worker.kill()
    assert worker.proc.poll() == -9  # reaped by the server, reported as Popen would
    assert not worker.dir.exists()


def test_a_forked_worker_that_dies_mid_request(fork_server):
    worker = WorkerProcess(CPU_WORKER_ENV, server=fork_server)
    try:
        worker.ready()
        os.kill(worker.proc.pid, 9)
        with pytest.raises(WorkerDied, match="killed by SIGKILL") as info:
            worker.ask({"op": "exit"}, 5)
        assert info.value.exitcode == -9
    finally:
        worker.kill()


def test_a_closed_server_refuses_and_the_supervisor_spawns_instead(tmp_path):
    server = ForkServer(worker_environment(CPU_WORKER_ENV)[0], *sandbox_paths())
    server.close()
    with pytest.raises(ForkServerError):
        WorkerProcess(CPU_WORKER_ENV, server=server)
    assert not server.dir.exists()


def test_worker_start_is_checked():
    assert VerifyConfig().worker_start == "fork"
    with pytest.raises(ValueError, match="worker_start"):
        VerifyConfig(worker_start="thread")


def test_the_verifier_with_spawned_workers(tmp_path, relu_problem):
    with Verifier("cpu", small_config(tmp_path, worker_start="spawn")) as verifier:
        result = verifier.evaluate(relu_problem, fixture_candidate("relu_triton"))
        assert verifier.supervisors[0].workers.fork_server is None
    assert result.status == "ok" and result.correct, (result.reasons, result.message)


def test_the_verifier_with_forked_workers(tmp_path, relu_problem):
    """Forked workers judge as spawned ones do: an honest kernel passes, and what a candidate does to torch in its
    own process (here: every x.contiguous() negated) is gone for the next candidate, forked from the same server."""
    honest = fixture_candidate("relu_triton")
    patched = Candidate(honest.source.replace("import torch\n", "import torch\n\ntorch.Tensor.contiguous = "
                                              "lambda self, *a, **k: self.neg()\n", 1), "patches_torch")
    assert patched.source != honest.source
    with Verifier("cpu", small_config(tmp_path, worker_start="fork")) as verifier:
        results = [verifier.evaluate(relu_problem, c) for c in (honest, patched, honest)]
        supervisor = verifier.supervisors[0]
        assert supervisor.workers.fork_server is not None and supervisor.workers.fork_failure == ""
    first, wrong, again = results
    for result in (first, again):
        assert result.status == "ok" and result.correct, (result.reasons, result.message)
    assert wrong.status == "incorrect" and not wrong.correct, (wrong.status, wrong.reasons)


@pytest.mark.gpu
def test_forked_workers_on_a_gpu_initialise_cuda_themselves(tmp_path):
    """On a GPU each forked worker initialises CUDA after the fork (the server never does): an
    honest Triton kernel passes, a wrong one fails, and the workers said they were forked."""
    from kernelcraft.verify import TimingConfig

    config = VerifyConfig(worker_start="fork", compile_baseline=False, trials=3, cache_dir=tmp_path,
                          timing=TimingConfig(budget_s=0.5))
    problem = load_problem("level1/relu")
    with Verifier("cuda", config) as verifier:
        ok = verifier.evaluate(problem, fixture_candidate("relu_triton"))
        wrong = verifier.evaluate(problem, fixture_candidate("relu_wrong_math"))
        supervisor = verifier.supervisors[0]
        assert supervisor.workers.fork_server is not None and supervisor.workers.fork_failure == ""
    assert ok.status == "ok" and ok.correct and ok.device != "cpu", (ok.reasons, ok.message)
    assert wrong.status == "incorrect"


@pytest.mark.parametrize("gone", ["channel_closed", "sigterm", "closed"])
def test_a_frozen_worker_is_killed_when_its_server_ends(gone):
    """A worker is frozen (SIGSTOP) between requests, in a session of its own. One left so outlived its server for
    good, holding its memory: after a killed test run, and after whole suite runs (orphans in state T). The server
    kills every worker it forked when it ends: its supervisor gone (its channel closed without a word), told to stop
    (SIGTERM), or closed with the worker still there."""
    import signal
    import time

    server = ForkServer(worker_environment(CPU_WORKER_ENV)[0], *sandbox_paths())
    worker = WorkerProcess(CPU_WORKER_ENV, server=server)
    pid = worker.proc.pid

    def alive() -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
    try:
        worker.ready()
        worker.signal(signal.SIGSTOP)
        frozen_by = time.monotonic() + 5
        while time.monotonic() < frozen_by and psutil.Process(pid).status() != psutil.STATUS_STOPPED:
            time.sleep(0.05)
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
        if gone == "channel_closed":
            server.conn.close()
        elif gone == "sigterm":
            server.proc.send_signal(signal.SIGTERM)
        else:
            server.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and alive():
            time.sleep(0.1)
        assert not alive(), psutil.Process(pid).status()
        assert server.proc.wait(timeout=10) == 0
    finally:
        worker.kill()
        if gone != "closed":
            server.conn = None  # closed already, or its server gone
            server.close()
