"""The terminal's tables: what a cell holds."""

from __future__ import annotations

from rich.console import Console

from kernelcraft.report.terminal import IDEA_CHARS, _idea, candidates_view


def test_ideas_that_share_their_first_words_read_apart_in_the_candidates_table():
    """Three ideas the engineer wrote with the same first 70 characters read as one idea when cut there."""
    head = "Tile the reduction over 4096-element blocks with one program per row and "
    ideas = [head + tail for tail in ("vectorized loads", "a two-pass max", "a persistent grid")]
    rows = [{"key": f"r01/i0{i}", "round": 1, "status": "ok", "runtime_ms": 1.0, "speedup_eager": 1.1, "idea": idea}
            for i, idea in enumerate(ideas)]
    console = Console(width=300, record=True)
    console.print(candidates_view(rows))
    text = console.export_text()
    assert all(tail in text for tail in ("vectorized loads", "a two-pass max", "a persistent grid"))
    long = "word " * 100
    assert len(_idea(long)) <= IDEA_CHARS + 2 and _idea(long).endswith("word …") and _idea(None) == ""


def test_a_verdicts_header_says_the_sizes_it_was_judged_at():
    """`eval`'s header said [cpu, policy strict] where the README says it shows the sizes."""
    from kernelcraft.result import Result

    r = Result("level1/relu", "relu", "triton", status="ok", correct=True, device="cpu", trials=6,
               sizes={"source": "derived", "constants": {"batch_size": 16}, "full": {"batch_size": 4096}})
    console = Console(width=200, record=True)
    from kernelcraft.report.terminal import result_view
    console.print(result_view(r))
    assert "[cpu, policy strict, derived sizes batch_size=16 (full: 4096)]" in console.export_text()
    r.sizes = {}
    console = Console(width=200, record=True)
    console.print(result_view(r))
    assert "[cpu, policy strict]" in console.export_text()  # a record from before
