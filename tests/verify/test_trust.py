"""Trusted caches (verify/trust.py): the key, sealed entries, and each cache refusing what does not authenticate."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import threading

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems.sizes import Sizes
from kernelcraft.result import Result, Status, Timing
from kernelcraft.rl.cache import VerdictCache
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildOutcome, BuildPool, build_key
from kernelcraft.verify.trust import Trust, load_key, trusted_dir


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, iqr_ms=0.1, cv=0.01, samples=20, min_ms=ms * 0.9, method="cpu_perf_counter")


@pytest.fixture
def keys(tmp_path):
    return tmp_path / "keys"


def test_the_key_is_made_once_private_and_whole(keys):
    found: list[bytes] = []
    threads = [threading.Thread(target=lambda: found.append(load_key(keys))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 1 and len(found[0]) == 32  # one key, whoever made it first
    mode = (keys / "key").stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    assert [p.name for p in keys.iterdir()] == ["key"]  # no half-written private name left behind


def test_a_sealed_entry_opens_and_any_change_is_refused_and_counted(tmp_path, keys):
    trust = Trust(tmp_path / "t", shared=True, key_directory=keys)
    sealed = trust.seal_json("baseline", "k", {"eager": 1.0})
    assert Trust(tmp_path / "t", shared=True, key_directory=keys).open_json("baseline", "k", sealed) == {"eager": 1.0}
    for kind, name, record in [("baseline", "k", {**sealed, "entry": {"eager": 4.0}}),  # altered
                               ("baseline", "other", sealed),  # moved to another key
                               ("verdict", "k", sealed),  # passed off as another cache's
                               ("baseline", "k", {"entry": {"eager": 1.0}}),  # no MAC: an older file
                               ("baseline", "k", {"eager": 1.0})]:  # not even a sealed record
        assert trust.open_json(kind, name, record) is None
    assert trust.refusals() == 5 and trust.rejected["baseline"] == 4


def test_another_key_opens_nothing_and_rotating_retires_every_seal(tmp_path, keys):
    trust = Trust(tmp_path / "t", shared=True, key_directory=keys)
    sealed = trust.seal_json("baseline", "k", 1)
    elsewhere = Trust(tmp_path / "t", shared=True, key_directory=tmp_path / "elsewhere")
    assert elsewhere.open_json("baseline", "k", sealed) is None
    trust.rotate()
    assert trust.open_json("baseline", "k", sealed) is None
    again = Trust(tmp_path / "t", shared=True, key_directory=keys)  # the new key, on disk
    assert again.open_json("baseline", "k", trust.seal_json("baseline", "k", 1)) == 1


def test_without_a_hiding_place_only_this_processs_entries_are_trusted(tmp_path, keys):
    load_key(keys)
    trust = Trust(tmp_path / "t", shared=False, key_directory=keys)
    assert not (keys / "key").exists()  # a key candidates could read is no proof: deleted
    assert "only entries this process wrote are trusted" in trust.note
    mine = trust.seal_json("baseline", "k", 1)
    assert Trust(tmp_path / "t", shared=False, key_directory=keys).open_json("baseline", "k", mine) == 1
    code = ("import json, sys; from kernelcraft.verify.trust import Trust; "
            f"print(json.dumps(Trust({str(tmp_path / 'u')!r}, shared=False, key_directory={str(keys)!r})"
            ".seal_json('baseline', 'k', 1)))")
    theirs = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout)
    assert trust.open_json("baseline", "k", theirs) is None


def test_a_forged_or_unsealed_baseline_is_ignored_and_said(tmp_path, keys):
    store = BaselineStore(tmp_path / "b.json", Trust(tmp_path, shared=True, key_directory=keys, hide=False))
    key = store.key("p", "cpu", "2.13", "strict", Sizes({}, "full"))
    store.put(key, timing(2.0), None)
    assert store.get(key)[0].median_ms == 2.0
    data = json.loads((tmp_path / "b.json").read_text())
    data[key]["entry"]["eager"]["median_ms"] = 8.0  # 4x slower, the MAC left as it was
    (tmp_path / "b.json").write_text(json.dumps(data))
    notes: list[str] = []
    assert store.get(key, notes) is None and notes[0].startswith("untrusted_cache")
    (tmp_path / "b.json").write_text(json.dumps({key: {"eager": data[key]["entry"]["eager"], "compile": None}}))
    assert store.get(key) is None  # the format before MACs: not trusted, measured again
    (tmp_path / "b.json").write_text("[1, 2]")
    assert store.get(key) is None


def test_a_planted_or_altered_verdict_is_not_returned(tmp_path, keys):
    cache = VerdictCache(tmp_path / "v.sqlite", Trust(tmp_path, shared=True, key_directory=keys, hide=False))
    good = Result("level1/relu", "c", "triton", status=Status.OK, correct=True, speedup_eager=0.8)
    cache.put("p", "c", "s", good)
    assert cache.get("p", "c", "s").speedup_eager == 0.8
    db = sqlite3.connect(tmp_path / "v.sqlite", isolation_level=None)
    forged = json.dumps({**good.to_dict(), "speedup_eager": 9.5})
    db.execute("UPDATE verdicts SET result=? WHERE candidate_sha='c'", (forged,))
    db.execute("INSERT INTO verdicts VALUES ('p', 'zeros', 's', ?, 0, NULL)", (forged,))
    db.close()
    assert cache.get("p", "c", "s") is None and cache.get("p", "zeros", "s") is None
    assert cache.untrusted == 2
    cache.close()


def test_a_verdict_file_from_before_macs_is_upgraded_and_its_rows_not_trusted(tmp_path, keys):
    db = sqlite3.connect(tmp_path / "v.sqlite", isolation_level=None)
    db.execute("CREATE TABLE verdicts (problem_sha TEXT NOT NULL, candidate_sha TEXT NOT NULL, settings TEXT NOT "
               "NULL, result TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (problem_sha, candidate_sha, settings))")
    old = Result("level1/relu", "c", "triton", status=Status.OK, correct=True).to_dict()
    db.execute("INSERT INTO verdicts VALUES ('p', 'c', 's', ?, 0)", (json.dumps(old),))
    db.close()
    cache = VerdictCache(tmp_path / "v.sqlite", Trust(tmp_path, shared=True, key_directory=keys, hide=False))
    assert cache.get("p", "c", "s") is None and cache.untrusted == 1
    cache.put("p", "c", "s", Result.from_dict(old))
    assert cache.get("p", "c", "s") is not None
    cache.close()


def test_a_build_outcome_record_that_does_not_authenticate_is_built_again(tmp_path, keys):
    pool = BuildPool(tmp_path, workers=1, trust=Trust(trusted_dir(tmp_path), shared=True, key_directory=keys))
    try:
        key = build_key("source", "9.0")
        record = trusted_dir(tmp_path) / "outcomes" / f"{key}.json"
        record.parent.mkdir(parents=True)
        record.write_text(json.dumps({"ok": False, "seconds": 1.0, "log": "error: forged"}))  # unsealed
        assert pool._recorded(record, key) is None
        genuine = pool.trust.seal_json("build_outcome", key, {"ok": True, "seconds": 3.0, "log": ""})
        record.write_text(json.dumps(genuine))
        assert pool._recorded(record, key) == BuildOutcome(True, 3.0, "", cached=True)
        assert pool._recorded(record, build_key("other", "9.0")) is None  # another candidate's record
    finally:
        pool.close()
    assert Candidate("source").sha == build_key("source", "9.0").split("-")[0]
