"""`kernelcraft run` and `bench` with --cluster local (two CPU verifier actors) end to end: a run, a bench spread
over both actors, a driver killed with SIGKILL and resumed, and the cluster's usage errors."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")

from kernelcraft.cli import main  # noqa: E402
from kernelcraft.store import Store  # noqa: E402
from tests.helpers import REPO  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def leave_the_cluster():
    """Each command here starts Ray for itself; one that stopped at an error may leave it up: stopped here."""
    yield
    from kernelcraft.cluster import disconnect

    disconnect()


def flags(tmp_path) -> list[str]:
    return ["--device", "cpu", "--cluster", "local", "--actors", "2", "--store", str(tmp_path / "runs.db"),
            "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-compile-baseline",
            "--timing-budget", "0.2"]


def last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_run_on_the_cluster_records_who_judged_each_candidate(tmp_path, capsys):
    assert main(["run", "level1/relu", *flags(tmp_path), "--rounds", "1", "--json"]) == 0
    summary = last_json(capsys)
    assert summary["status"] == "done" and summary["best"]["result"]["status"] == "ok"
    assert summary["device"].startswith("cpu:") and "@" in summary["device"]
    assert len(summary["devices"]) == 2 and sum(d["judged"] for d in summary["devices"]) == len(summary["candidates"])
    store = Store(tmp_path / "runs.db")
    results = store.results(summary["run_id"]).values()
    store.close()
    assert results and all(len(r.node) == 16 for r in results)


def test_a_bench_spreads_its_problems_over_the_actors(tmp_path, capsys):
    assert main(["bench", "level1", "--only", "1/relu,1/sigmoid", *flags(tmp_path), "--rounds", "1", "--ideas", "2",
                 "--json"]) == 0
    summary = last_json(capsys)
    assert [r["problem"] for r in summary["rows"]] == ["level1/relu", "level1/sigmoid"]  # in order, whoever ended first
    assert all(r["correct"] for r in summary["rows"]) and summary["metrics"]["correct"] == 2
    assert len(summary["devices"]) == 2 and all(d["judged"] for d in summary["devices"])


def test_a_driver_killed_outright_is_resumed_on_the_cluster(tmp_path, capsys):
    store = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    driver = subprocess.Popen([sys.executable, "-m", "kernelcraft", "run", "level1/relu", *flags(tmp_path),
                               "--rounds", "2", "--ideas", "2"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and _results(store) < 1:  # one candidate judged and stored
            assert driver.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        assert _results(store) >= 1
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
    s = Store(store)
    (run,) = s.runs()
    assert run.status == "running"  # killed: nothing could store it as stopped
    kept = {c.key for c in s.candidates(run.id) if s.result(c.id)}
    s.close()
    assert main(["run", "--resume", run.id, *flags(tmp_path)[2:], "--json"]) == 0
    summary = last_json(capsys)
    assert summary["status"] == "done" and summary["counters"]["replayed_results"] >= len(kept) >= 1
    s = Store(store)
    cands = s.candidates(run.id)
    assert len({c.key for c in cands}) == len(cands) and all(s.result(c.id) for c in cands)
    assert max(c.round for c in cands) == 2
    s.close()


def _results(path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet, or being written
        return 0


@pytest.mark.parametrize("argv, words", [
    (["run", "level1/relu", "--actors", "2"], "kernelcraft run: --actors: verifier actors run on a cluster; add "
                                              "--cluster local|auto|ADDRESS"),
    (["run", "level1/relu", "--cluster", "127.0.0.1:9"], "kernelcraft run: --cluster 127.0.0.1:9: nothing answers at "
                                                         "127.0.0.1:9"),
    (["run", "level1/relu", "--cluster", "local", "--device", "cuda"], "kernelcraft run: --cluster local: the cluster "
                                                                       "has no GPU for a --device cuda run"),
])
def test_cluster_usage_errors_are_one_line(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_CLUSTER", raising=False)
    if "cuda" in argv and __import__("torch").cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main([*argv, "--store", str(tmp_path / "runs.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(words) and "\n" not in err, err
