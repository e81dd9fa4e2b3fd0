"""trajectories and sft rows: one per stored step, correct only where a stored result says so."""

from __future__ import annotations

import json

import pytest

from kernelcraft.export import Filters, build_rows, resolve_runs

pytestmark = pytest.mark.slow


def rows(runs, kind, refs=None, **filters):
    store = runs.store
    out, stats = build_rows(store, resolve_runs(store, refs or [runs.bench_id, runs.tree, runs.refine]), kind,
                            Filters(**filters))
    return out, stats


def by_step(rows_):
    return {(r["run_id"], r["step_key"]): r for r in rows_}


def test_every_step_is_a_row_and_only_stored_results_say_correct(runs):
    store = runs.store
    out, stats = rows(runs, "trajectories")
    ids = [runs.bench_runs["level1/relu"], runs.bench_runs["level1/sigmoid"], runs.tree, runs.refine]
    stored = [c for i in ids for c in store.candidates(i)]
    assert len(out) == len(stored) == stats["candidates"] == 5 + 5 + 4 + 3
    for r in out:
        result = store.result(r["candidate_id"])
        if r["correct"]:
            assert result.correct and result.status == "ok" and r["runtime_ms"] == result.runtime_ms
        if result is None:
            assert not r["correct"] and r["status"] in ("malformed", "not_evaluated") and r["runtime_ms"] is None
        else:
            assert r["status"] == result.status and r["reasons"] == result.reasons
    relu = {r["step_key"]: r for r in out if r["run_id"] == runs.bench_runs["level1/relu"]}
    assert [relu[k]["status"] for k in sorted(relu)] == ["ok", "ok", "incorrect", "malformed", "rejected"]
    assert relu["s/001"]["duplicate"] and not relu["s/000"]["duplicate"]  # the same kernel, judged once
    assert relu["s/003"]["parse_error"] == "no_code_block" and relu["s/003"]["reasons"] == []
    assert relu["s/003"]["source"] == "" and not relu["s/003"]["correct"]
    # what not to do stays on record
    assert relu["s/002"]["reasons"] == ["mismatch"] and "max relative error" in relu["s/002"]["message"]
    assert relu["s/004"]["reasons"] == ["no_custom_kernel"] and "no kernel of its own" in relu["s/004"]["message"]
    assert relu["s/000"]["model"] == store.run(runs.tree).proposer and relu["s/000"]["call_kind"] == "implement"
    assert relu["s/000"]["input_tokens"] > 0 and relu["s/000"]["bench_id"] == runs.bench_id
    assert relu["s/000"]["policy"] == "strict" and relu["s/000"]["device"] == "cpu"
    assert relu["s/000"]["eager_ms"] > 0 and relu["s/000"]["speedup_eager"] > 0


def test_steps_carry_their_parent_and_idea(runs):
    out = by_step(rows(runs, "trajectories", [runs.tree, runs.refine])[0])
    tree = {k: r for (run, k), r in out.items() if run == runs.tree}
    assert sorted(tree) == ["r01/i00/m00", "r01/i01/m00", "r02/i00/m00", "r02/i01/m00"]
    assert {(r["idea"], r["category"]) for r in tree.values()} == {("Use blocks of 4096 elements", "parallelism"),
                                                                   ("Use blocks of 512 elements", "memory")}
    for i in ("i00", "i01"):
        first, second = tree[f"r01/{i}/m00"], tree[f"r02/{i}/m00"]
        assert first["parent_id"] is None and first["parent_runtime_ms"] is None and first["round"] == 1
        # round 2 built on round 1's kernels (the beam of two, one idea each), whose figures ride along
        assert second["round"] == 2 and second["parent_id"] == first["candidate_id"]
        assert second["parent_key"] == f"r01/{i}/m00" and second["parent_status"] == "ok"
        assert second["parent_runtime_ms"] == first["runtime_ms"] > 0
        assert second["parent_speedup_eager"] == first["speedup_eager"]
        assert second["duplicate"] and not first["duplicate"]  # the same kernel again: judged once
    t1, t2, t3 = (out[(runs.refine, f"c00/t0{i}")] for i in (1, 2, 3))
    assert (t1["status"], t2["status"], t3["status"]) == ("incorrect", "ok", "ok")
    assert (t1["call_kind"], t2["call_kind"], t3["call_kind"]) == ("implement", "fix", "fix")
    assert t2["input_tokens"] > t1["input_tokens"]  # the conversation grows turn by turn


def test_candidate_filters_select_what_they_say(runs):
    everything, _ = rows(runs, "trajectories")
    correct, _ = rows(runs, "trajectories", correct_only=True)
    assert correct and len(correct) < len(everything) and all(r["correct"] for r in correct)
    assert len(correct) == sum(r["correct"] for r in everything)

    failed, _ = rows(runs, "trajectories", statuses=("incorrect", "rejected"))
    assert {r["status"] for r in failed} == {"incorrect", "rejected"} and all(r["reasons"] for r in failed)
    malformed, _ = rows(runs, "trajectories", statuses=("malformed",))
    assert [r["parse_error"] for r in malformed] == ["no_code_block"]

    memory, _ = rows(runs, "trajectories", categories=("memory",))
    assert [(r["step_key"], r["idea"]) for r in memory] == [("r01/i01/m00", "Use blocks of 512 elements"),
                                                           ("r02/i01/m00", "Use blocks of 512 elements")]

    speedups = sorted(r["speedup_eager"] for r in correct)
    threshold = (speedups[0] + speedups[-1]) / 2  # between the slow kernel's and the fast one's
    fast, _ = rows(runs, "trajectories", min_speedup=threshold)
    assert fast and (len(fast) < len(correct) or speedups[0] == speedups[-1])
    assert {r["candidate_id"] for r in fast} == {r["candidate_id"] for r in correct if r["speedup_eager"] >= threshold}
    # these runs timed no torch.compile baseline: nothing is faster than a baseline that was not measured
    assert rows(runs, "trajectories", min_speedup=0.0, baseline="compile")[0] == []

    model = everything[0]["model"]
    assert len(rows(runs, "trajectories", model=model.split("/", 1)[1])[0]) == len(everything)
    assert rows(runs, "trajectories", model="builtin")[0] == []


def test_sft_rows_are_the_chats_behind_correct_faster_kernels(runs):
    store = runs.store
    everything, _ = rows(runs, "trajectories")
    faster = [r for r in everything if r["correct"] and r["speedup_eager"] > 1.0]
    default, _ = rows(runs, "sft")  # on a CPU the interpreted kernels are slower than eager: then none
    assert {r["candidate_id"] for r in default} == {r["candidate_id"] for r in faster}

    out, stats = rows(runs, "sft", min_speedup=0.0)
    correct = [r for r in everything if r["correct"]]
    # the bench's second sample is the same chat as its first (same request, same answer): kept once
    assert stats["duplicates"] == 1 and len(out) == len(correct) - 1 == 7
    calls = {c.id: c for run in (runs.bench_runs["level1/relu"], runs.tree, runs.refine) for c in store.calls(run)}
    for r in out:
        cand = store.candidate_by_id(r["candidate_id"])
        call = calls[cand.call_id]
        assert store.result(cand.id).correct
        assert r["messages"][:-1] == [{"role": m["role"], "content": m["content"]} for m in call.messages]
        assert r["messages"][-1] == {"role": "assistant", "content": call.response}
        assert r["source"] in r["messages"][-1]["content"] or r["source"].strip() in r["messages"][-1]["content"]
        assert r["runtime_ms"] > 0 and r["speedup_eager"] is not None and r["problem"] == "level1/relu"
    multi = next(r for r in out if r["step_key"] == "c00/t03")
    assert [m["role"] for m in multi["messages"]] == ["system", "user", "assistant", "user", "assistant", "user",
                                                      "assistant"]
    assert "Status: incorrect" in multi["messages"][3]["content"]  # the verifier's verdict, fed back
    slow = next(r for r in out if r["idea"] == "Use blocks of 512 elements")
    assert slow["category"] == "memory" and "BLOCK = 512" in slow["messages"][-1]["content"]
    assert json.dumps(out)  # plain JSON values only


def test_builtin_engineer_rows_carry_a_rendered_prompt(runs):
    """The built-in engineer stores a one-line description per request; its sft rows get the request a model
    would be sent for the same idea and parent (and say so), while model runs keep their stored messages."""
    from kernelcraft.export.prompts import render_prompt

    store = runs.store
    out, _ = build_rows(store, resolve_runs(store, [runs.builtin, runs.tree]), "sft", Filters(min_speedup=0.0),
                        render_prompt)
    built = [r for r in out if r["model"] == "builtin"]
    assert built and all(r["prompt_origin"] == "rendered" for r in built)
    assert all(r["prompt_origin"] == "stored" for r in out if r["model"] != "builtin")
    cands = {c.id: c for c in store.candidates(runs.builtin)}
    calls = {c.id: c for c in store.calls(runs.builtin)}
    for r in built:
        cand = cands[r["candidate_id"]]
        system, user, answer = r["messages"]
        assert (system["role"], user["role"], answer["role"]) == ("system", "user", "assistant")
        assert "expert kernel engineer (there is no GPU here" in system["content"] and "Triton" in system["content"]
        assert r["idea"] and r["idea"] in user["content"]  # the idea asked for, in the prompt's words
        assert "torch.relu" in user["content"]  # the reference program
        assert answer["content"] == calls[cand.call_id].response  # the engineer's answer as stored
        if cand.parent is not None:  # round 2: the parent kernel and its verdict are shown
            parent = cands[cand.parent]
            assert parent.source.strip()[-200:] in user["content"] and "Status: ok" in user["content"]
    assert any(cands[r["candidate_id"]].parent is not None for r in built)
    # without a renderer (the library call), the stored description stays, marked as such
    bare, _ = build_rows(store, resolve_runs(store, [runs.builtin]), "sft", Filters(min_speedup=0.0))
    assert bare and all(r["prompt_origin"] == "stored" and r["messages"][0]["content"].startswith("implement for")
                        for r in bare)
