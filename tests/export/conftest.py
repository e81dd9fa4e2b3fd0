"""Real runs in a real store to export: a scripted chat server answers, the CPU verifier judges
(Triton's interpreter), the SQLite store keeps it all. Made once for the package: a bench of two problems
(`sample`, with settings stored as `kernelcraft bench` stores them; relu's five answers: the fast kernel twice,
a wrong one, prose, a kernel-less fallback), a two-round `tree` run (two ideas a round, the
same two again in round 2, each built on one of round 1's kernels), a three-turn `refine` run
(wrong → fast → slow), and the built-in engineer's two-round `tree` run on relu."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.llm import ClientSettings, LLMProposer, ModelSpec
from kernelcraft.search import RunConfig, run_bench, start_run
from kernelcraft.spec import RunSpec, VerifySpec
from kernelcraft.store import Store
from kernelcraft.verify.policy import get_policy
from tests.llm_server import Reply, Rule, ScriptedLLMServer
from tests.search.conftest import FAST, IDEAS_PROMPT, PROSE, SLOW, WRONG, code, ideas_json, verifier

__all__ = ["verifier"]  # the search tests' CPU verifier, shared by this package's fixtures

FALLBACK = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''
VERIFY = VerifySpec(device="cpu", policy="strict", size="small", small=True, compile_baseline=False,
                    timing_budget=0.2)


@dataclass
class Runs:
    store: Store
    bench_id: str
    bench_runs: dict  # problem name -> run id
    tree: str
    refine: str
    builtin: str  # the built-in engineer's tree run on relu (two rounds, two ideas each)


def _proposer(server: ScriptedLLMServer) -> LLMProposer:
    spec = ModelSpec("openai-compatible", "openai", "scripted-model", server.url + "/v1", "test-key")
    strict = get_policy("strict")
    return LLMProposer(spec, "cpu", (strict.name, strict.summary),
                       settings=ClientSettings(backoff_s=0.01, max_retries=1, concurrency=1))


def _run(rules, verifier, drive):
    with ScriptedLLMServer(rules) as server:
        proposer = _proposer(server)
        try:
            return drive(proposer)
        finally:
            proposer.close()


@pytest.fixture(scope="package")
def runs(verifier, tmp_path_factory) -> Runs:
    store = Store(tmp_path_factory.mktemp("export") / "runs.db")
    relu, sigmoid = load_problem("level1/relu"), load_problem("level1/sigmoid")
    bench = _run([Rule(r"torch\.sigmoid", [Reply(code(FAST))]),
                  Rule("Write a custom kernel", [Reply(code(FAST)), Reply(code(FAST)), Reply(code(WRONG)),
                                                 Reply(PROSE), Reply(code(FALLBACK))])], verifier,
                 lambda p: run_bench(store, "two", [relu, sigmoid], p, verifier,
                                     RunSpec(RunConfig(strategy="sample", backend="triton", samples=5, concurrency=1),
                                             VERIFY)))
    tree = _run([Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism"),
                                                      ("Use blocks of 512 elements", "memory")))]),
                 Rule("applies this idea: Use blocks of 4096", [Reply(code(FAST))]),
                 Rule("applies this idea: Use blocks of 512", [Reply(code(SLOW))])], verifier,
                lambda p: start_run(store, relu, p, verifier,
                                    RunSpec(RunConfig(strategy="tree", backend="triton", rounds=2, ideas=2, impls=1,
                                                      beam=2, concurrency=1)), out_dir=None))
    refine = _run([Rule("Write a custom kernel", [Reply(code(WRONG))]),
                   Rule("verifier's verdict on your last answer", [Reply(code(FAST)), Reply(code(SLOW))])], verifier,
                  lambda p: start_run(store, relu, p, verifier,
                                      RunSpec(RunConfig(strategy="refine", backend="triton", rounds=3, samples=1)),
                                      out_dir=None))
    builtin = start_run(store, relu, BuiltinProposer("cpu"), verifier,
                        RunSpec(RunConfig(strategy="tree", backend="triton", rounds=2, ideas=2, impls=1, beam=1)),
                        out_dir=None)
    yield Runs(store, bench["bench_id"], {r["problem"]: r["run_id"] for r in bench["rows"]}, tree.run_id,
               refine.run_id, builtin.run_id)
    store.close()
