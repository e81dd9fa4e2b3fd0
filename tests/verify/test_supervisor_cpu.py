"""The supervisor's CPU-specific behaviour: how its workers are started, what it decides before they run."""

from __future__ import annotations

import pytest

from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.supervisor import Supervisor
from tests.helpers import small_config


def _supervisor(tmp_path, **overrides) -> Supervisor:
    config = small_config(tmp_path / "cache", **overrides)
    return Supervisor("cpu", config, BaselineStore(tmp_path / "baselines.json"))


def test_cpu_workers_time_on_one_intra_op_thread(tmp_path, monkeypatch):
    # A thread pool on a shared machine made CPU timings noise; candidate and baseline workers alike
    # come from _spawn, so both are pinned.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sup = _supervisor(tmp_path)
    worker = sup._spawn()
    try:
        assert worker.ready()["threads"] == 1
    finally:
        worker.kill()


def test_cpu_threads_none_leaves_torch_its_default(tmp_path, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sup = _supervisor(tmp_path, cpu_threads=None)
    assert "OMP_NUM_THREADS" not in sup.worker_env
    assert _supervisor(tmp_path, cpu_threads=2).worker_env["OMP_NUM_THREADS"] == "2"
