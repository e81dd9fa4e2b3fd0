"""--profile in the search loop, on the CPU: a machine that cannot profile says so once and the run goes on;
a profile on record for a round's best kernel reaches the next round's prompt and the report.

The profile on record is summarised from real recorded ncu output (tests/fixtures/ncu/raw_h100.csv); it is
stored the moment its candidate is judged (from the run's own event hook), so the engine finds it in the
store at the end of the round, as it finds a profile measured earlier in a resumed run.
"""

from __future__ import annotations

import pytest

from kernelcraft.report import data as report_data
from kernelcraft.report import terminal
from kernelcraft.report.page import render
from kernelcraft.search import RunConfig, start_run
from kernelcraft.spec import RunSpec
from kernelcraft.verify.profile import ENVIRONMENT, summarize
from kernelcraft.verify.profile.ncu import parse_raw
from tests.helpers import FIXTURES
from tests.llm_server import Reply, Rule
from tests.search.conftest import FAST, IDEAS_PROMPT, SLOW, code, ideas_json

pytestmark = pytest.mark.slow

RECORDED = summarize(parse_raw((FIXTURES / "ncu" / "raw_h100.csv").read_text()), {"smem_conflict"}).to_dict()
RULES = [
    Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 512 elements", "parallelism"))),
                        Reply(ideas_json(("Use blocks of 4096 elements", "memory")))]),
    Rule("applies this idea: Use blocks of 512", [Reply(code(SLOW))]),
    Rule("applies this idea: Use blocks of 4096", [Reply(code(FAST))]),
]


def test_a_machine_that_cannot_profile_says_so_once_and_the_run_goes_on(store, relu, verifier, serve, proposer):
    events = []
    out = start_run(store, relu, proposer(serve(RULES)), verifier,
                    RunSpec(RunConfig(strategy="tree", backend="triton", rounds=2, ideas=1, impls=1, beam=1,
                                      profile=True)),
                    out_dir=None, on_event=lambda kind, data: events.append((kind, data)))
    assert out.status == "done" and out.best is not None
    off = [d for k, d in events if k == "profile_off"]
    assert len(off) == 1 and off[0]["reason"] in ENVIRONMENT  # here: no ncu, or (with one) a CPU device
    assert store.profiles(out.run_id) == {}  # nothing stored: a run resumed where it can profile will
    assert out.best.profile is None


def test_a_stored_profile_reaches_the_next_prompt_and_the_report(store, relu, verifier, serve, proposer):
    def on_event(kind, data):
        if kind == "candidate" and data["status"] == "ok":
            run_id = store.runs(1)[0].id
            store.add_profile(store.candidate(run_id, data["key"]).id, RECORDED)

    out = start_run(store, relu, proposer(serve(RULES)), verifier,
                    RunSpec(RunConfig(strategy="tree", backend="triton", rounds=2, ideas=1, impls=1, beam=1,
                                      profile=True)),
                    out_dir=None, on_event=on_event)
    assert out.status == "done"
    calls = {c.key: c for c in store.calls(out.run_id)}
    first = calls["r01/ideas"].messages[-1]["content"]
    second = calls["r02/ideas"].messages[-1]["content"]
    assert "Hardware counters" not in first  # nothing was profiled before round 1
    assert "Hardware counters (times are ncu's" in second
    assert RECORDED["summary"].splitlines()[1] in second  # "1. smem_conflict (yours) x2: … bank-conflicted …"
    # the implementation asked in round 2 shows its parent with the counters too
    assert "bank-conflicted" in calls["r02/i00/m00"].messages[-1]["content"]

    report = report_data.gather(store, out.run_id)
    assert report["best"]["profile"]["summary"] == RECORDED["summary"]
    assert all(c["profile"] == RECORDED for c in report["candidates"] if c["correct"])
    page = render(report)
    assert "Hardware counters (Nsight Compute, one call)" in page and "bank-conflicted" in page
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(terminal.report_view(report))
    shown = console.export_text()
    assert "hardware counters of the best kernel" in shown and "smem_conflict" in shown
    assert out.best.profile["summary"] == RECORDED["summary"]
