"""What a proposer is told in later rounds, rendered through the local server as a model receives it:
the target (sizes timed, baselines), every tried idea with its outcome, the last round's errors, and the
kernels fastest first with the task naming the one it builds on."""

from __future__ import annotations

import re

import pytest

from kernelcraft.search import RunConfig, start_run
from kernelcraft.spec import RunSpec
from tests.llm_server import Reply, Rule
from tests.search.conftest import FAST, IDEAS_PROMPT, SLOW, WRONG, code, ideas_json

pytestmark = pytest.mark.slow

BROKEN = FAST.replace("def forward(self, x: torch.Tensor)", "def forward(self, x: torch.Tensor")  # a syntax error
RAISES = FAST.replace("x = x.contiguous()", "raise ValueError(\"arange's range must be a power of 2\")")


def task(idea: str) -> str:
    return "applies this idea: " + re.escape(idea)


def prompt(store, run_id: str, key: str) -> str:
    return store.call(run_id, key).messages[-1]["content"]


def test_later_rounds_see_outcomes_errors_baselines_and_the_kernels_in_order(store, relu, verifier, serve, proposer):
    server = serve([
        Rule(IDEAS_PROMPT, [Reply(ideas_json(("Use blocks of 4096 elements", "parallelism"),
                                             ("Use blocks of 512 elements", "parallelism"),
                                             ("Unroll the loop by hand", "control"),
                                             ("Add a bias for rounding", "compute"),
                                             ("Tile in two dimensions", "memory")))]),
        Rule(task("Use blocks of 4096"), [Reply(code(FAST))]),
        Rule(task("Use blocks of 512"), [Reply(code(SLOW))]),
        Rule(task("Unroll the loop"), [Reply(code(BROKEN))]),
        Rule(task("Add a bias"), [Reply(code(WRONG))]),
        Rule(task("Tile in two"), [Reply(code(RAISES))]),
    ])
    out = start_run(store, relu, proposer(server, concurrency=1), verifier,
                    RunSpec(RunConfig(strategy="tree", backend="triton", rounds=2, ideas=5, impls=2, beam=2)),
                    out_dir=None)
    assert out.status == "done"

    first = prompt(store, out.run_id, "r01/ideas")
    # round 1 already has a target: what is timed and the baselines it is measured against
    assert re.search(r"What is timed: one forward call on inputs \(\d+, \d+\) float32", first)
    assert re.search(r"Baselines here: PyTorch eager [\d.]+ ms\.", first)  # no torch.compile baseline in these tests
    assert "Ideas already tried" not in first and "Errors in the last round" not in first

    ideas = prompt(store, out.run_id, "r02/ideas")
    tried = ideas[ideas.index("Ideas already tried"):]
    lines = {l.split(" -> ")[0]: l.split(" -> ")[1] for l in tried.splitlines() if l.startswith("- [")}
    assert re.match(r"correct, [\d.]+ ms \([\d.e-]+x eager\), kept as kernel 1",
                    lines["- [parallelism] Use blocks of 4096 elements"])
    assert "kept as kernel 2" in lines["- [parallelism] Use blocks of 512 elements"]
    assert lines["- [control] Unroll the loop by hand"].startswith("both implementations failed: ")
    assert "rejected (syntax_error)" in lines["- [control] Unroll the loop by hand"]
    assert lines["- [compute] Add a bias for rounding"].startswith("both implementations failed: incorrect")
    assert lines["- [memory] Tile in two dimensions"].startswith("both implementations failed: runtime_error")
    errors = ideas[ideas.index("Errors in the last round's kernels"):]
    # a traceback's exception reaches the next round, not the harness's frames
    assert 'idea "Tile in two dimensions": runtime_error' in errors
    assert "ValueError: arange's range must be a power of 2" in errors
    assert 'idea "Unroll the loop by hand": rejected (syntax_error)' in errors and "invalid syntax" in errors
    assert 'idea "Add a bias for rounding": incorrect' in errors and "largest relative error" in errors
    # the kernels kept are shown fastest first, and the ideas prompt says which kernel each idea goes to
    assert ideas.index("BLOCK = 4096") < ideas.index("BLOCK = 512")
    head1, head2 = re.findall(r"^### Kernel \d.*$", ideas, re.M)
    assert head1.startswith("### Kernel 1 (") and "4096" in head1 and "512" in head2
    ms1, ms2 = (float(re.search(r"\(([\d.]+) ms", h).group(1)) for h in (head1, head2))
    x1, x2 = (float(re.search(r"([\d.e-]+)x PyTorch eager", h).group(1)) for h in (head1, head2))
    assert ms1 <= ms2 and x1 >= x2  # one baseline for both: the speedups keep the order of the times
    assert "the first idea is applied to kernel 1, the second to kernel 2" in ideas

    # the second idea goes to the second kernel, and the task names it by its place
    second = prompt(store, out.run_id, "r02/i01/m00")
    assert "Write a new version of kernel 2 above that applies this idea: Use blocks of 512" in second
    assert second.index("BLOCK = 4096") < second.index("BLOCK = 512")
    assert "Errors in the last round's kernels" in second
    assert "Write a new version of kernel 1 above" in prompt(store, out.run_id, "r02/i00/m00")

