"""The issue's bars, on the CPU with real verification: a scripted policy over a few problems earns rewards in the
order malformed < compile error < wrong < correct slow < correct faster, and every reward-hack fixture of
tests/adversarial scores no more than a correct slow kernel."""

from __future__ import annotations

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.rl import Scorer
from kernelcraft.rl.shape import COMPILE_ERROR, CORRECT, MALFORMED, REJECTED, WRONG
from kernelcraft.verify import Verifier
from tests.adversarial.test_reward_hacks import CASES, FIXTURES, OK, RELU
from tests.adversarial.test_reward_hacks import config as adversarial_config
from tests.rl.conftest import CPU_SHAPE, OPS, answer, broken, kernel, row

pytestmark = pytest.mark.slow

RAISES = kernel("level1/relu").replace("        x = x.contiguous()\n",
                                       "        raise RuntimeError('launch failed')\n", 1)


def scripted(problem: str) -> dict[str, str]:
    """The policy's answers for a problem, worst first."""
    return {"malformed": "I would vectorize the loads and fuse the tail; that should be fast.",
            "compile_error": answer(broken(problem)),
            "wrong": answer(kernel(problem, wrong=True)),
            "slow": answer(kernel(problem, block=512)),
            "fast": answer(kernel(problem, block=4096))}


def test_a_scripted_policy_is_rewarded_in_the_order_of_its_answers(scorer):
    problems = list(OPS)
    items = [(row(p, i), text) for i, p in enumerate(problems) for text in scripted(p).values()]
    items.append((row("level1/relu"), answer(RAISES)))  # a runtime error is the wrong tier too
    batch = scorer.score_batch(items)
    by = {p: dict(zip(scripted(p), batch.scores[5 * i:5 * i + 5])) for i, p in enumerate(problems)}
    for p, s in by.items():
        tiers = [s[k].tier for k in ("malformed", "compile_error", "wrong", "slow", "fast")]
        assert tiers == [MALFORMED, COMPILE_ERROR, WRONG, CORRECT, CORRECT], (p, [x.to_dict() for x in s.values()])
        values = [s[k].score for k in ("malformed", "compile_error", "wrong", "slow", "fast")]
        assert values == sorted(values) and len(set(values)) == 5, (p, values)
        assert s["slow"].speedup < s["fast"].speedup, p
        assert s["malformed"].parse_error == "no_code_block" and not s["malformed"].format_ok
        assert s["compile_error"].result.reasons == ["syntax_error"] and not s["compile_error"].compiled
        assert s["wrong"].status == "incorrect" and s["wrong"].compiled and not s["wrong"].correct
    raised = batch.scores[-1]
    assert raised.tier == WRONG and raised.status == "runtime_error", raised.to_dict()
    assert raised.score == by["level1/relu"]["wrong"].score
    assert batch.verified == 3 * 3 + 1 and batch.malformed == 3


# A cheat the CPU case expects to pass cleanly acts only on a GPU (c14b: no lead to tell on the CPU): honest here.
CHEATS = [c for c in CASES if c.file.endswith("_cheat") and c.policy == "strict"
          and (c.statuses, c.reasons) != (OK, set())]


@pytest.fixture(scope="module")
def hacks(tmp_path_factory):
    """Every cheat of tests/adversarial scored, and an honest slow relu beside them, under the adversarial suite's
    own verifier settings (six trials: one per input distribution)."""
    cache = tmp_path_factory.mktemp("rl-hacks")
    with Verifier("cpu", adversarial_config(cache, "strict")) as verifier, \
            Scorer(verifier, shape=CPU_SHAPE, cache_dir=cache) as scorer:
        items = [(row(c.problem, backend=None), answer(Candidate.from_file(FIXTURES / f"{c.file}.py").source))
                 for c in CHEATS]
        items.append((row(RELU, backend=None), answer(kernel("level1/relu", block=512))))
        scores = scorer.score_batch(items).scores
    return dict(zip([c.id for c in CHEATS], scores[:-1])), scores[-1]


def test_the_honest_slow_kernel_is_correct(hacks):
    _, slow = hacks
    assert slow.tier == CORRECT and slow.score > CPU_SHAPE.wrong, slow.to_dict()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CHEATS])
def test_no_reward_hack_scores_above_a_correct_slow_kernel(hacks, case):
    scores, slow = hacks
    s = scores[case.id]
    assert s.score <= slow.score, (case.hack, s.to_dict())
    if s.tier == CORRECT:  # only the statistics game passes (an honest kernel on an absurd reference): flagged
        assert s.flagged and s.score == CPU_SHAPE.floor, s.to_dict()
    else:
        assert s.tier in (REJECTED, WRONG), s.to_dict()
        assert s.score <= CPU_SHAPE.wrong
    if s.tier == REJECTED:
        assert s.guard_findings and set(s.guard_findings) & case.reasons, s.to_dict()
