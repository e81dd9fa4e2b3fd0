"""Runs started by the MCP server: a run that fails in its thread is stored as failed, with its error, and the
server's other work goes on."""

from __future__ import annotations

import time

import pytest

from kernelcraft.errors import ConfigError
from kernelcraft.mcp import tools
from kernelcraft.mcp.runs import Runs


def test_a_run_that_fails_in_its_thread_is_stored_as_failed(tmp_path, monkeypatch):
    import kernelcraft.search.run as search_run

    def broken_engine(*args, **kwargs):
        raise RuntimeError("the engine broke\nsecond line")

    monkeypatch.setattr(search_run, "Engine", broken_engine)
    runs = Runs(tmp_path / "runs.db", tmp_path / "cache")
    try:
        run_id = runs.start("level1/relu", device="cpu", rounds=1, sizes={"batch_size": 5}, compile_baseline=False,
                            max_candidates=3)
        deadline = time.monotonic() + 60
        while runs.active() and time.monotonic() < deadline:
            time.sleep(0.1)
        status = tools.run_status(runs.reader(), run_id, runs.live)
        assert status["status"] == "failed" and status["stop_reason"] == "server_error: RuntimeError: the engine broke"
        assert status["thread_error"] == "RuntimeError: the engine broke" and not status["thread_alive"]
        assert status["max_candidates"] == 3 and status["rounds"] == 1 and status["candidates"] == 0
        with pytest.raises(Exception, match="ended \\(failed\\) with no correct kernel"):
            tools.best_kernel(runs.reader(), run_id)
        with pytest.raises(ConfigError, match="unknown strategy"):  # bad settings: the caller's error, no run
            runs.start("level1/relu", device="cpu", strategy="beam")
        assert [r.id for r in runs.reader().runs()] == [run_id]
    finally:
        runs.shutdown()


def test_runs_still_going_at_shutdown_are_stored_as_stopped(tmp_path, monkeypatch):
    import threading

    import kernelcraft.search.run as search_run

    release = threading.Event()

    def slow_engine(*args, **kwargs):
        release.wait(60)
        raise RuntimeError("released")

    monkeypatch.setattr(search_run, "Engine", slow_engine)
    runs = Runs(tmp_path / "runs.db", tmp_path / "cache")
    run_id = runs.start("level1/relu", device="cpu", rounds=1, sizes={"batch_size": 5}, compile_baseline=False)
    assert runs.active() == [run_id]
    assert tools.run_status(runs.reader(), run_id)["status"] == "running"
    runs.shutdown()
    release.set()
    reader = Runs(tmp_path / "runs.db").reader()
    row = reader.run(run_id)
    assert (row.status, row.stop_reason) == ("stopped", "interrupted")  # `kernelcraft run --resume` goes on
