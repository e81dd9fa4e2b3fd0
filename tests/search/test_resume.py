"""A run killed at any moment and resumed asks nothing twice, evaluates nothing twice, loses no
candidate, and ends with the answer an uninterrupted run gives on the same answers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from kernelcraft.search import RunConfig, resume_run, start_run
from kernelcraft.spec import Budget, RunSpec
from kernelcraft.store import Store
from tests.helpers import REPO
from tests.llm_server import Reply, Rule, ScriptedLLMServer
from tests.search.conftest import FAST, IDEAS_PROMPT, SLOW, WRONG, code, ideas_json

pytestmark = pytest.mark.slow


def rules() -> list[Rule]:
    # Answers depend only on the prompt, as a deterministic model's would.
    return [Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism"),
                                                  ("Use blocks of 512 elements", "memory"),
                                                  ("Add a bias", "precision")))]),
            Rule("applies this idea: Use blocks of 4096", [Reply(code(FAST))]),
            Rule("applies this idea: Use blocks of 512", [Reply(code(SLOW))]),
            Rule("applies this idea: Add a bias", [Reply(code(WRONG))])]


CONFIG = dict(strategy="tree", backend="triton", rounds=2, ideas=3, impls=1, beam=2)


def test_resume_replays_stored_steps_and_does_only_what_is_missing(tmp_path, relu, verifier, proposer):
    with ScriptedLLMServer(rules()) as server:
        store = Store(tmp_path / "runs.db")
        first = start_run(store, relu, proposer(server), verifier, RunSpec(RunConfig(**CONFIG)), out_dir=None)
        asked = len(server.requests)
        # Simulate a crash in round 2: its last call, and two results, never reached the store.
        db = sqlite3.connect(store.path)
        db.execute("DELETE FROM calls WHERE run_id = ? AND key = 'r02/i02/m00'", (first.run_id,))
        db.execute("DELETE FROM results WHERE candidate_id IN (SELECT id FROM candidates WHERE run_id = ? AND "
                   "key = 'r02/i02/m00')", (first.run_id,))
        db.execute("DELETE FROM candidates WHERE run_id = ? AND key = 'r02/i02/m00'", (first.run_id,))
        lost = [r[0] for r in db.execute("SELECT id FROM candidates WHERE run_id = ? AND key IN "
                                         "('r02/i00/m00', 'r02/i01/m00')", (first.run_id,))]
        db.execute(f"DELETE FROM results WHERE candidate_id IN ({','.join('?' * len(lost))})", lost)
        db.execute("UPDATE runs SET status = 'running', best_candidate = NULL WHERE id = ?", (first.run_id,))
        db.commit()
        db.close()

        again = resume_run(store, first.run_id, proposer(server), verifier, out_dir=None)
        assert len(server.requests) == asked + 1  # only the lost call was asked again
        assert again.counters.replayed_calls == 7 and again.counters.calls == 8
        assert again.counters.replayed_results == 3  # round 1 and nothing else came from the store
        assert again.status == "done" and again.best.key == first.best.key
        keys = [c.key for c in store.candidates(first.run_id)]
        assert sorted(keys) == sorted(f"r{r:02d}/i{i:02d}/m00" for r in (1, 2) for i in range(3))
        assert all(store.result(c.id) for c in store.candidates(first.run_id))
        store.close()


def _cli(server_url: str, store: str, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kernelcraft.cli", "run", *extra, "--model", "scripted-model", "--base-url",
            server_url + "/v1", "--device", "cpu", "--store", store, "--out", out, "--no-compile-baseline",
            "--timing-budget", "0.2", "--json"]


def _wait_until(proc, store: str, query: str, timeout: float = 300) -> None:
    """Poll the run's store until `query` (one boolean) holds, or the run ends, or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if os.path.exists(store):
            db = sqlite3.connect(store)
            try:
                if db.execute(query).fetchone()[0]:
                    return
            except sqlite3.OperationalError:  # the tables are not there yet
                pass
            finally:
                db.close()


def test_kill_9_then_resume_loses_nothing_and_repeats_nothing(tmp_path):
    env = dict(os.environ, KERNELCRAFT_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO / "src"))
    args = ["level1/relu", "--strategy", "tree", "--backend", "triton", "--rounds", "2", "--ideas", "3",
            "--impls", "1", "--cache-dir", str(tmp_path / "cache")]
    with ScriptedLLMServer(rules()) as server:
        store = str(tmp_path / "runs.db")
        proc = subprocess.Popen(_cli(server.url, store, str(tmp_path), *args), env=env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        # Kill it once some results are stored and round 2 is under way.
        _wait_until(proc, store, "SELECT (SELECT COUNT(*) FROM results) >= 2 AND "
                                 "(SELECT COUNT(*) FROM calls WHERE key LIKE 'r02/%') >= 1")
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        run_id = sqlite3.connect(store).execute("SELECT id FROM runs").fetchone()[0]
        before = len(server.requests)
        stored_calls = sqlite3.connect(store).execute("SELECT COUNT(*) FROM calls").fetchone()[0]

        resumed = subprocess.run(_cli(server.url, store, str(tmp_path), "--resume", run_id, "--cache-dir",
                                      str(tmp_path / "cache")), env=env, cwd=REPO, capture_output=True, text=True,
                                 timeout=600)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        summary = json.loads(resumed.stdout.strip().splitlines()[-1])
        # nothing stored was asked again; every planned candidate exists once, with one result
        assert len(server.requests) - before == 8 - stored_calls
        db = sqlite3.connect(store)
        keys = [r[0] for r in db.execute("SELECT key FROM candidates")]
        assert sorted(keys) == sorted(f"r{r:02d}/i{i:02d}/m00" for r in (1, 2) for i in range(3))
        assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 6
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 8
        # the answer is the fastest correct candidate over both halves of the run, as stored (which of the
        # scripted kernels is fastest is a CPU timing, so the test names none), and its file is that source
        fastest, source = db.execute("SELECT c.key, c.source FROM results r JOIN candidates c ON c.id = r.candidate_id "
                                     "WHERE r.correct = 1 ORDER BY r.runtime_ms, c.key LIMIT 1").fetchone()
        assert summary["status"] == "done" and summary["best"]["key"] == fastest
        assert source.strip() in open(summary["best_file"]).read()


def test_sigterm_stops_a_run_as_stopped_and_says_how_to_resume(tmp_path):
    env = dict(os.environ, KERNELCRAFT_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO / "src"))
    args = ["level1/relu", "--strategy", "tree", "--backend", "triton", "--rounds", "3", "--ideas", "3",
            "--impls", "1", "--cache-dir", str(tmp_path / "cache")]
    with ScriptedLLMServer(rules()) as server:
        store = str(tmp_path / "runs.db")
        proc = subprocess.Popen(_cli(server.url, store, str(tmp_path), *args), env=env, cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        _wait_until(proc, store, "SELECT COUNT(*) >= 1 FROM results")
        assert proc.poll() is None, "the run ended before it could be stopped"
        proc.send_signal(signal.SIGTERM)  # what a scheduler or `kill` sends
        _, err = proc.communicate(timeout=120)
        run_id, status, reason = sqlite3.connect(store).execute("SELECT id, status, stop_reason FROM runs").fetchone()
    assert proc.returncode == 130, err[-2000:]
    assert (status, reason) == ("stopped", "interrupted")
    assert f"kernelcraft run --resume {run_id}" in err


def test_a_resumed_run_counts_its_earlier_time_in_its_wall_time_and_its_wall_budget(tmp_path, relu, verifier,
                                                                                     proposer):
    """After --resume a run's wall time counted only the resumed part (issue: a user's 40-minute run read 3 s).
    It is stored at every end and carried on; the pause between the sessions is not counted; and a wall budget
    the earlier sessions spent leaves the resumed run none."""
    with ScriptedLLMServer(rules()) as server:
        store = Store(tmp_path / "runs.db")
        first = start_run(store, relu, proposer(server), verifier, RunSpec(RunConfig(**CONFIG)), out_dir=None)
        assert store.run(first.run_id).elapsed == pytest.approx(first.wall_seconds, abs=0.5)
        # stopped after 100 s of work (an hour ago: the pause is not the run's), the last round's results lost
        db = sqlite3.connect(store.path)
        db.execute("DELETE FROM results WHERE candidate_id IN (SELECT id FROM candidates WHERE run_id = ? AND "
                   "key LIKE 'r02/%')", (first.run_id,))
        db.execute("UPDATE runs SET status = 'stopped', best_candidate = NULL, elapsed = 100, created = created - "
                   "3600 WHERE id = ?", (first.run_id,))
        db.commit()
        db.close()
        again = resume_run(store, first.run_id, proposer(server), verifier, out_dir=None)
        assert again.status == "done" and 100 < again.wall_seconds < 100 + 120
        stored = store.run(first.run_id).elapsed
        assert stored == pytest.approx(again.wall_seconds, abs=0.5)
        from kernelcraft.report.data import run_report
        assert run_report(store, first.run_id)["run"]["wall_seconds"] == pytest.approx(stored)

        # a wall budget the earlier sessions spent: the resumed run takes no new work
        second = start_run(store, relu, proposer(server), verifier,
                           RunSpec(RunConfig(**CONFIG, budget=Budget(wall_s=600.0))), out_dir=None)
        db = sqlite3.connect(store.path)
        db.execute("DELETE FROM results WHERE candidate_id IN (SELECT id FROM candidates WHERE run_id = ?)",
                   (second.run_id,))
        db.execute("UPDATE runs SET status = 'stopped', best_candidate = NULL, elapsed = 700 WHERE id = ?",
                   (second.run_id,))
        db.commit()
        db.close()
        spent = resume_run(store, second.run_id, proposer(server), verifier, out_dir=None)
        assert spent.stop_reason == "budget_wall_time" and spent.best is None, (spent.stop_reason, spent.best)
        assert spent.counters.evaluated == 0 and spent.wall_seconds > 700
        store.close()
