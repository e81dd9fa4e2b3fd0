"""What a run tried, as the next requests word it: outcomes per idea and the last round's failures."""

from __future__ import annotations

from dataclasses import replace

from kernelcraft.propose.base import Idea
from kernelcraft.result import Result, Status, Timing
from kernelcraft.search.history import round_failures, tried_ideas
from kernelcraft.search.records import Cand


def ok(ms: float, duplicate: bool = False) -> Result:
    return Result("p", "c", "triton", Status.OK, True, runtime=Timing(ms, 0.0, 0.0, 40, ms, "cpu_perf_counter"),
                  speedup_eager=1.0 / ms, duplicate=duplicate)


def failed(status: str, reason: str, message: str) -> Result:
    return Result("p", "c", "triton").fail(status, reason, message)


def cand(key: str, round_: int, idea: str | None, result: Result | None = None, parse_error: str | None = None) -> Cand:
    return Cand(0, key, round_, "src", "triton", idea=Idea(idea, "memory") if idea else None, result=result,
                parse_error=parse_error)


def shown(cands):
    return [c.kernel(eager_ms=1.0) for c in cands]


def test_each_idea_says_what_it_led_to_and_the_kept_kernel_by_its_place():
    a1, a2 = cand("r01/i00/m00", 1, "wide loads", ok(0.5)), cand("r01/i00/m01", 1, "wide loads", ok(0.5, duplicate=True))
    b = cand("r01/i01/m00", 1, "unroll", failed("runtime_error", "candidate_raised",
                                                 "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                                                 "ValueError: bad block"))
    c1 = cand("r01/i02/m00", 1, "tiles", ok(2.0))
    c2 = cand("r01/i02/m01", 1, "tiles", None, parse_error="no_code_block")
    out = {t.text: t.outcome for t in tried_ideas([c2, b, a2, a1, c1], [a1], shown)}
    assert list(out) == ["wide loads", "unroll", "tiles"]  # in the order first tried, whatever the input order
    assert out["wide loads"] == "correct, 0.5 ms (2.00x eager), kept as kernel 1"
    assert out["unroll"] == "its implementation failed: runtime_error (candidate_raised): ValueError: bad block"
    assert out["tiles"] == ("correct, 2 ms (0.50x eager), not kept (slower than the kernels kept); 1 of 2 failed: "
                            "no usable kernel in the answer (no code block)")
    assert tried_ideas([cand("r02/i00/m00", 2, "late")], [], shown)[0].outcome == "not judged yet"


def test_a_round_failures_are_one_line_per_verdict_and_none_before_round_one():
    same = replace(failed("compile_error", "compile_failed", ""), compile_log="x.cu(3): error: bad\nmore")
    cands = [cand(f"r01/i00/m0{i}", 1, "vectorize", same) for i in range(2)]
    cands += [cand("r02/i00/m00", 2, "other", replace(failed("incorrect", "mismatch", ""), max_rel_error=0.31)),
              cand("r01/i01/m00", 1, "fine", ok(1.0))]
    assert round_failures(cands, 1) == ['idea "vectorize": compile_error (compile_failed): x.cu(3): error: bad']
    assert round_failures(cands, 2) == ['idea "other": incorrect (mismatch): largest relative error 0.31']
    assert round_failures(cands, 0) == []
