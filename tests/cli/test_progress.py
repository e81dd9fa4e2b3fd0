"""The progress line on stderr: its counts, per problem in a bench, and speedups too small for two decimals."""

from __future__ import annotations

from kernelcraft.cli.progress import Progress


def test_a_bench_line_counts_each_problem_afresh_and_small_speedups_keep_their_digits(capsys):
    with Progress() as progress:  # stderr is not a terminal here: one line per round or problem
        progress.event("problem", {"index": 0, "total": 2, "problem": "level1/relu"})
        progress.event("round", {"round": 1})
        for status in ("ok", "incorrect", "ok"):
            progress.event("candidate", {"status": status, "best_speedup": 0.00055})
        progress.event("round", {"round": 2})
        progress.event("problem", {"index": 1, "total": 2, "problem": "level1/softmax"})
        progress.event("target", {"summary": "eager 1.43 ms, torch.compile 1.1 ms (full sizes)"})
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[1/2] level1/relu  round 0 · verified 0 (0 ok)")
    assert err[1].startswith("[1/2] level1/relu  round 1")
    assert err[2].startswith("[1/2] level1/relu  round 2 · verified 3 (2 ok) · best 0.00055x eager")
    second = [line for line in err if line.startswith("[2/2]")]
    assert second[0].startswith("[2/2] level1/softmax  round 0 · verified 0 (0 ok) · best none yet")
    assert "target: eager 1.43 ms, torch.compile 1.1 ms (full sizes)" in err


def test_every_stage_an_apply_emits_is_said_in_words(capsys):
    """Each stage apply/engine.py emits has its line (a stage named nowhere once ended an apply with a KeyError)."""
    import re
    from pathlib import Path

    import kernelcraft.apply.engine as engine
    from kernelcraft.cli.progress import _STAGES

    stages = re.findall(r'"apply_stage", \{"stage": "(\w+)"', Path(engine.__file__).read_text())
    assert {"capture", "profile", "baselines", "graphs", "verify"} <= set(stages) <= set(_STAGES)
    with Progress() as progress:
        progress.event("apply_stage", {"stage": "graphs"})
        progress.event("apply_verify", {"regions": [], "compiled": True, "graphs": True, "baseline": True})
        progress.event("apply_verify", {"regions": ["01_attention"], "compiled": True, "graphs": True})
    err = capsys.readouterr().err
    assert "verifying torch.compile of the model with CUDA graphs" in err
    assert "verifying the model under torch.compile with CUDA graphs with 1 regions replaced" in err


def test_rl_scorings_wait_line_says_the_lock_once(capsys):
    """The device lock's message already starts "waiting for the device": said once, not twice."""
    from kernelcraft.cli.rl import _Progress

    _Progress().event("lock_wait", {"message": "waiting for the device: another evaluation is using it"})
    assert capsys.readouterr().err.strip() == "waiting for the device: another evaluation is using it"


def test_rl_scorings_verifier_line_says_its_settings_in_words(capsys):
    from kernelcraft.cli.rl import _Progress
    from kernelcraft.rl.task import Settings

    settings = Settings(device="cpu", size="small")
    _Progress().event("verifier", {"devices": ["cpu"], "settings": settings.describe(), "key": settings.key()})
    assert capsys.readouterr().err.strip() == ("verifier on cpu (policy strict, small sizes, 6 trials, torch.compile "
                                               "timed, 6 s of timing)")
