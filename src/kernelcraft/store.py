"""The run store: one SQLite file holding every run's prompts, answers, ideas, candidates and results.

The orchestrator is the one writer (WAL mode, so readers such as `kernelcraft runs list` never block
it). Everything a run does is keyed by a *step key* that the strategy derives deterministically
("r2/idea1/impl0", …): on `--resume`, a step whose key is already stored is replayed from the store,
never asked or evaluated again. Each write is its own transaction, so a `kill -9` loses at most the
step that was in flight. (Past ~400 lines for a reason: the schema, its migrations and every table's reads and
writes are one module, so that a change of the store's format is made and reviewed in one place.)
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from pathlib import Path

from kernelcraft.errors import KernelcraftError
from kernelcraft.records import (NO_ANSWER, UNEVALUATED, ApplyRecord, BenchRecord, CallRecord, CallUsage,  # noqa: F401
                                 CandidateRecord, IdeaRecord, RunRecord, unevaluated_status)
from kernelcraft.result import Result
from kernelcraft.spec import ApplySpec, RunSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    bench_id TEXT,                 -- the bench it is one problem of
    apply_id TEXT,                 -- the apply it is one region of
    problem TEXT NOT NULL,
    problem_source TEXT NOT NULL,
    strategy TEXT NOT NULL,
    proposer TEXT NOT NULL,
    device TEXT NOT NULL,
    config TEXT NOT NULL,          -- JSON: everything needed to resume the run as it was started
    status TEXT NOT NULL,          -- running | done | stopped | failed
    stop_reason TEXT,
    best_candidate INTEGER,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS targets (
    run_id TEXT PRIMARY KEY REFERENCES runs(id),
    target TEXT NOT NULL           -- JSON: verify/target.py's Target, as the run's prompts stated it
);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,
    kind TEXT NOT NULL,            -- ideas | implement | fix
    model TEXT NOT NULL,
    messages TEXT NOT NULL,        -- JSON list of {role, content}
    response TEXT,                 -- the raw answer (NULL when the call failed)
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL,                     -- USD; NULL when the model has no known price
    attempts INTEGER NOT NULL DEFAULT 1,
    started REAL NOT NULL,
    seconds REAL NOT NULL,
    finish TEXT,                   -- why the answer ended, as the provider said (stop, length, max_tokens, …)
    output_limit INTEGER,          -- tokens: the limit a cut-off answer hit (NULL when it ended on its own)
    UNIQUE (run_id, key)
);
CREATE TABLE IF NOT EXISTS ideas (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,
    round INTEGER NOT NULL,
    call_id INTEGER REFERENCES calls(id),
    parent INTEGER REFERENCES candidates(id),
    text TEXT NOT NULL,
    category TEXT NOT NULL,
    UNIQUE (run_id, key)
);
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,
    round INTEGER NOT NULL,
    call_id INTEGER REFERENCES calls(id),
    idea_id INTEGER REFERENCES ideas(id),
    parent INTEGER REFERENCES candidates(id),
    origin TEXT NOT NULL,          -- proposer | seed | malformed
    backend TEXT NOT NULL,
    source TEXT NOT NULL,
    parse_error TEXT,              -- why the answer gave no evaluable kernel (then never evaluated)
    created REAL NOT NULL,
    UNIQUE (run_id, key)
);
CREATE TABLE IF NOT EXISTS results (
    candidate_id INTEGER PRIMARY KEY REFERENCES candidates(id),
    status TEXT NOT NULL,
    correct INTEGER NOT NULL,
    runtime_ms REAL,
    speedup_eager REAL,
    speedup_compile REAL,
    result TEXT NOT NULL,          -- JSON: the verifier's whole Result
    evaluated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS benches (
    id TEXT PRIMARY KEY,
    suite TEXT NOT NULL,
    config TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_run ON candidates(run_id);
CREATE INDEX IF NOT EXISTS calls_run ON calls(run_id);
"""
# Columns added since a table was first written: a store made before them gets them (NULL) when opened.
# columns added to a table since it was first written (a store opened by an older kernelcraft keeps reading it)
ADDED_COLUMNS = {"calls": (("finish", "TEXT"), ("output_limit", "INTEGER")),
                 "runs": (("elapsed", "REAL"),)}  # seconds the run has run, over every session of it
def _typed_results(db: sqlite3.Connection) -> None:
    """Schema 2: every stored result rewritten in the shape `Result` reads and writes today, its status column
    kept in step (a harness fault stored as the candidate's `runtime_error` becomes `verifier_error`)."""
    rows = db.execute("SELECT candidate_id, result FROM results").fetchall()
    for candidate_id, text in rows:
        result = Result.from_dict(json.loads(text))
        db.execute("UPDATE results SET status = ?, correct = ?, result = ? WHERE candidate_id = ?",
                   (str(result.status), int(result.correct), json.dumps(result.to_dict()), candidate_id))


def _apply_links(db: sqlite3.Connection) -> None:
    """Schema 4: an apply's region runs link to it by `apply_id`; they carried its id as their `bench_id` before."""
    if "apply_id" not in {r[1] for r in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN apply_id TEXT")
    db.execute("UPDATE runs SET apply_id = bench_id, bench_id = NULL WHERE bench_id LIKE 'apply-%'")


# Changes to a store made by an older kernelcraft, in order: migration i brings a store from schema
# version i to i + 1 (SQLite's user_version; a store from before versions is 0), SQL or a function of the
# connection, each in one transaction with its version bump. Tables and columns are only ever added, so an
# older kernelcraft can still open a migrated store (`Result.from_dict` drops fields it does not know).
MIGRATIONS = [
    """CREATE TABLE IF NOT EXISTS profiles (
        candidate_id INTEGER PRIMARY KEY REFERENCES candidates(id),
        profile TEXT NOT NULL,     -- JSON: Nsight Compute's counters summarised (verify/profile), or {error, reason}
        created REAL NOT NULL
    );""",
    _typed_results,
    """CREATE TABLE IF NOT EXISTS applies (
        id TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        model_source TEXT NOT NULL,
        config TEXT NOT NULL,      -- JSON: everything needed to resume it as it was started
        status TEXT NOT NULL,      -- running | done | stopped | failed
        summary TEXT,              -- JSON: apply/engine.py's ApplyOutcome, as far as it got
        created REAL NOT NULL,
        updated REAL NOT NULL
    );""",
    _apply_links,
]
SCHEMA_VERSION = len(MIGRATIONS)


def default_path() -> Path:
    """The store when none is named: $KERNELCRAFT_HOME (a directory, which then holds runs.db, or the database
    file itself), else ~/.kernelcraft/runs.db."""
    home = os.environ.get("KERNELCRAFT_HOME")
    if not home:
        return Path.home() / ".kernelcraft" / "runs.db"
    path = Path(home).expanduser()
    return path / "runs.db" if path.is_dir() or home.endswith(("/", os.sep)) else path


def new_id(prefix: str = "") -> str:
    return prefix + time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class StoreError(KernelcraftError):
    """A run that does not exist, or a store file that is not ours."""


def _decode(row: sqlite3.Row | None) -> dict | None:
    """A fetched row as a dict, its JSON columns decoded."""
    if row is None:
        return None
    d = dict(row)
    for k in ("config", "messages", "summary"):
        if isinstance(d.get(k), str):
            d[k] = json.loads(d[k])
    return d


class Store:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a kernelcraft run store ({exc})") from None
        self._lock = threading.Lock()  # one connection shared by the orchestrator's threads

    def _migrate(self) -> None:
        """Bring an older store up to SCHEMA_VERSION (a newer one is read as it is: migrations only add),
        and give its tables the columns added since they were first written."""
        while self.db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            self.db.execute("BEGIN IMMEDIATE")  # another process may be migrating the same store: one at a time
            try:
                version = self.db.execute("PRAGMA user_version").fetchone()[0]
                if version >= SCHEMA_VERSION:  # done by the other process meanwhile
                    self.db.execute("COMMIT")
                    break
                step = MIGRATIONS[version]
                if callable(step):
                    step(self.db)
                else:
                    for statement in filter(str.strip, step.split(";")):
                        self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {version + 1}")
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        for table, columns in ADDED_COLUMNS.items():
            have = {r["name"] for r in self.db.execute(f"PRAGMA table_info({table})")}
            for name, kind in columns:
                if name not in have:
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")

    def close(self) -> None:
        self.db.close()

    def _write(self, sql: str, args: tuple = ()) -> int:
        with self._lock:
            cur = self.db.execute(sql, args)
            return cur.lastrowid

    def _one(self, sql: str, args: tuple = ()) -> dict | None:
        with self._lock:
            return _decode(self.db.execute(sql, args).fetchone())

    def _all(self, sql: str, args: tuple = ()) -> list[dict]:
        with self._lock:
            return [_decode(r) for r in self.db.execute(sql, args).fetchall()]

    # runs -------------------------------------------------------------------------------------------
    def create_run(self, run_id: str, problem: str, problem_source: str, proposer: str, device: str,
                   spec: RunSpec, bench_id: str | None = None, apply_id: str | None = None) -> None:
        """A new run, its `spec` stored as given (`RunRecord.spec` reads it back); `bench_id` or `apply_id`: the
        bench it is one problem of, the apply it is one region of."""
        now = time.time()
        self._write("INSERT INTO runs (id, bench_id, apply_id, problem, problem_source, strategy, proposer, device,"
                    " config, status, created, updated) VALUES (?,?,?,?,?,?,?,?,?,'running',?,?)",
                    (run_id, bench_id, apply_id, problem, problem_source, spec.run.strategy, proposer, device,
                     json.dumps(spec.to_dict()), now, now))

    def set_target(self, run_id: str, target: dict) -> None:
        self._write("INSERT OR REPLACE INTO targets (run_id, target) VALUES (?,?)", (run_id, json.dumps(target)))

    def target(self, run_id: str) -> dict | None:
        """What the run's first request said was timed, its baselines and floor (None: none was measured)."""
        row = self._one("SELECT target FROM targets WHERE run_id = ?", (run_id,))
        return json.loads(row["target"]) if row else None

    def run(self, run_id: str) -> RunRecord:
        """A run by its id or a prefix of it that names one."""
        row = self._one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is not None:
            return RunRecord.of(row)
        matches = [r for r in self._all("SELECT * FROM runs WHERE substr(id, 1, ?) = ? ORDER BY created DESC",
                                        (len(run_id), run_id))] if run_id else []
        if not matches:
            raise StoreError(f"no run {run_id!r} in {self.path}")
        if len(matches) > 1:
            raise StoreError(f"run {run_id!r} is ambiguous: {', '.join(r['id'] for r in matches[:5])}")
        return RunRecord.of(matches[0])

    def runs(self, limit: int = 50, bench_id: str | None = None, apply_id: str | None = None) -> list[RunRecord]:
        """The newest `limit` runs; or every run of a bench, or of an apply, in the order they were started."""
        if bench_id or apply_id:
            column, value = ("bench_id", bench_id) if bench_id else ("apply_id", apply_id)
            rows = self._all(f"SELECT * FROM runs WHERE {column} = ? ORDER BY created", (value,))
        else:
            rows = self._all("SELECT * FROM runs ORDER BY created DESC LIMIT ?", (limit,))
        return [RunRecord.of(r) for r in rows]

    def finish_run(self, run_id: str, status: str, stop_reason: str | None, best: int | None,
                   elapsed: float | None = None) -> None:
        """The run's end (or its stop); `elapsed`: the seconds it has run over all its sessions (a resumed run goes
        on from there), kept as it was where None."""
        self._write("UPDATE runs SET status = ?, stop_reason = ?, best_candidate = ?, updated = ?, "
                    "elapsed = COALESCE(?, elapsed) WHERE id = ?",
                    (status, stop_reason, best, time.time(), elapsed, run_id))

    def reopen_run(self, run_id: str) -> None:
        self._write("UPDATE runs SET status = 'running', stop_reason = NULL, updated = ? WHERE id = ?",
                    (time.time(), run_id))

    # benches ----------------------------------------------------------------------------------------
    def create_bench(self, bench_id: str, suite: str, spec: RunSpec, not_covered: dict[str, str],
                     too_large: dict[str, str], runs_at_once: int) -> None:
        """A new bench: its `spec` (each problem's run's), and the problems that start no run, each with why
        (`BenchRecord.skipped`)."""
        config = {**spec.to_dict(), "not_covered": not_covered, "too_large": too_large, "runs_at_once": runs_at_once}
        self._write("INSERT INTO benches (id, suite, config, created) VALUES (?,?,?,?)",
                    (bench_id, suite, json.dumps(config), time.time()))

    def bench(self, bench_id: str) -> BenchRecord | None:
        row = self._one("SELECT * FROM benches WHERE id = ?", (bench_id,))
        return BenchRecord.of(row) if row else None

    def benches(self, prefix: str = "") -> list[BenchRecord]:
        """Benches whose id starts with `prefix` (all when empty), newest first."""
        return [BenchRecord.of(r) for r in self._all("SELECT * FROM benches WHERE substr(id, 1, ?) = ? "
                                                        "ORDER BY created DESC", (len(prefix), prefix))]

    # applies (kernelcraft apply: a whole model; its regions' runs carry its id as their apply_id) ------------
    def create_apply(self, apply_id: str, model: str, model_source: str, spec: ApplySpec) -> None:
        """A new apply, its `spec` stored as given (`ApplyRecord.spec` reads it back)."""
        now = time.time()
        self._write("INSERT INTO applies (id, model, model_source, config, status, created, updated)"
                    " VALUES (?,?,?,?,'running',?,?)",
                    (apply_id, model, model_source, json.dumps(spec.to_dict()), now, now))

    def update_apply(self, apply_id: str, status: str, summary: dict | None = None) -> None:
        """Its status, and its summary where one is given (else the last one stays)."""
        self._write("UPDATE applies SET status = ?, summary = COALESCE(?, summary), updated = ? WHERE id = ?",
                    (status, json.dumps(summary) if summary is not None else None, time.time(), apply_id))

    def apply(self, apply_id: str) -> ApplyRecord:
        """An apply by its id or a prefix of it that names one."""
        matches = self._all("SELECT * FROM applies WHERE substr(id, 1, ?) = ? ORDER BY created DESC",
                            (len(apply_id), apply_id)) if apply_id else []
        exact = [m for m in matches if m["id"] == apply_id]
        if exact or len(matches) == 1:
            return ApplyRecord.of((exact or matches)[0])
        if not matches:
            raise StoreError(f"no apply {apply_id!r} in {self.path}")
        raise StoreError(f"apply {apply_id!r} is ambiguous: {', '.join(m['id'] for m in matches[:5])}")

    def applies(self, limit: int = 30) -> list[ApplyRecord]:
        return [ApplyRecord.of(r) for r in self._all("SELECT * FROM applies ORDER BY created DESC LIMIT ?",
                                                        (limit,))]

    # calls ------------------------------------------------------------------------------------------
    def call(self, run_id: str, key: str) -> CallRecord | None:
        row = self._one("SELECT * FROM calls WHERE run_id = ? AND key = ?", (run_id, key))
        return CallRecord.of(row) if row else None

    def add_call(self, run_id: str, key: str, kind: str, model: str, messages: list, response: str | None,
                 error: str | None, input_tokens: int, output_tokens: int, cost: float | None,
                 attempts: int, started: float, seconds: float, finish: str | None = None,
                 output_limit: int | None = None) -> int:
        return self._write(
            "INSERT INTO calls (run_id, key, kind, model, messages, response, error, input_tokens, output_tokens,"
            " cost, attempts, started, seconds, finish, output_limit) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, key, kind, model, json.dumps(messages), response, error, input_tokens, output_tokens,
             cost, attempts, started, seconds, finish, output_limit))

    def calls(self, run_id: str) -> list[CallRecord]:
        return [CallRecord.of(r) for r in self._all("SELECT * FROM calls WHERE run_id = ? ORDER BY id", (run_id,))]

    def usage(self, run_id: str) -> CallUsage:
        row = self._one("SELECT COUNT(*) AS calls, COALESCE(SUM(input_tokens),0) AS input_tokens,"
                        " COALESCE(SUM(output_tokens),0) AS output_tokens, SUM(cost) AS cost,"
                        " COALESCE(SUM(cost IS NULL AND error IS NULL),0) AS unpriced,"
                        " COALESCE(SUM(error IS NOT NULL),0) AS failed,"
                        " (SELECT error FROM calls WHERE run_id = ?1 AND error IS NOT NULL ORDER BY id DESC LIMIT 1)"
                        " AS last_error FROM calls WHERE run_id = ?1", (run_id,))
        return CallUsage.of(row)

    # ideas ------------------------------------------------------------------------------------------
    def idea(self, run_id: str, key: str) -> IdeaRecord | None:
        row = self._one("SELECT * FROM ideas WHERE run_id = ? AND key = ?", (run_id, key))
        return IdeaRecord.of(row) if row else None

    def add_idea(self, run_id: str, key: str, round_: int, call_id: int | None, parent: int | None,
                 text: str, category: str) -> int:
        existing = self.idea(run_id, key)
        if existing:
            return existing.id
        return self._write("INSERT INTO ideas (run_id, key, round, call_id, parent, text, category)"
                           " VALUES (?,?,?,?,?,?,?)", (run_id, key, round_, call_id, parent, text, category))

    def ideas(self, run_id: str) -> list[IdeaRecord]:
        return [IdeaRecord.of(r) for r in self._all("SELECT * FROM ideas WHERE run_id = ? ORDER BY id", (run_id,))]

    # candidates and results -------------------------------------------------------------------------
    def candidate(self, run_id: str, key: str) -> CandidateRecord | None:
        rows = self._candidates("c.run_id = ? AND c.key = ?", (run_id, key))
        return rows[0] if rows else None

    def candidate_by_id(self, candidate_id: int) -> CandidateRecord | None:
        rows = self._candidates("c.id = ?", (candidate_id,))
        return rows[0] if rows else None

    def add_candidate(self, run_id: str, key: str, round_: int, call_id: int | None, idea_id: int | None,
                      parent: int | None, origin: str, backend: str, source: str,
                      parse_error: str | None = None) -> int:
        existing = self.candidate(run_id, key)
        if existing:
            return existing.id
        return self._write(
            "INSERT INTO candidates (run_id, key, round, call_id, idea_id, parent, origin, backend, source,"
            " parse_error, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, key, round_, call_id, idea_id, parent, origin, backend, source, parse_error, time.time()))

    def result(self, candidate_id: int) -> Result | None:
        """The verifier's Result for a candidate (None: not evaluated)."""
        row = self._one("SELECT result FROM results WHERE candidate_id = ?", (candidate_id,))
        return Result.from_dict(json.loads(row["result"])) if row else None

    def results(self, run_id: str) -> dict[int, Result]:
        """candidate id -> its Result, for a run's evaluated candidates."""
        rows = self._all("SELECT r.candidate_id, r.result FROM results r JOIN candidates c ON c.id = r.candidate_id"
                         " WHERE c.run_id = ?", (run_id,))
        return {r["candidate_id"]: Result.from_dict(json.loads(r["result"])) for r in rows}

    def add_result(self, candidate_id: int, result: Result) -> None:
        # INSERT, not REPLACE: a second result for one candidate is a bug, and the key says so.
        self._write("INSERT INTO results (candidate_id, status, correct, runtime_ms, speedup_eager, speedup_compile,"
                    " result, evaluated) VALUES (?,?,?,?,?,?,?,?)",
                    (candidate_id, str(result.status), int(result.correct), result.runtime_ms,
                     result.speedup_eager, result.speedup_compile, json.dumps(result.to_dict()), time.time()))

    # hardware counters --------------------------------------------------------------------------------
    def profile(self, candidate_id: int) -> dict | None:
        row = self._one("SELECT profile FROM profiles WHERE candidate_id = ?", (candidate_id,))
        return json.loads(row["profile"]) if row else None

    def add_profile(self, candidate_id: int, profile: dict) -> None:
        self._write("INSERT OR REPLACE INTO profiles (candidate_id, profile, created) VALUES (?,?,?)",
                    (candidate_id, json.dumps(profile), time.time()))

    def profiles(self, run_id: str) -> dict[int, dict]:
        """candidate id -> its stored profile, for a run's profiled candidates."""
        rows = self._all("SELECT p.candidate_id, p.profile FROM profiles p JOIN candidates c ON c.id = p.candidate_id"
                         " WHERE c.run_id = ?", (run_id,))
        return {r["candidate_id"]: json.loads(r["profile"]) for r in rows}

    def candidates(self, run_id: str) -> list[CandidateRecord]:
        """Every candidate of a run with its result's headline figures (None where not evaluated); the
        runtime's IQR too, which rankings need (a time is faster only beyond the spread)."""
        return self._candidates("c.run_id = ?", (run_id,))

    def _candidates(self, where: str, args: tuple) -> list[CandidateRecord]:
        rows = self._all(
            "SELECT c.*, r.status, r.correct, r.runtime_ms, r.speedup_eager, r.speedup_compile,"
            " json_extract(r.result, '$.runtime.iqr_ms') AS runtime_iqr_ms,"
            " json_extract(r.result, '$.review_resolved') AS review_resolved,"
            " i.text AS idea, i.category FROM candidates c LEFT JOIN results r ON r.candidate_id = c.id"
            f" LEFT JOIN ideas i ON i.id = c.idea_id WHERE {where} ORDER BY c.id", args)
        return [CandidateRecord.of(r) for r in rows]
