"""Verdicts kept by (problem source hash, candidate source hash, verifier settings): a trainer samples the same
kernel many times (a group of rollouts, a policy that has converged), and judging it again would only spend the
GPU. A SQLite file under the cache dir, so verdicts outlive the process and several reward workers share them
(WAL: readers do not wait for a writer). What is kept is the verifier's Result itself (`to_dict`), read back
with `Result.from_dict`: a cached verdict is the stored Result, never a summary of it.

The file lives in the cache dir's trusted directory (verify/trust.py: hidden from every candidate), and each row is
sealed with an HMAC over its key and its Result: a row that does not authenticate (planted, altered, or from a file
without MACs) is not returned, so the kernel is judged again, and it is counted (`untrusted`)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

from kernelcraft.result import Result, Status
from kernelcraft.verify.trust import Trust

FILE = "rl_verdicts.sqlite"
SCHEMA = 1
# A harness fault says nothing about the kernel: it is not kept, so the next sample of it is judged afresh.
NOT_KEPT = (Status.VERIFIER_ERROR,)


class VerdictCache:
    def __init__(self, path: str | Path, trust: Trust | None = None):
        """`trust`: what seals the rows (default: a Trust over the file's own directory, which is not hidden from
        candidates: the scorer passes its trusted directory's)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.trust = trust or Trust(self.path.parent, hide=False)
        self.untrusted = 0  # rows found that did not authenticate
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        self._db.execute("""CREATE TABLE IF NOT EXISTS verdicts (
            problem_sha TEXT NOT NULL, candidate_sha TEXT NOT NULL, settings TEXT NOT NULL,
            result TEXT NOT NULL, created REAL NOT NULL, mac TEXT,
            PRIMARY KEY (problem_sha, candidate_sha, settings))""")
        if "mac" not in {row[1] for row in self._db.execute("PRAGMA table_info(verdicts)")}:  # a file from before MACs
            self._db.execute("ALTER TABLE verdicts ADD COLUMN mac TEXT")

    @staticmethod
    def _name(problem_sha: str, candidate_sha: str, settings: str) -> str:
        return "\0".join((problem_sha, candidate_sha, settings))

    def get(self, problem_sha: str, candidate_sha: str, settings: str) -> Result | None:
        with self._lock:
            row = self._db.execute("SELECT result, mac FROM verdicts WHERE problem_sha=? AND candidate_sha=? AND "
                                   "settings=?", (problem_sha, candidate_sha, settings)).fetchone()
        if row is None:
            return None
        if not isinstance(row[0], str) or not self.trust.opens("verdict", self._name(problem_sha, candidate_sha,
                                                                                     settings), row[0], row[1]):
            with self._lock:
                self.untrusted += 1
            return None
        try:
            return Result.from_dict(json.loads(row[0]))
        except (ValueError, TypeError):  # written by a newer kernelcraft with a status this one does not know
            return None

    def put(self, problem_sha: str, candidate_sha: str, settings: str, result: Result) -> bool:
        """Keep a verdict; False when it is not one to keep (a harness fault)."""
        if result.status in NOT_KEPT:
            return False
        text = json.dumps(result.to_dict())
        mac = self.trust.seal("verdict", self._name(problem_sha, candidate_sha, settings), text)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO verdicts (problem_sha, candidate_sha, settings, result, created, "
                             "mac) VALUES (?, ?, ?, ?, ?, ?)", (problem_sha, candidate_sha, settings, text, time.time(),
                                                                mac))
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
