"""A scan with a prologue: the pointwise steps before it applied by the scan kernel as it loads each tile
(torch.cumsum(x * mask, 1): the masked product is never written). Every move, the single and split paths, a reverse
scan, a mask given transposed or broadcast at run time, a number read from the module, KernelBench's masked cumsum;
and the operands the fold refuses.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain
from kernelcraft.propose.builtin.analyze import analyze
from tests.helpers import KERNELBENCH
from tests.propose.builtin import kernel_check
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load
from tests.propose.builtin.test_analyze import write

MASKED = "return torch.cumsum(x * mask, dim=1)"


def masked_problem(tmp_path, forward: str = MASKED, mask: str = "torch.randint(0, 2, (4, 8)).bool()"):
    return write(tmp_path, forward, inputs=f"[torch.randn(4, 8), {mask}]", args="x, mask")


def sources(problem, ops) -> list[str]:
    """The candidate of every move of the chain's lead op."""
    return [chain.render(ops, problem.source, m.params) for m in chain.moves(ops)]


def run(source: str, tmp_path, *inputs):
    module = load(source, tmp_path)
    inputs = [t.to(DEVICE) for t in inputs]
    with torch.no_grad():
        init = module.get_init_inputs()
        return module.ModelNew(*init).to(DEVICE)(*inputs), module.Model(*init).to(DEVICE)(*inputs)


def test_the_fold_makes_one_scan_op(tmp_path):
    analysis = analyze(masked_problem(tmp_path))
    assert analysis.chain is not None and len(analysis.chain) == 1, analysis
    op = analysis.chain[0]
    assert op.kind == "scan" and op.detail["pre"] == [["tmul", ("input", 1)]], op


@pytest.mark.parametrize("shape", [(3, 40), (2, 2500), (37, 5), (1, 1)])
def test_every_move_matches_torch(shape, tmp_path):
    problem = masked_problem(tmp_path)
    ops = analyze(problem).chain
    x = torch.randn(shape)
    mask = torch.rand(shape) < 0.5
    for source in sources(problem, ops):
        assert_no_torch_compute(source)
        got, want = run(source, tmp_path, x, mask)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_mask_transposed_or_broadcast_at_run_time(tmp_path):
    problem = masked_problem(tmp_path)
    source = sources(problem, analyze(problem).chain)[0]
    x = torch.randn(6, 300)
    for mask in (torch.rand(300, 6).T < 0.5, torch.rand(1, 300) < 0.5, torch.randint(0, 3, (6, 300))):
        got, want = run(source, tmp_path, x, mask)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_reverse_scan_and_a_number_from_the_module(tmp_path):
    problem = masked_problem(tmp_path, "return torch.cumsum((x * mask).flip(1), 1).flip(1)")
    ops = analyze(problem).chain
    assert len(ops) == 1 and ops[0].detail.get("reverse") and ops[0].detail["pre"], ops
    x, mask = torch.randn(3, 2500), torch.rand(3, 2500) < 0.5
    for source in sources(problem, ops):
        got, want = run(source, tmp_path, x, mask)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    scaled = write(tmp_path, "return torch.cumprod(x * self.scale + 1.0, dim=0)", "self.scale = 0.01")
    analysis = analyze(scaled)
    op = analysis.single
    assert op is not None and op.kind == "scan" and op.detail["pre"], analysis
    module = load(kernel_check.render(op, scaled.source, kernel_check.moves(op)[0].params), tmp_path)
    x = torch.randn(300, 7, device=DEVICE)
    new, ref = module.ModelNew().to(DEVICE), module.Model().to(DEVICE)
    torch.testing.assert_close(new(x), ref(x), rtol=1e-4, atol=1e-4)
    new.scale = ref.scale = 0.03  # read when called, not when written
    torch.testing.assert_close(new(x), ref(x), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")
def test_kernelbench_masked_cumsum(tmp_path):
    problem = load_problem(KERNELBENCH / "level1" / "93_masked_cumsum.py")
    ops = analyze(problem).chain
    assert len(ops) == 1 and ops[0].kind == "scan", ops
    x, mask = torch.rand(4, 3000), torch.randint(0, 2, (4, 3000)).bool()
    got, want = run(sources(problem, ops)[0], tmp_path, x, mask)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mask", ["torch.randn(4, 8).double()", "torch.randn(1, 8)"])
def test_operands_of_a_wider_dtype_or_another_shape_stay_an_elementwise_op(mask, tmp_path):
    ops = analyze(masked_problem(tmp_path, mask=mask)).chain
    assert [op.kind for op in ops] == ["elementwise", "scan"] and not ops[1].detail.get("pre"), ops
