"""store.py: the SQLite run store (a real file in tmp_path)."""

from __future__ import annotations

import sqlite3
import time

import pytest

from kernelcraft.result import Result, Status, Timing
from kernelcraft.spec import ApplySettings, ApplySpec, RunConfig, RunSpec
from kernelcraft.store import SCHEMA, Store, StoreError, default_path, new_id, unevaluated_status

SPEC = RunSpec(RunConfig(strategy="beam", rounds=3, ideas=4, seed=7))
CONFIG = SPEC.to_dict()  # as stored


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "sub" / "runs.db")  # the parent folder is made
    yield s
    s.close()


def make_run(store: Store, run_id: str = "run-a", bench_id: str | None = None, problem: str = "level1/relu") -> str:
    store.create_run(run_id, problem, "import torch\n", "openai/o3", "cuda:0", SPEC, bench_id=bench_id)
    return run_id


def add_call(store, run_id, key, *, error=None, cost=0.01, tokens=(100, 50), response="answer"):
    return store.add_call(run_id, key, "implement", "o3", [{"role": "user", "content": key}], response, error,
                          tokens[0], tokens[1], cost, 1, time.time(), 1.5)


def a_result(status="ok", correct=True, runtime_ms=0.5, speedup_eager=2.0, speedup_compile=1.2) -> Result:
    runtime = Timing(runtime_ms, 0.01, 0.02, 50, runtime_ms, "cpu_perf_counter") if runtime_ms else None
    return Result("level1/relu", "c", "cuda_inline", Status(status), correct, runtime=runtime,
                  speedup_eager=speedup_eager, speedup_compile=speedup_compile,
                  kernels=[{"name": "k", "device_us": 1.5}])


def test_create_and_fetch_run(store):
    make_run(store)
    run = store.run("run-a")
    assert run.id == "run-a"
    assert run.problem == "level1/relu" and run.problem_source == "import torch\n"
    assert (run.strategy, run.proposer, run.device) == ("beam", "openai/o3", "cuda:0")
    assert run.config == CONFIG and run.spec == SPEC  # JSON decoded, and read back as given
    assert run.status == "running" and run.stop_reason is None and run.best_candidate is None
    assert run.bench_id is None
    assert run.created == run.updated and abs(run.created - time.time()) < 60


def test_fetch_by_unique_prefix(store):
    make_run(store, "20260101-120000-abcd")
    make_run(store, "20260202-120000-ef01")
    assert store.run("20260101").id == "20260101-120000-abcd"
    assert store.run("20260202-12").id == "20260202-120000-ef01"


def test_unknown_run(store):
    make_run(store)
    with pytest.raises(StoreError, match="nope"):
        store.run("nope")
    with pytest.raises(StoreError):
        store.run("run-ab")  # longer than the id: no match


def test_duplicate_run_id_is_refused(store):
    make_run(store)
    with pytest.raises(sqlite3.IntegrityError):
        make_run(store)


def test_wal_mode(store):
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_add_call_and_fetch(store):
    make_run(store)
    call_id = store.add_call("run-a", "r0/ideas", "ideas", "o3", [{"role": "system", "content": "s"},
                                                                 {"role": "user", "content": "u"}],
                             "1. [memory] tile", None, 1200, 340, 0.0051, 2, 1000.0, 12.5)
    assert isinstance(call_id, int) and call_id > 0
    call = store.call("run-a", "r0/ideas")
    assert call.id == call_id
    assert call.messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert call.response == "1. [memory] tile" and call.error is None
    assert (call.input_tokens, call.output_tokens, call.cost) == (1200, 340, 0.0051)
    assert (call.attempts, call.started, call.seconds, call.kind, call.model) == \
        (2, 1000.0, 12.5, "ideas", "o3")
    assert store.call("run-a", "r0/other") is None
    assert store.call("run-b", "r0/ideas") is None
    assert [c.key for c in store.calls("run-a")] == ["r0/ideas"]


def test_call_key_is_unique_per_run(store):
    make_run(store)
    make_run(store, "run-b")
    add_call(store, "run-a", "k")
    add_call(store, "run-b", "k")  # the same key in another run is fine
    with pytest.raises(sqlite3.IntegrityError):
        add_call(store, "run-a", "k")


def test_call_for_unknown_run_is_refused(store):
    with pytest.raises(sqlite3.IntegrityError):  # foreign keys are on
        add_call(store, "ghost", "k")


def test_add_idea_is_idempotent_by_key(store):
    make_run(store)
    call_id = add_call(store, "run-a", "r0/ideas")
    first = store.add_idea("run-a", "r0/idea0", 0, call_id, None, "tile in shared memory", "memory")
    again = store.add_idea("run-a", "r0/idea0", 5, None, None, "something else", "compute")
    other = store.add_idea("run-a", "r0/idea1", 0, call_id, None, "unroll", "control")
    assert again == first and other != first
    idea = store.idea("run-a", "r0/idea0")
    assert (idea.text, idea.category, idea.round, idea.call_id) == \
        ("tile in shared memory", "memory", 0, call_id)
    assert [i.key for i in store.ideas("run-a")] == ["r0/idea0", "r0/idea1"]


def test_add_candidate_is_idempotent_by_key(store):
    make_run(store)
    first = store.add_candidate("run-a", "r0/seed", 0, None, None, None, "seed", "cuda_inline", "src-1")
    again = store.add_candidate("run-a", "r0/seed", 1, None, None, None, "proposer", "triton", "src-2")
    assert again == first
    c = store.candidate("run-a", "r0/seed")
    assert (c.source, c.origin, c.backend, c.round, c.parse_error) == \
        ("src-1", "seed", "cuda_inline", 0, None)
    assert store.candidate_by_id(first).key == "r0/seed"
    assert store.candidate_by_id(first + 1000) is None
    assert len(store.candidates("run-a")) == 1


def test_add_result_once_per_candidate(store):
    make_run(store)
    cid = store.add_candidate("run-a", "c", 0, None, None, None, "seed", "cuda_inline", "src")
    store.add_result(cid, a_result())
    r = store.result(cid)
    assert isinstance(r, Result) and r.status is Status.OK
    assert (r.correct, r.runtime_ms, r.speedup_eager, r.speedup_compile) == (True, 0.5, 2.0, 1.2)
    assert r == a_result()  # the whole Result round-trips, typed
    row = store.candidates("run-a")[0]  # the headline columns beside it
    assert (row.status, row.correct, row.runtime_ms, row.speedup_eager) == ("ok", 1, 0.5, 2.0)
    with pytest.raises(sqlite3.IntegrityError):
        store.add_result(cid, a_result(status="incorrect", correct=False))
    assert store.result(cid).status == "ok"  # the first result stands
    assert store.result(cid + 1) is None


def test_a_stored_candidates_spread_is_its_results_by_one_rule(store):
    """The time a ranking compares, read from the store's row (CandidateRecord.spread), is the Result's
    (Result.ranked_spread): correct, timed, and not an unconfirmed speedup; else none."""
    make_run(store)
    confirmed, unconfirmed = a_result(), a_result()
    confirmed.review_resolved, unconfirmed.review_resolved = True, False
    results = [a_result(), a_result(status="incorrect", correct=False), a_result(runtime_ms=None), confirmed,
               unconfirmed]
    for i, result in enumerate(results):
        store.add_result(store.add_candidate("run-a", f"c{i}", 0, None, None, None, "seed", "triton", f"s{i}"), result)
    rows = {row.key: row for row in store.candidates("run-a")}
    assert [rows[f"c{i}"].spread for i in range(len(results))] == [r.ranked_spread() for r in results]
    assert [r.ranked_spread() is not None for r in results] == [True, False, False, True, False]
    assert rows["c0"].spread == (0.5, 0.01)

def test_candidates_join_results_and_ideas(store):
    make_run(store)
    make_run(store, "run-b")
    idea = store.add_idea("run-a", "r0/idea0", 0, None, None, "vectorize loads", "memory")
    c1 = store.add_candidate("run-a", "r0/impl0", 0, None, idea, None, "proposer", "cuda_inline", "s1")
    c2 = store.add_candidate("run-a", "r0/impl1", 0, None, None, c1, "malformed", "cuda_inline", "", "no_modelnew")
    c3 = store.add_candidate("run-a", "r1/impl0", 1, None, idea, c1, "proposer", "triton", "s3")
    store.add_candidate("run-b", "r0/impl0", 0, None, None, None, "seed", "triton", "other run")
    store.add_result(c1, a_result(runtime_ms=0.25, speedup_eager=3.0, speedup_compile=1.5))
    store.add_result(c3, a_result(status="incorrect", correct=False, runtime_ms=None, speedup_eager=None,
                                     speedup_compile=None))
    rows = store.candidates("run-a")
    assert [r.id for r in rows] == [c1, c2, c3]
    assert (rows[0].status, rows[0].correct, rows[0].runtime_ms, rows[0].speedup_eager,
            rows[0].speedup_compile, rows[0].idea, rows[0].category) == \
        ("ok", 1, 0.25, 3.0, 1.5, "vectorize loads", "memory")
    assert (rows[1].status, rows[1].correct, rows[1].idea, rows[1].parse_error, rows[1].parent) == \
        (None, None, None, "no_modelnew", c1)
    assert (rows[2].status, rows[2].correct, rows[2].speedup_eager, rows[2].idea) == \
        ("incorrect", 0, None, "vectorize loads")
    assert rows[0].source == "s1" and rows[0].run_id == "run-a"


def test_usage_sums(store):
    make_run(store)
    make_run(store, "run-b")
    add_call(store, "run-a", "a", cost=0.5, tokens=(1000, 200))
    add_call(store, "run-a", "b", cost=None, tokens=(300, 100))  # unpriced model
    add_call(store, "run-a", "c", cost=0.25, tokens=(0, 0), error="LLMError: HTTP 500", response=None)
    add_call(store, "run-b", "a", cost=9.0, tokens=(5, 5))
    usage = store.usage("run-a")
    assert usage.calls == 3
    assert (usage.input_tokens, usage.output_tokens) == (1300, 300)
    assert usage.cost == pytest.approx(0.75)
    assert usage.unpriced == 1
    assert usage.failed == 1


def test_usage_names_the_last_failed_call(store):
    make_run(store)
    add_call(store, "run-a", "a", error="m: HTTP 500: boom", response=None)
    add_call(store, "run-a", "b", error="m: HTTP 503: busy", response=None)
    add_call(store, "run-a", "c")
    assert store.usage("run-a").last_error == "m: HTTP 503: busy"


def test_a_cut_off_answer_is_stored_with_its_finish_and_limit(store):
    make_run(store)
    store.add_call("run-a", "k", "implement", "o3", [], "```python\nclass Mod", None, 10, 512, None, 1, time.time(),
                   1.0, finish="length", output_limit=512)
    call = store.call("run-a", "k")
    assert (call.finish, call.output_limit) == ("length", 512)


def test_a_store_written_before_finish_was_kept_opens_and_gains_it(tmp_path):
    path = tmp_path / "old.db"
    old_schema = "\n".join(line for line in SCHEMA.splitlines()
                            if not line.lstrip().startswith(("finish", "output_limit")))
    db = sqlite3.connect(path)
    db.executescript(old_schema)
    db.execute("INSERT INTO runs (id, problem, problem_source, strategy, proposer, device, config, status, created,"
               " updated) VALUES ('old', 'p', 's', 'tree', 'm', 'cpu', '{}', 'done', 0, 0)")
    db.execute("INSERT INTO calls (run_id, key, kind, model, messages, response, started, seconds)"
               " VALUES ('old', 'k', 'implement', 'm', '[]', 'answer', 0, 1)")
    db.commit()
    db.close()
    store = Store(path)
    call = store.call("old", "k")
    assert call.response == "answer" and call.finish is None and call.output_limit is None
    store.add_call("old", "k2", "implement", "m", [], "a", None, 1, 1, None, 1, 0.0, 1.0, finish="stop")
    assert store.call("old", "k2").finish == "stop"
    store.close()
    Store(path).close()  # opened again: nothing left to add


@pytest.mark.parametrize("parse_error, status", [(None, "not_evaluated"), ("no_code_block", "malformed"),
                                                 ("output_limit", "malformed"),
                                                 ("no_answer (m: HTTP 500: boom)", "call_failed")])
def test_the_status_of_a_candidate_without_a_result(parse_error, status):
    assert unevaluated_status(parse_error) == status


def test_usage_of_a_run_without_calls_is_zero(store):
    make_run(store)
    usage = store.usage("run-a")
    assert (usage.calls, usage.input_tokens, usage.output_tokens, usage.cost) == (0, 0, 0, None)
    assert (usage.unpriced, usage.failed) == (0, 0), f"unpriced/failed are 0, not None, with no calls: {usage}"


def test_finish_and_reopen(store):
    make_run(store)
    cid = store.add_candidate("run-a", "c", 0, None, None, None, "seed", "cuda_inline", "src")
    created = store.run("run-a").created
    time.sleep(0.01)
    store.finish_run("run-a", "stopped", "budget", cid)
    run = store.run("run-a")
    assert (run.status, run.stop_reason, run.best_candidate) == ("stopped", "budget", cid)
    assert run.updated > created
    store.reopen_run("run-a")
    run = store.run("run-a")
    assert (run.status, run.stop_reason) == ("running", None)
    assert run.best_candidate == cid  # kept: the best so far still stands on resume
    store.finish_run("run-a", "done", None, None)
    assert store.run("run-a").status == "done"


def test_runs_order_limit_and_bench_filter(store):
    for run_id, bench in [("r1", "b1"), ("r2", None), ("r3", "b1"), ("r4", "b2")]:
        make_run(store, run_id, bench_id=bench)
        time.sleep(0.01)
    assert [r.id for r in store.runs()] == ["r4", "r3", "r2", "r1"]  # newest first
    assert [r.id for r in store.runs(limit=2)] == ["r4", "r3"]
    assert [r.id for r in store.runs(bench_id="b1")] == ["r1", "r3"]  # a bench: in the order run
    assert store.runs(bench_id="b9") == []
    assert store.runs()[0].config == CONFIG


def test_bench(store):
    store.create_bench("bench-1", "level1", SPEC, {"level1/99": "no family covers it"}, {}, 3)
    bench = store.bench("bench-1")
    assert (bench.suite, bench.spec, bench.config["runs_at_once"]) == ("level1", SPEC, 3)
    assert bench.skipped("not_covered") == {"level1/99": "no family covers it"} and bench.skipped("too_large") == {}
    assert store.bench("bench-2") is None


def test_not_a_sqlite_file(tmp_path):
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not a database, just some text that is long enough " * 50)
    with pytest.raises(StoreError, match="not a kernelcraft run store"):
        Store(path)


def test_second_store_on_the_same_file_reads_the_first(tmp_path):
    path = tmp_path / "runs.db"
    writer = Store(path)
    make_run(writer)
    cid = writer.add_candidate("run-a", "c", 0, None, None, None, "seed", "cuda_inline", "src")
    reader = Store(path)
    try:
        assert reader.run("run-a").config == CONFIG
        assert reader.candidate("run-a", "c").id == cid
        writer.add_result(cid, a_result())  # written after the reader opened
        assert reader.result(cid).status is Status.OK
        assert reader.candidates("run-a")[0].speedup_eager == 2.0
    finally:
        reader.close()
        writer.close()
    again = Store(path)  # and after both closed, from disk
    try:
        assert again.result(cid) == a_result()
    finally:
        again.close()


def test_default_path_and_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELCRAFT_HOME", str(tmp_path / "kc.db"))
    assert default_path() == tmp_path / "kc.db"
    monkeypatch.setenv("KERNELCRAFT_HOME", str(tmp_path))  # a directory, as the name says: it holds runs.db
    assert default_path() == tmp_path / "runs.db"
    monkeypatch.setenv("KERNELCRAFT_HOME", str(tmp_path / "new") + "/")  # one that does not exist yet
    assert default_path() == tmp_path / "new" / "runs.db"
    a, b = new_id("bench-"), new_id()
    assert a.startswith("bench-") and a != "bench-" + b
    assert len(b.split("-")) == 3 and len(b.split("-")[2]) == 4


# hardware counters (--profile) and the migration that added their table -----------------------------------

def test_profiles_are_kept_per_candidate(store):
    run_id = make_run(store)
    a = store.add_candidate(run_id, "r01/a", 1, None, None, None, "proposer", "triton", "src a")
    b = store.add_candidate(run_id, "r01/b", 1, None, None, None, "proposer", "triton", "src b")
    other = store.add_candidate(make_run(store, "run-b"), "r01/a", 1, None, None, None, "proposer", "triton", "x")
    assert store.profile(a) is None and store.profiles(run_id) == {}
    store.add_profile(a, {"target": "candidate", "kernels": [], "summary": "one line"})
    store.add_profile(b, {"error": "profiling took longer than 300 s", "reason": "timeout"})
    store.add_profile(other, {"summary": "another run's"})
    assert store.profile(a)["summary"] == "one line"
    assert store.profiles(run_id) == {a: store.profile(a), b: {"error": "profiling took longer than 300 s",
                                                               "reason": "timeout"}}


def test_a_store_from_before_profiles_is_migrated_and_stays_readable(tmp_path):
    """A store written before the profiles table (schema version 0) opens with its runs intact, gains the
    table, and records the version; opened again, nothing is migrated twice."""
    from kernelcraft.store import SCHEMA, SCHEMA_VERSION

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)  # every table an older kernelcraft made; no profiles
    db.execute("INSERT INTO runs (id, problem, problem_source, strategy, proposer, device, config, status, created,"
               " updated) VALUES ('old-run', 'level1/relu', 'src', 'tree', 'builtin', 'cpu', '{}', 'done', 1, 2)")
    db.commit()
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert not db.execute("SELECT name FROM sqlite_master WHERE name = 'profiles'").fetchall()
    db.close()

    store = Store(path)
    assert store.run("old-run").status == "done"
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    cid = store.add_candidate("old-run", "k", 1, None, None, None, "seed", "triton", "src")
    store.add_profile(cid, {"summary": "kept"})
    store.close()
    again = Store(path)
    assert again.profile(cid) == {"summary": "kept"} and again.run("old-run").problem == "level1/relu"
    again.close()
    # what an older kernelcraft reads (its own tables) is untouched by the migration
    plain = sqlite3.connect(path)
    assert plain.execute("SELECT id, status FROM runs").fetchall() == [("old-run", "done")]
    plain.close()


# schema 2: typed results ------------------------------------------------------------------------------------

# A result as a store of schema 1 holds it (Result.to_dict() of that version: its derived *_ms keys, the search's
# `duplicate` key, no fields added since), and one from before the verifier_error status, when a fault of the
# harness was the candidate's runtime_error.
V1_OK = {"problem": "level1/relu", "candidate": "run:r01/i00/m00", "backend": "triton", "status": "ok", "correct": True,
         "reasons": [], "message": "", "device": "cpu", "policy": "strict", "trials": 3,
         "runtime": {"median_ms": 0.5, "iqr_ms": 0.01, "cv": 0.02, "samples": 40, "min_ms": 0.49,
                     "method": "cpu_perf_counter"},
         "eager": {"median_ms": 1.0, "iqr_ms": 0.02, "cv": 0.02, "samples": 40, "min_ms": 0.98,
                   "method": "cpu_perf_counter"},
         "compiled": None, "speedup_eager": 2.0, "speedup_compile": None, "runtime_ms": 0.5, "eager_ms": 1.0,
         "compile_ms": None, "notes": [], "duplicate": True}
OLD_FAULT = {"problem": "level1/relu", "candidate": "run:r01/i01/m00", "backend": "triton", "status": "runtime_error",
             "correct": False, "reasons": ["verifier_error"], "message": "BrokenPipeError: worker pipe closed"}


def test_a_store_of_schema_1_gets_typed_results_and_old_harness_faults_are_not_the_candidates(tmp_path):
    import json

    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    db.execute("CREATE TABLE profiles (candidate_id INTEGER PRIMARY KEY, profile TEXT NOT NULL, created REAL NOT NULL)")
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO runs (id, problem, problem_source, strategy, proposer, device, config, status, created,"
               " updated) VALUES ('r', 'level1/relu', 'src', 'tree', 'builtin', 'cpu', '{}', 'done', 1, 2)")
    for cid, (key, stored) in enumerate((("r01/i00/m00", V1_OK), ("r01/i01/m00", OLD_FAULT)), start=1):
        db.execute("INSERT INTO candidates (id, run_id, key, round, origin, backend, source, created)"
                   " VALUES (?, 'r', ?, 1, 'proposer', 'triton', 'src', 0)", (cid, key))
        db.execute("INSERT INTO results (candidate_id, status, correct, runtime_ms, speedup_eager, speedup_compile,"
                   " result, evaluated) VALUES (?,?,?,?,?,?,?,0)",
                   (cid, stored["status"], int(stored["correct"]), stored.get("runtime_ms"),
                    stored.get("speedup_eager"), None, json.dumps(stored)))
    db.commit()
    db.close()

    store = Store(path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 4
        ok, fault = store.result(1), store.result(2)
        assert ok.status is Status.OK and ok.duplicate and ok.runtime == Timing(**V1_OK["runtime"])
        assert (ok.runtime_ms, ok.eager_ms, ok.speedup_eager) == (0.5, 1.0, 2.0)
        assert ok.timed_checks == 0 and ok.memory == {}  # fields added since: their defaults
        assert fault.status is Status.VERIFIER_ERROR and fault.reasons == ["verifier_fault"]
        rows = {r.key: r for r in store.candidates("r")}
        assert rows["r01/i01/m00"].status == "verifier_error"  # the headline column follows
        stored = json.loads(store.db.execute("SELECT result FROM results WHERE candidate_id = 1").fetchone()[0])
        assert stored == ok.to_dict()  # rewritten in today's shape, every field present
    finally:
        store.close()


# schema 4: an apply's region runs link to it ----------------------------------------------------------------

def test_a_store_of_schema_3_links_its_applies_region_runs_by_apply_id(tmp_path):
    """Region runs stored before schema 4 carried their apply's id as their bench_id: migrated, they name it as
    their apply_id, no bench; a bench's runs keep theirs."""
    path = tmp_path / "v3.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, bench_id TEXT, problem TEXT NOT NULL, problem_source TEXT "
               "NOT NULL, strategy TEXT NOT NULL, proposer TEXT NOT NULL, device TEXT NOT NULL, config TEXT NOT NULL, "
               "status TEXT NOT NULL, stop_reason TEXT, best_candidate INTEGER, created REAL NOT NULL, updated REAL "
               "NOT NULL, elapsed REAL)")
    db.execute("PRAGMA user_version = 3")
    for run_id, bench in (("region", "apply-20261130-1"), ("bench-run", "bench-20261130-2"), ("alone", None)):
        db.execute("INSERT INTO runs (id, bench_id, problem, problem_source, strategy, proposer, device, config,"
                   " status, created, updated) VALUES (?, ?, 'p', 'src', 'tree', 'builtin', 'cpu', '{}', 'done', 1, 2)",
                   (run_id, bench))
    db.commit()
    db.close()
    store = Store(path)
    try:
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == 4
        runs = {r.id: (r.bench_id, r.apply_id) for r in store.runs()}
        assert runs == {"region": (None, "apply-20261130-1"), "bench-run": ("bench-20261130-2", None),
                        "alone": (None, None)}
        assert [r.id for r in store.runs(apply_id="apply-20261130-1")] == ["region"]
        assert [r.id for r in store.runs(bench_id="bench-20261130-2")] == ["bench-run"]
    finally:
        store.close()


def test_records_are_read_by_attribute_not_by_key(store):
    """What the store gives back is a typed record: a string-key read is an error, not a quiet dict lookup."""
    make_run(store)
    run = store.run("run-a")
    assert run.wall_seconds >= 0 and run.running and run.config == CONFIG
    assert run.spec == SPEC and run.spec.verify is None  # read back as given (no verify settings: from Python)
    with pytest.raises(TypeError, match="not subscriptable"):
        run["status"]  # noqa: B018


# schema 3: applies ------------------------------------------------------------------------------------------

def test_applies_are_stored_updated_and_found_by_prefix(tmp_path):
    """An apply (kernelcraft apply) is one row: created running, its summary and status updated as it goes, found
    by its id or a prefix naming one; an unknown or ambiguous prefix is a StoreError naming it."""
    store = Store(tmp_path / "runs.db")
    given = ApplySpec(SPEC, ApplySettings(min_share=0.05), "out")
    store.create_apply("apply-20261125-000000-aaaa", "mlp", "src", given)
    store.create_apply("apply-20261125-000000-aabb", "mlp", "src", ApplySpec(SPEC, ApplySettings(), "out"))
    assert store.apply("apply-20261125-000000-aaaa").status == "running"
    store.update_apply("apply-20261125-000000-aaaa", "done", {"speedup_eager": 1.5})
    row = store.apply("apply-20261125-000000-aaa")
    assert row.summary == {"speedup_eager": 1.5} and row.spec == given
    assert [r.id for r in store.applies()] == ["apply-20261125-000000-aabb", "apply-20261125-000000-aaaa"]
    with pytest.raises(StoreError, match="ambiguous"):
        store.apply("apply-20261125-000000-aa")
    with pytest.raises(StoreError, match="no apply 'apply-x'"):
        store.apply("apply-x")
    store.close()
