"""Real runs for the report tests, made once per package: a scripted local chat server answers, the real
CPU verifier judges (Triton's interpreter), the real store keeps everything.

The tree run's script is one whose outcome is known (see TREE_RUN): its trajectory, and which ideas
paid off, are asserted by the tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.llm import ClientSettings, LLMProposer, ModelSpec
from kernelcraft.search import RunConfig, run_bench, start_run
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store
from kernelcraft.verify.policy import get_policy
from tests.llm_server import Reply, Rule, ScriptedLLMServer
from tests.search.conftest import FAST, IDEAS_PROMPT, PROSE, SLOW, WRONG, code, ideas_json, verifier

__all__ = ["verifier"]  # the search tests' CPU verifier, shared by this package's fixtures

INJECTION = '</script><script>alert("kc")</script>'
INJECTED = f"# {INJECTION}\n" + FAST  # a comment: the kernel stays correct, and becomes the run's best


def task(idea: str) -> str:
    """A regex for the implementation request of one idea (not the ideas shown as context)."""
    return "applies this idea: " + re.escape(idea)


# Round 1: three ideas from the reference; only the 512-element one gives a correct kernel (SLOW).
# Round 2: every idea starts from that kernel; the 4096-element one is faster (FAST) and so pays off,
# the 512 one repeats SLOW (as fast as its parent, so it does not), the bias is wrong again.
TREE_RULES = [
    Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 512 elements", "parallelism"),
                                         ("Add a bias for rounding", "precision"),
                                         ("Explain it in words", "control"))),
                        Reply(ideas_json(("Use blocks of 4096 elements", "memory"),
                                         ("Shrink the blocks to 512 again", "parallelism"),
                                         ("Add a bias twice", "precision")))]),
    Rule(task("Use blocks of 512"), [Reply(code(SLOW))]),
    Rule(task("Shrink the blocks"), [Reply(code(SLOW))]),
    Rule(task("Use blocks of 4096"), [Reply(code(FAST))]),
    Rule(task("Add a bias"), [Reply(code(WRONG))]),
    Rule(task("Explain it"), [Reply(PROSE)]),
]
SAMPLE_RULES = [Rule("Write a custom kernel", [Reply(code(WRONG)),
                                               Reply(code(INJECTED, "Vectorize <b>loads</b>", "memory"))])]


@dataclass
class Runs:
    store: Store
    tree: str      # run id: the tree run above
    sample: str    # run id: best-of-2 on the same problem, its best kernel's source carrying INJECTION
    bench_a: str   # bench id: relu and sigmoid, a ReLU kernel for both (correct on relu only)
    bench_b: str   # bench id: the same problems, the slower ReLU kernel


def _proposer(server: ScriptedLLMServer) -> LLMProposer:
    spec = ModelSpec("openai-compatible", "openai", "scripted-model", server.url + "/v1", "test-key")
    strict = get_policy("strict")
    return LLMProposer(spec, "cpu", (strict.name, strict.summary),
                       settings=ClientSettings(backoff_s=0.01, max_retries=1, concurrency=1))


def make_runs(store: Store, verifier) -> Runs:
    """The runs above, made in `store` with `verifier`."""
    relu = load_problem("level1/relu")
    problems = [relu, load_problem("level1/sigmoid")]
    tree_config = RunConfig(strategy="tree", backend="triton", rounds=2, ideas=3, impls=1, beam=2)
    sample_config = RunConfig(strategy="sample", backend="triton", samples=2)
    with ScriptedLLMServer(TREE_RULES) as server:
        proposer = _proposer(server)
        tree = start_run(store, relu, proposer, verifier, RunSpec(tree_config), out_dir=None).run_id
        proposer.close()
    with ScriptedLLMServer(SAMPLE_RULES) as server:
        proposer = _proposer(server)
        sample = start_run(store, relu, proposer, verifier, RunSpec(sample_config), out_dir=None).run_id
        proposer.close()
    benches = []
    for kernel in (FAST, SLOW):
        with ScriptedLLMServer([Rule("Write a custom kernel", [Reply(code(kernel))])]) as server:
            proposer = _proposer(server)
            one = RunConfig(strategy="sample", backend="triton", samples=1)
            benches.append(run_bench(store, "level1", problems, proposer, verifier, RunSpec(one))["bench_id"])
            proposer.close()
    return Runs(store, tree, sample, *benches)


@pytest.fixture(scope="package")
def runs(tmp_path_factory, verifier) -> Runs:
    store = Store(tmp_path_factory.mktemp("report") / "runs.db")
    yield make_runs(store, verifier)
    store.close()
