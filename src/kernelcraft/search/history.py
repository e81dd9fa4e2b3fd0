"""What a proposer is told of the run so far: its target (what is timed, the baselines, the floor: stored with
the run), each idea tried with what it led to ("correct, 0.51 ms (2.8x eager), kept as kernel 1"; "both
implementations failed: rejected (syntax_error): …"), and the last round's failed kernels, one line each."""

from __future__ import annotations

from collections import Counter
from typing import Callable

from kernelcraft.propose import feedback
from kernelcraft.propose.base import Kernel, TriedIdea
from kernelcraft.search.records import Cand
from kernelcraft.target import Target

FAILURES_SHOWN = 6  # lines of a round's failures
VERDICT_CHARS = 140  # of a failed implementation's verdict in an idea's outcome


def run_target(store, run_id: str, problem, verifier, on_event) -> Target | None:
    """The run's stored target (a resumed run states the same), else measured now and stored; None if it could
    not be measured: the run goes on, its prompts without it."""
    stored = store.target(run_id)
    try:
        target = Target.from_dict(stored) if stored else verifier.target(problem)
        if not stored:
            store.set_target(run_id, target.to_dict())
        on_event("target", {"summary": target.summary()})
        return target
    except Exception as exc:  # noqa: BLE001 - a missing target costs the prompts a paragraph only
        on_event("note", {"message": f"no baselines before round 1: {exc}"})
        return None


def tried_ideas(cands: list[Cand], kept: list[Cand], shown: Callable[[list[Cand]], list[Kernel]]) -> list[TriedIdea]:
    """Every idea among `cands` (in the order first tried) and its outcome. `kept`: the kernels the next round
    builds on, fastest first (an idea's best kernel among them is named by its place); `shown`: how the run
    shows kernels (its speedups against one baseline)."""
    groups: dict[str, list[Cand]] = {}
    for c in sorted(cands, key=lambda c: (c.round, c.key)):
        if c.idea:
            groups.setdefault(c.idea.text, []).append(c)
    kernels = shown(kept)
    return [TriedIdea(text, group[0].idea.category, _outcome(group, kept, kernels, shown))
            for text, group in groups.items()]


def _outcome(cands: list[Cand], kept: list[Cand], kernels: list[Kernel], shown) -> str:
    judged = [c for c in cands if c.result or c.parse_error]
    if not judged:
        return "not judged yet"
    verdicts = Counter(feedback.brief(c.result, c.parse_error, limit=VERDICT_CHARS) for c in judged if not c.correct)
    failures = "; ".join(why + (f" (x{k})" if k > 1 else "") for why, k in verdicts.most_common(3))
    correct = [c for c in judged if c.correct]
    if not correct:
        n = len(judged)
        which = "its implementation" if n == 1 else "both implementations" if n == 2 else f"all {n} implementations"
        return f"{which} failed: {failures}"
    best = min(correct, key=lambda c: (c.duplicate, c.runtime_ms))  # the one ranked
    kernel = kernels[kept.index(best)] if best in kept else shown([best])[0]
    speed = f" ({feedback.times(kernel.speedup_eager)} eager)" if kernel.speedup_eager else ""
    text = f"correct, {kernel.runtime_ms:.4g} ms{speed}"
    text += f", kept as kernel {kept.index(best) + 1}" if best in kept else ", not kept (slower than the kernels kept)"
    return text + (f"; {sum(verdicts.values())} of {len(judged)} failed: {failures}" if verdicts else "")


def round_failures(cands: list[Cand], round_: int) -> list[str]:
    """The failed kernels of `round_` (none before round 1), one line each, the same verdict once."""
    failed = sorted((c for c in cands if c.round == round_ and round_ > 0 and not c.correct
                     and (c.result or c.parse_error)), key=lambda c: c.key)
    lines, seen = [], set()
    for c in failed:
        why = feedback.brief(c.result, c.parse_error)
        if why not in seen:
            seen.add(why)
            lines.append((f"idea \"{c.idea.text}\": " if c.idea else "") + why)
    return lines[:FAILURES_SHOWN]
