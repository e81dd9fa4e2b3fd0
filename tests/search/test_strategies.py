"""Every strategy end to end on the CPU: ideas asked, implementations parsed, verified, selected,
stored; failures of every kind counted, never fatal to a run."""

from __future__ import annotations

import json
import re
import threading

import pytest
import torch

from kernelcraft.search import Budget, RunConfig, outcome, resume_run, start_run
from kernelcraft.spec import RunSpec
from kernelcraft.verify.devicelock import DeviceLock, device_key
from tests.llm_server import Reply, Rule
from tests.search.conftest import FAST, IDEAS_PROMPT, PROSE, SLOW, WRONG, code, ideas_json

pytestmark = pytest.mark.slow


def task(idea: str) -> str:
    """A rule matching the implementation request for one idea (not the ideas shown as context)."""
    return "applies this idea: " + re.escape(idea)


def config(strategy: str, **kw) -> RunSpec:
    kw.setdefault("backend", "triton")
    return RunSpec(RunConfig(strategy=strategy, **kw))


def by_key(store, run_id) -> dict:
    return {c.key: c for c in store.candidates(run_id)}


def test_tree_asks_ideas_implements_verifies_and_keeps_the_fastest(store, relu, verifier, serve, proposer, tmp_path):
    server = serve([
        Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism"),
                                             ("Use blocks of 512 elements", "parallelism"),
                                             ("Add a bias for rounding", "precision"),
                                             ("Explain it in words", "control")))]),
        Rule(task("Use blocks of 4096"), [Reply(code(FAST))]),
        Rule(task("Use blocks of 512"), [Reply(code(SLOW))]),
        Rule(task("Add a bias"), [Reply(code(WRONG))]),
        Rule(task("Explain it"), [Reply(PROSE)]),
    ])
    out = start_run(store, relu, proposer(server), verifier, config("tree", rounds=2, ideas=4, impls=1, beam=2),
                    out_dir=tmp_path / "out")

    assert out.status == "done" and out.stop_reason is None
    cands = by_key(store, out.run_id)
    assert sorted(cands) == [f"r{r:02d}/i{i:02d}/m00" for r in (1, 2) for i in range(4)]
    statuses = {k: (c.status, c.parse_error) for k, c in cands.items()}
    assert statuses["r01/i00/m00"] == ("ok", None)
    assert statuses["r01/i01/m00"] == ("ok", None)
    assert statuses["r01/i02/m00"][0] == "incorrect"
    assert statuses["r01/i03/m00"] == (None, "no_code_block")
    # the fastest correct kernel wins, and its idea and category are on record
    assert out.best.key in ("r01/i00/m00", "r02/i00/m00")
    assert out.best.category == "parallelism" and "4096" in out.best.idea
    assert cands["r01/i00/m00"].runtime_ms < cands["r01/i01/m00"].runtime_ms
    # round 2's ideas were asked with round 1's best kernels and the verifier's feedback on them
    calls = store.calls(out.run_id)
    assert [c.key for c in calls if c.kind == "ideas"] == ["r01/ideas", "r02/ideas"]
    r2_prompt = next(c for c in calls if c.key == "r02/ideas").messages[-1]["content"]
    assert "BLOCK = 4096" in r2_prompt and "Verifier:" in r2_prompt and "Status: ok" in r2_prompt
    # a repeated kernel is judged once: four sources reached the verifier, three distinct
    assert out.counters.evaluated == 3 and out.counters.duplicates == 3
    assert out.counters.malformed == 2 and out.counters.calls == 10
    assert [t["round"] for t in out.trajectory] == [1, 2]
    text = open(out.best_file).read()
    assert text.startswith("# kernelcraft run") and "class ModelNew" in text and "BLOCK = 4096" in text


def test_sample_is_best_of_n_and_counts_malformed_answers(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(code(WRONG)), Reply(PROSE), Reply(code(FAST)),
                                                    Reply("```python\nclass ModelNew:\n    pass\nclass ModelNew:\n    pass\n```")])])
    out = start_run(store, relu, proposer(server, concurrency=1), verifier, config("sample", samples=4), out_dir=None)
    statuses = sorted(str(c.status or c.parse_error) for c in store.candidates(out.run_id))
    assert statuses == ["incorrect", "no_code_block", "ok", "two_modelnew"]
    assert out.counters.malformed == 2
    assert out.best is not None and "BLOCK = 4096" in store.candidate(out.run_id, out.best.key).source


def test_refine_feeds_the_verdict_back_turn_by_turn(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(code(WRONG))]),
                    Rule("verifier's verdict on your last answer", [Reply(code(SLOW)), Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server), verifier, config("refine", rounds=3, samples=1), out_dir=None)
    calls = store.calls(out.run_id)
    assert [c.key for c in calls] == ["c00/t01", "c00/t02", "c00/t03"]
    turn2 = calls[1].messages
    assert [m["role"] for m in turn2] == ["system", "user", "assistant", "user"]
    assert "Status: incorrect" in turn2[-1]["content"]  # the wrong kernel's verdict came back
    turn3 = calls[2].messages
    assert len(turn3) == 6 and "Status: ok" in turn3[-1]["content"] and "Runtime:" in turn3[-1]["content"]
    assert out.best.key == "c00/t03"
    assert [t["best_key"] for t in out.trajectory] == [None, "c00/t02", "c00/t03"]


def test_evolve_keeps_an_archive_by_category_and_records_stated_ideas(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a faster version of kernel 1", [Reply(code(FAST, "Bigger blocks", "parallelism"))]),
                    Rule("Write a custom kernel", [Reply(code(SLOW, "Plain blocks", "memory")),
                                                   Reply(code(WRONG, "Bias", "precision"))])])
    out = start_run(store, relu, proposer(server, concurrency=1), verifier,
                    config("evolve", rounds=2, samples=2, islands=2, seed=7), out_dir=None)
    ideas = {i.key: i.category for i in store.ideas(out.run_id)}
    assert ideas["g001/c000"] in ("memory", "precision") and set(ideas.values()) >= {"memory", "precision", "parallelism"}
    gen2 = [c for c in store.calls(out.run_id) if c.key.startswith("g002/")]
    # island 0 had the correct kernel, so its child was asked to improve it; island 1's parent
    # depends on which gen-1 child was correct there
    assert any("Write a faster version of kernel 1" in c.messages[-1]["content"] for c in gen2)
    assert out.best is not None and out.best.category in ("parallelism", "memory")


def test_anthropic_endpoint_drives_a_run(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(code(FAST), input_tokens=1000, output_tokens=200)])])
    out = start_run(store, relu, proposer(server, api="anthropic"), verifier, config("sample", samples=1), out_dir=None)
    assert out.best is not None
    assert server.requests[0]["api"] == "anthropic"
    assert out.counters.input_tokens == 1000 and out.counters.output_tokens == 200
    assert out.counters.cost == pytest.approx((1000 * 1.0 + 200 * 5.0) / 1e6)  # claude-haiku-4-5 prices


@pytest.mark.parametrize("budget, reason", [(Budget(candidates=3), "budget_candidates"),
                                            (Budget(tokens=1), "budget_tokens"),
                                            (Budget(wall_s=0.01), "budget_wall_time")])
def test_budgets_stop_a_run_cleanly(store, relu, verifier, serve, proposer, budget, reason):
    server = serve([Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism")))]),
                    Rule("Write", [Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server, concurrency=1), verifier,
                    config("tree", rounds=5, ideas=1, impls=2, budget=budget), out_dir=None)
    assert out.status == "done" and out.stop_reason == reason
    rows = store.candidates(out.run_id)
    if reason == "budget_candidates":
        assert len(rows) == 3 and all(r.status == "ok" for r in rows)
    if reason == "budget_tokens":  # the first call spends the budget: no implementation is asked
        assert [c.kind for c in store.calls(out.run_id)] == ["ideas"] and rows == []
    assert store.run(out.run_id).status == "done"


def test_the_wall_budget_withdraws_the_queued_evaluations(store, relu, verifier, serve, proposer):
    """At the deadline the evaluations still queued behind the (one) device are withdrawn: their candidates stay
    unevaluated, stored for a resume, instead of being judged past the budget. The device is held (its timing lock,
    as another process's timing would hold it) until past the deadline, so the queue is there when it comes."""
    server = serve([Rule("Write a custom kernel", [Reply(code(FAST + f"# variant {i}\n")) for i in range(8)])])
    verifier.target(relu)  # the baselines the prompts quote, measured (and kept) before the device is held
    lock = DeviceLock(device_key(torch.device("cpu")))
    held, release = threading.Event(), threading.Event()

    def hold():
        with lock.held():
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(30)
    threading.Timer(6.0, release.set).start()
    try:
        out = start_run(store, relu, proposer(server, concurrency=8), verifier,
                        config("sample", samples=8, budget=Budget(wall_s=3.0)), out_dir=None)
    finally:
        release.set()
        holder.join()
    assert out.stop_reason == "budget_wall_time"
    rows = store.candidates(out.run_id)
    assert len(rows) == 8 and out.counters.withdrawn >= 6  # one or two were with the device when the time ran out
    assert len([r for r in rows if r.status]) == out.counters.evaluated == 8 - out.counters.withdrawn
    assert out.counters.by_status.get("not_evaluated") == out.counters.withdrawn


def test_failed_calls_are_counted_and_the_run_goes_on(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(status=429, retry_after_ms=5), Reply(code(FAST)),
                                                    Reply(status=500), Reply(status=500), Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server, concurrency=1, max_retries=1), verifier,
                    config("sample", samples=3), out_dir=None)
    calls = store.calls(out.run_id)
    errors = [c.error for c in calls]
    assert sum(e is not None for e in errors) == 1 and "HTTP 500" in next(e for e in errors if e)
    assert out.counters.failed_calls == 1 and out.best is not None
    failed = next(c for c in store.candidates(out.run_id) if c.parse_error)
    assert failed.parse_error.startswith("no_answer")
    # a failed call is a failed call, not a malformed answer, live and as stored
    assert out.counters.malformed == 0 and out.counters.by_status.get("call_failed") == 1
    assert out.counters.last_error.endswith("HTTP 500: scripted error 500 (after 1 retry)")
    stored = outcome(store, out.run_id).counters
    assert stored.malformed == 0 and stored.by_status["call_failed"] == 1 and stored.failed_calls == 1
    assert stored.last_error == out.counters.last_error


def test_a_run_whose_every_call_fails_stops_instead_of_spending_its_rounds(store, relu, verifier, serve, proposer):
    server = serve([Rule(".", [Reply("upstream connect error", status=503)])])
    out = start_run(store, relu, proposer(server, max_retries=0), verifier,
                    config("tree", rounds=5, ideas=2, impls=2, concurrency=1), out_dir=None)
    # the ideas call and two implementations failed: three in a row stop the run; the rest of round 1 and
    # rounds 2-5 are never asked
    assert out.status == "stopped" and out.stop_reason == (
        "proposer_failing: openai-compatible/scripted-model: HTTP 503: upstream connect error")
    assert len(server.requests) == 3 and [c.key for c in store.calls(out.run_id)] == [
        "r01/ideas", "r01/any/m00", "r01/any/m01"]
    assert out.counters.failed_calls == 3 and out.counters.candidates == 2 and out.counters.malformed == 0
    assert out.counters.by_status == {"call_failed": 2}
    assert out.error.startswith("openai-compatible/scripted-model: HTTP 503: upstream connect error")
    assert "3 calls in a row failed" in out.error and f"--resume {out.run_id}" in out.error
    assert store.run(out.run_id).status == "stopped" and outcome(store, out.run_id).error == out.error


def test_failures_among_answers_do_not_stop_a_run(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(status=500), Reply(code(FAST)), Reply(status=500),
                                                    Reply(code(SLOW)), Reply(status=500), Reply(code(WRONG))])])
    out = start_run(store, relu, proposer(server, max_retries=0), verifier,
                    config("sample", samples=6, concurrency=1, stop_after_failures=2), out_dir=None)
    assert out.status == "done" and out.stop_reason is None and out.error is None
    assert out.counters.failed_calls == 3 and out.counters.by_status["call_failed"] == 3
    assert out.best is not None


CUT = "Here is the kernel.\n\n```python\n" + FAST[:300]  # the answer ran out of tokens inside its code block


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_answer_cut_by_the_output_limit_is_asked_again_shorter(store, relu, verifier, serve, proposer, api):
    server = serve([Rule("Write a custom kernel", [Reply(CUT, finish="length", output_tokens=512)]),
                    Rule("verifier's verdict on your last answer", [Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server, api=api, max_tokens=512), verifier,
                    config("refine", rounds=2, samples=1), out_dir=None)
    call = store.call(out.run_id, "c00/t01")
    assert call.finish == ("length" if api == "openai" else "max_tokens") and call.output_limit == 512
    assert store.candidate(out.run_id, "c00/t01").parse_error == "output_limit"
    sent = server.requests[1]["body"]["messages"][-1]["content"]  # the second turn, as it went over HTTP
    assert "Your answer hit the 512-token output limit before it ended: answer again, shorter" in sent
    assert "unterminated" not in sent
    assert out.counters.malformed == 1 and out.best.key == "c00/t02"


def test_a_cut_off_answer_with_a_whole_kernel_is_judged_with_a_note(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(code(SLOW) + "\nWhy it is fast: the loads", finish="length",
                                                         output_tokens=300)]),
                    Rule("verifier's verdict on your last answer", [Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server), verifier, config("refine", rounds=2, samples=1), out_dir=None)
    first = store.candidate(out.run_id, "c00/t01")
    assert first.parse_error is None and store.result(first.id).status == "ok"
    sent = server.requests[1]["body"]["messages"][-1]["content"]
    assert "Note: your answer hit the 300-token output limit; its kernel was complete and was judged" in sent
    assert "Status: ok" in sent


def test_a_resumed_run_replays_a_cut_off_answer_as_cut_off(store, relu, verifier, serve, proposer):
    first = serve([Rule("Write a custom kernel", [Reply(CUT, finish="length")]),
                   Rule("verifier's verdict on your last answer", [Reply("bad key", status=401)])])
    out = start_run(store, relu, proposer(first, max_tokens=512), verifier, config("refine", rounds=2, samples=1),
                    out_dir=None)
    assert out.stop_reason == "proposer_error: openai-compatible/scripted-model: HTTP 401: bad key"
    second = serve([Rule("verifier's verdict on your last answer", [Reply(code(FAST))])])
    again = resume_run(store, out.run_id, proposer(second), verifier, out_dir=None)
    assert len(second.requests) == 1 and again.counters.replayed_calls == 1  # turn 1 came from the store
    sent = second.requests[0]["body"]["messages"][-1]["content"]
    assert "Your answer hit the 512-token output limit before it ended" in sent
    assert again.status == "done" and again.best.key == "c00/t02"


def test_a_fatal_endpoint_error_stops_the_run_and_stores_no_call(store, relu, verifier, serve, proposer):
    server = serve([Rule(".", [Reply("bad key", status=401)])])
    out = start_run(store, relu, proposer(server), verifier, config("tree", rounds=3), out_dir=None)
    assert out.status == "stopped" and out.stop_reason.startswith("proposer_error")
    assert "401" in out.stop_reason
    assert store.calls(out.run_id) == [] and out.best is None


def test_seed_kernels_are_verified_first_and_seed_the_search(store, relu, verifier, serve, proposer):
    server = serve([Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism")))]),
                    Rule(task("Use blocks of 4096"), [Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server), verifier,
                    config("tree", rounds=1, ideas=1, impls=1, seeds=[SLOW]), out_dir=None)
    seed = store.candidate(out.run_id, "seed/00")
    assert seed.origin == "seed" and store.result(seed.id).status == "ok"
    ideas_prompt = store.call(out.run_id, "r01/ideas").messages[-1]["content"]
    assert "BLOCK = 512" in ideas_prompt  # the seed was shown as the kernel to beat
    assert out.best.key == "r01/i00/m00"


def test_refine_leaves_a_failed_call_out_of_the_conversation(store, relu, verifier, serve, proposer):
    server = serve([Rule("Write a custom kernel", [Reply(status=500), Reply(code(SLOW))]),
                    Rule("verifier's verdict on your last answer", [Reply(code(FAST))])])
    out = start_run(store, relu, proposer(server, concurrency=1, max_retries=0), verifier,
                    config("refine", rounds=3, samples=1), out_dir=None)
    calls = store.calls(out.run_id)
    assert [c.error is not None for c in calls] == [True, False, False]
    # turn 2 asked the first request again (no empty assistant turn); turn 3 answers turn 2's kernel
    assert [m["role"] for m in calls[1].messages] == ["system", "user"]
    assert [m["role"] for m in calls[2].messages] == ["system", "user", "assistant", "user"]
    assert all(m["content"] for c in calls for m in c.messages)


def test_no_verdict_starts_that_the_wall_budget_cannot_hold(store, relu, verifier, serve, proposer):
    """Once verdicts have a median time, the run takes no new work when less than that is left of its wall budget:
    a verdict started later would end past the budget. A verdict here takes seconds (the CPU, the Triton
    interpreter): the run ends within the budget and half a median verdict (a verdict slower than the median), not
    a whole verdict past it."""
    server = serve([Rule("Write a custom kernel", [Reply(code(SLOW + f"# variant {i}\n")) for i in range(12)])])
    verifier.target(relu)  # the baselines, measured before the run's clock starts
    out = start_run(store, relu, proposer(server, concurrency=1), verifier,
                    config("sample", samples=12, budget=Budget(wall_s=12.0)), out_dir=None)
    assert out.stop_reason == "budget_wall_time"
    started = store.run(out.run_id).created
    verdicts = [(row["evaluated"] - json.loads(row["result"])["wall_seconds"] - started, json.loads(row["result"])
                 ["wall_seconds"]) for row in store.db.execute(
        "SELECT r.evaluated, r.result FROM results r JOIN candidates c ON c.id = r.candidate_id WHERE c.run_id = ?",
        (out.run_id,))]
    assert len(verdicts) >= 2 and out.counters.evaluated < 12, verdicts  # a median to go by, and work left undone
    # each verdict started before the budget's end less the shortest verdict (the median it went by was no shorter)
    shortest = min(wall for _, wall in verdicts)
    assert max(start for start, _ in verdicts) <= 12.0 - shortest + 0.3, verdicts
