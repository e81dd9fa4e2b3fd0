"""Write a small reference, read it (as a chain, or one op), render its candidate, and compare ModelNew with Model on
several input shapes (shared by the chain and broadcast tests)."""

import torch

from kernelcraft.propose.builtin import chain
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load
from tests.propose.builtin.test_analyze import write


def check_chain(tmp_path, forward: str, init: str, cases: list, args: str = "x", move: int = 0, rtol=1e-4,
                atol=1e-4, single: bool = False, equal_nan: bool = False):
    """The chain read from the reference (forward body, __init__ body, forward's args), or its single op when
    `single`; rendered with its `move`-th move; for each case (a list of input shapes, or of tensors) ModelNew must
    match Model (NaN where Model's is, with `equal_nan`). Returns the ops and the candidate's source."""
    first = [tuple(t.shape) if isinstance(t, torch.Tensor) else tuple(t) for t in cases[0]]
    problem = write(tmp_path, forward, init, inputs=f"[{', '.join(f'torch.randn{s}' for s in first)}]", args=args)
    analysis = analyze(problem)
    if single:
        assert analysis.single is not None, analysis
        ops = [analysis.single]
        source = kernel_check.render(ops[0], problem.source, kernel_check.moves(ops[0])[move].params)
    else:
        assert analysis.chain is not None, analysis
        ops = analysis.chain
        source = chain.render(ops, problem.source, chain.moves(ops)[move].params)
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    for case in cases:
        torch.manual_seed(0)
        ref = module.Model().to(DEVICE).eval()
        torch.manual_seed(0)
        new = module.ModelNew().to(DEVICE).eval()
        inputs = [t.to(DEVICE) if isinstance(t, torch.Tensor) else torch.randn(t, device=DEVICE) for t in case]
        with torch.no_grad():
            want, got = ref(*inputs), new(*inputs)
        assert got.shape == want.shape and got.dtype == want.dtype, (case, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan, msg=lambda m: f"{forward} {case}: {m}")
    return ops, source
