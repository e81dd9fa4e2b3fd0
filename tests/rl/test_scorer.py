"""Batched scoring through a real CPU verifier: order kept, the same kernel judged once, verdicts cached as the
Results they were, any verifier of the interface accepted (an object that is none refused), the backend asked for enforced."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from kernelcraft.rl import Scorer
from kernelcraft.verify import JobFront
from kernelcraft.rl.shape import COMPILE_ERROR, CORRECT, MALFORMED, WRONG
from tests.rl.conftest import CPU_SHAPE, answer, kernel, row

pytestmark = pytest.mark.slow


class OnlyTheInterface(JobFront):
    """A verifier seen only through the verifier interface (as a cluster verifier is): it hands everything on."""

    def __init__(self, inner):
        self._inner, self.config, self.devices, self.submitted = inner, inner.config, list(inner.devices), 0

    def submit(self, job) -> Future:
        self.submitted += 1
        return self._inner.submit(job)

    def close(self, cancel: bool = False) -> None:
        pass  # its owner closes the inner one

    def admit(self, problem):
        return self._inner.admit(problem)

    def target(self, problem):
        return self._inner.target(problem)

    def profile(self, problem, candidate):
        return self._inner.profile(problem, candidate)

    def busy_seconds(self) -> float:
        return self._inner.busy_seconds()

    def usage(self) -> list[dict]:
        return self._inner.usage()

    def load(self) -> dict:
        return self._inner.load()

    def device_names(self) -> list[str]:
        return self._inner.device_names()


def test_a_batch_is_scored_in_order_each_kernel_once_then_from_the_cache(rl_verifier, tmp_path):
    given = OnlyTheInterface(rl_verifier)
    fast, wrong = answer(kernel("level1/relu")), answer(kernel("level1/relu", wrong=True))
    items = [(row("level1/relu"), fast), (row("level1/relu"), wrong), (row("level1/relu"), "prose only"),
             (row("level1/relu"), answer(kernel("level1/relu"), prose="Same kernel, other words."))]
    with Scorer(given, shape=CPU_SHAPE, cache_dir=tmp_path) as scorer:
        first = scorer.score_batch(items)
        assert [s.tier for s in first.scores] == [CORRECT, WRONG, MALFORMED, CORRECT]
        assert given.submitted == 2 and (first.verified, first.joined, first.malformed) == (2, 1, 1)
        assert first.scores[0].result is first.scores[3].result  # one verdict for the one kernel
        stats = first.stats()
        assert stats["completions"] == 4 and stats["per_minute"] > 0 and stats["cache_hit_rate"] == 0
    with Scorer(given, shape=CPU_SHAPE, cache_dir=tmp_path) as scorer:  # a new process, the same cache file
        again = scorer.score_batch(items[:2])
        assert given.submitted == 2 and again.cache_hits == 2 and again.stats()["cache_hit_rate"] == 1.0
        for before, after in zip(first.scores, again.scores):
            assert after.cached and after.result.to_dict() == before.result.to_dict()
            assert after.score == before.score


def test_a_kernel_in_another_backend_than_asked_is_malformed_and_not_run(scorer):
    cpp = answer(open("tests/fixtures/relu_cpp.py").read())
    s = scorer.score(row("level1/relu"), cpp)
    assert s.tier == MALFORMED and s.parse_error == "wrong_backend (cpp, asked for triton)" and s.result is None


def test_a_fence_of_broken_python_is_a_syntax_error_not_another_backend(scorer):
    """`class ModelNew(:` was malformed as "wrong_backend (torch, asked for triton)"; it is Python that does not
    parse, judged so by the verifier's syntax check (the compile_error rung, above a malformed answer)."""
    broken = answer("import torch\n\n\nclass ModelNew(:\n    pass\n")
    s = scorer.score(row("level1/relu"), broken)
    assert s.parse_error is None and s.tier == COMPILE_ERROR and s.result.reasons == ["syntax_error"], s.to_dict()


def test_asyncio_callers_await_a_score(scorer):
    import asyncio

    s = asyncio.run(scorer.ascore(row("level1/relu"), answer(kernel("level1/relu"))))
    assert s.tier == CORRECT, s.to_dict()



def test_a_scorer_judges_on_the_cluster_it_is_given(tmp_path, monkeypatch):
    """cluster="local": the Scorer's verifier is a Ray cluster's (one CPU actor here), the verdict the same."""
    pytest.importorskip("ray")
    from kernelcraft.cluster import ClusterVerifier

    monkeypatch.delenv("KERNELCRAFT_CLUSTER", raising=False)
    with Scorer(shape=CPU_SHAPE, device="cpu", cache_dir=tmp_path, cluster="local", actors=1) as scorer:
        score = scorer.score(row("level1/relu"), answer(kernel("level1/relu")))
        (verifier,) = scorer._verifiers.values()
        assert isinstance(verifier, ClusterVerifier)
    assert score.tier == CORRECT and len(score.result.node) == 16


def test_an_object_that_is_no_verifier_is_refused(tmp_path):
    from kernelcraft.errors import ConfigError

    with pytest.raises(ConfigError, match="must be a kernelcraft.verify.JobFront, not OnlyAGuess"):
        Scorer(type("OnlyAGuess", (), {"submit": lambda self, job: None})(), cache_dir=tmp_path)
