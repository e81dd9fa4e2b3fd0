"""The model zoo: models built from their libraries' configs with random weights, and `apply` end to end on the
transformers ones at their tiny size on the CPU (capture by torch.export, regions grouped by problem, the built-in
engineer's kernels in the Triton interpreter, the reassembled model verified against the model). torchvision's and
timm's run where those packages import (a GPU machine: their wheels here are CUDA builds)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from kernelcraft import api, zoo
from tests.apply.conftest import DEVICE


def _have(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None and bool(__import__(package))
    except Exception:  # noqa: BLE001 - a wheel built for another torch fails at import
        return False


def test_unknown_names_sizes_and_dtypes_are_one_line_errors():
    with pytest.raises(zoo.ZooError, match="no model 'gpt5' in the zoo; it has gpt2, llama"):
        zoo.build("gpt5")
    with pytest.raises(zoo.ZooError, match="size is one of tiny, real"):
        zoo.model_file("gpt2", "huge")


@pytest.mark.parametrize("name", sorted(zoo.ENTRIES))
def test_every_model_builds_at_its_tiny_size_and_runs(name):
    entry = zoo.ENTRIES[name]
    if not _have(entry.library):
        pytest.skip(f"{entry.library} does not import here")
    model, inputs = zoo.build(name, "tiny", "bfloat16")
    again, _ = zoo.build(name, "tiny", "bfloat16")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


@pytest.mark.skipif(not _have("transformers"), reason="transformers is not installed")
@pytest.mark.parametrize("name", ["gpt2", "llama", "t5"])
def test_apply_end_to_end_on_a_tiny_transformer(name, tmp_path, monkeypatch):
    """Every region the engineer covers replaced (`--replace correct`: in the interpreter none can be faster), each
    problem run once for all its layers, and the model with its kernels correct against the model (T5's attention
    with its position bias held as a buffer, which the kernel reads)."""
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    path = tmp_path / f"{name}.py"
    path.write_text(zoo.model_file(name, "tiny", "float32"))
    outcome = api.apply(path, rounds=1, device=DEVICE, store=tmp_path / "runs.db", out_dir=tmp_path / "out",
                        max_candidates=1, compile_baseline=False, timing_budget=0.3, min_share=0.0, replace="correct")
    assert outcome.status == "done" and outcome.method == "export", (outcome.error, outcome.notes)
    assert outcome.end_to_end is not None and outcome.end_to_end.correct, outcome.end_to_end
    replaced = [r for r in outcome.regions if r.status == "replaced"]
    kinds = {r.kind for r in replaced}
    assert {"attention", "linear"} <= kinds, [(r.name, r.status, r.reason) for r in outcome.regions]
    assert any(r.like for r in replaced)  # the second layer's regions took the first's kernels
    assert not [r for r in outcome.regions if r.status == "dropped"], [(r.name, r.reason) for r in outcome.regions]


@pytest.mark.skipif(not _have("transformers"), reason="transformers is not installed")
def test_a_bf16_llamas_rmsnorm_is_one_region_the_engineer_covers(tmp_path):
    """Captured by torch.export at bf16, each RMSNorm is one region with its casts (bf16 in, bf16 out), and the
    built-in engineer reads it (no kernel is run: bf16 is beyond Triton's interpreter)."""
    from kernelcraft.apply import extract_model, write_problems
    from kernelcraft.problems import load_problem
    from kernelcraft.propose.builtin.proposer import BuiltinProposer

    model, inputs = zoo.build("llama", "tiny", "bfloat16")
    extraction = extract_model(model, inputs, "llama")
    norms = [r for r in extraction.regions if r.kind == "reduce"]
    assert len(norms) == 5  # two layers of two, and the last
    write_problems(extraction, tmp_path)
    engineer = BuiltinProposer("cuda")
    for region in norms:
        ops = [str(n.target) for n in region.module.graph.nodes if n.op == "call_function"]
        assert sum("_to_copy" in op for op in ops) == 2, ops
        assert [m.dtype for m in region.input_meta] == ["bfloat16"]
        engineer.coverage(load_problem(tmp_path / f"{region.name}.py"), "triton")  # raises where not covered
