"""spec.py: what a run, a bench and an apply were asked to do, stored as given and read back for resume."""

from __future__ import annotations

import json

import pytest

from kernelcraft.spec import ApplySettings, ApplySpec, Budget, ProposerSpec, RunConfig, RunSpec, VerifySpec
from kernelcraft.store import Store

SPEC = RunSpec(RunConfig(strategy="refine", backend="triton", rounds=3, seeds=["class ModelNew: ..."],
                         budget=Budget(candidates=9, wall_s=120.0)),
               VerifySpec(device="cpu", policy="fast", size="small", size_overrides={"N": 64}, sizes={"N": 64},
                          compile_baseline=False, timing_budget=0.5, small=True),
               ProposerSpec(model="openai/o3", base_url="http://127.0.0.1:9", reasoning_effort="low", max_tokens=512,
                            temperature=0.2, timeout_s=30.0, max_retries=1, concurrency=2))


def test_a_spec_comes_back_from_the_store_as_it_was_given(tmp_path):
    store = Store(tmp_path / "runs.db")
    try:
        store.create_run("r", "level1/relu", "src", "openai/o3", "cpu", SPEC)
        assert store.run("r").spec == SPEC and store.run("r").strategy == "refine"
        store.create_apply("apply-1", "model.py", "src", ApplySpec(SPEC, ApplySettings(3.0, 0.1, 7, "correct"), "out"))
        again = store.apply("apply-1").spec
    finally:
        store.close()
    assert again == ApplySpec(SPEC, ApplySettings(3.0, 0.1, 7, "correct"), "out")
    assert json.loads(json.dumps(SPEC.to_dict())) == SPEC.to_dict()  # plain JSON, no key among it
    assert "api_key" not in json.dumps(SPEC.to_dict())


def test_stores_written_before_the_spec_read_back():
    """A run stored with `small` and no `size`, keys this version does not know, or no verify and proposer settings
    (a run started from Python) still reads."""
    old = {"run": {"strategy": "tree", "rounds": 2, "budget": {"candidates": 4}, "retired": 1},
           "verify": {"device": "cuda", "policy": "strict", "small": True, "compile_baseline": True,
                      "timing_budget": 6.0, "later_field": "x"},
           "proposer": {"model": "builtin", "timeout_s": 600.0, "max_retries": 4, "concurrency": 8}}
    spec = RunSpec.from_dict(old)
    assert spec.run == RunConfig(strategy="tree", rounds=2, budget=Budget(candidates=4))
    assert spec.verify.size == "small" and spec.verify.small
    assert RunSpec.from_dict({**old, "verify": {**old["verify"], "small": False}}).verify.size == "full"
    bare = RunSpec.from_dict({"run": {"strategy": "sample"}})
    assert bare.run.strategy == "sample" and bare.verify is None and bare.proposer is None
    assert bare.to_dict() == {"run": RunConfig(strategy="sample").to_dict()}


def test_a_copy_is_its_own():
    """A bench's runs and an apply's regions each take a copy: one's budget changed leaves the others'."""
    copy = SPEC.copy()
    copy.run.budget.wall_s = 5.0
    copy.run.seeds.append("another")
    assert SPEC.run.budget.wall_s == 120.0 and SPEC.run.seeds == ["class ModelNew: ..."]
    assert SPEC.copy(rounds=1).run.rounds == 1 and SPEC.run.rounds == 3


def test_settings_that_cannot_be_are_refused():
    with pytest.raises(ValueError, match="replace 'sometimes'"):
        ApplySettings(replace="sometimes")
    with pytest.raises(ValueError, match="--rounds must be at least 1"):
        RunConfig(rounds=0).check()
    with pytest.raises(ValueError, match="budget wall_s must be positive"):
        RunConfig(budget=Budget(wall_s=-1)).check()
