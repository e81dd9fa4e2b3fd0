"""session.py: a job's store, proposer and verifier, owned together and closed together (a real SQLite store, a
real model client, the real verifier)."""

from __future__ import annotations

import sqlite3

import pytest

from kernelcraft.assemble import SearchSettings
from kernelcraft.errors import ConfigError
from kernelcraft.session import Session
from kernelcraft.spec import ProposerSpec, RunConfig, RunSpec, VerifySpec
from kernelcraft.store import Store

MODEL = ProposerSpec(model="local/kernel-writer", base_url="http://127.0.0.1:9/v1", timeout_s=5.0, max_retries=0)


def test_a_session_closes_the_store_it_opened_and_leaves_one_it_was_lent(tmp_path):
    lent = Store(tmp_path / "lent.db")
    try:
        with Session(lent) as session:
            assert session.store is lent
        assert lent.runs() == []  # still open
    finally:
        lent.close()
    with Session(tmp_path / "own.db") as own:
        assert own.store.runs() == []
    with pytest.raises(sqlite3.ProgrammingError):
        own.store.runs()
    own.close()  # once is enough: a second close does nothing


def test_a_session_that_cannot_be_built_leaves_nothing_open(tmp_path):
    """The proposer is built, then the verifier fails (a device no machine has): the model client and the store
    the session opened are both closed, and the error is the verifier's."""
    session = Session(tmp_path / "runs.db")
    spec = RunSpec(RunConfig(), VerifySpec(device="tpu"), MODEL)
    with pytest.raises(ValueError, match="--device tpu"):
        with session.building():
            proposer = session.build_proposer(spec, SearchSettings(), "cpu")
            assert not proposer.client.sdk.is_closed()
            session.build_verifier(spec, SearchSettings())
    assert proposer.client.sdk.is_closed()
    with pytest.raises(sqlite3.ProgrammingError):
        session.store.runs()
    with pytest.raises(RuntimeError, match="not built"):
        session.verifier  # noqa: B018


def test_a_run_started_without_its_settings_cannot_be_rebuilt_from_them(tmp_path):
    with Session(tmp_path / "runs.db") as session:
        with pytest.raises(ConfigError, match="started from Python without its verifier's and proposer's settings"):
            session.build(RunSpec(RunConfig()), SearchSettings(), "cpu")


def test_a_built_session_judges_and_closes_its_verifier(tmp_path):
    spec = RunSpec(RunConfig(backend="triton"), VerifySpec(device="cpu", size="small", small=True,
                                                          compile_baseline=False, timing_budget=0.2),
                   ProposerSpec())
    with Session(tmp_path / "runs.db") as session:
        session.build(spec, SearchSettings(cache_dir=tmp_path / "cache"), "cpu")
        verifier = session.verifier
        assert session.proposer.name == "builtin" and verifier.devices == ["cpu"]
        assert verifier.config.policy == "strict" and not verifier.config.compile_baseline
    with pytest.raises(RuntimeError, match="not built"):
        session.proposer  # noqa: B018
