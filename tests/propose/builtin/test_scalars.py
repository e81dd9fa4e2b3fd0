"""Numbers forward reads from its module are read at run time, not baked in at the traced sizes (scalars.py)."""

import math

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain, scalars
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from kernelcraft.propose.builtin.family import TritonKernel
from kernelcraft.propose.builtin.scalars import Scalar, Scalars
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load


def test_the_spec_keeps_each_path_as_forward_reads_it():
    s = Scalars.of_refs(["self.scale", "self.a__b", "self.scale"])
    assert s.items == (Scalar("a__b"), Scalar("scale"))  # each once, in order of their names
    assert s.params == "kc_s_a__b, kc_s_scale, "
    assert s.reads() == "kc_s_a__b = float(self.a__b)\nkc_s_scale = float(self.scale)\n"  # a__b stays a__b
    kernel = TritonKernel("k", ("x_ptr",), (), "pass", s)
    assert kernel.source().splitlines()[1] == "def k(kc_s_a__b, kc_s_scale, x_ptr):"
    assert kernel.launch("(1,)", ["x"]) == "k[(1,)](kc_s_a__b, kc_s_scale, x)"
    assert TritonKernel("k", ("x_ptr",), (), "pass").source().splitlines()[1] == "def k(x_ptr):"
    assert Scalars().reads() == ""
    assert (Scalars.of_refs(["self.b"]) + s).params == "kc_s_a__b, kc_s_b, kc_s_scale, "


def test_paths_that_would_share_a_name_are_refused():
    with pytest.raises(ValueError, match="share a kernel parameter name"):
        Scalars.of_refs(["self.a__b", "self.a.b"])


def test_attach_keeps_tensor_operands_and_pow_exponents():
    steps = [["mul", 0.5], ["tadd", 0], ["pow", 2.0], ["clamp", None, 0.5], ["add", 3.0]]
    out = scalars.attach(steps, lambda v: "half" if v == 0.5 else None)
    assert out == [["mul", "self.half"], ["tadd", 0], ["pow", 2.0], ["clamp", None, "self.half"], ["add", 3.0]]


def _run(tmp_path, source: str, init: list, inputs: list) -> None:
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    ref, new = module.Model(*init).to(DEVICE).eval(), module.ModelNew(*init).to(DEVICE).eval()
    new.load_state_dict(ref.state_dict())
    inputs = [t.to(DEVICE) for t in inputs]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), ref(*inputs), rtol=1e-4, atol=1e-5)


def test_a_scale_set_from_the_sizes_is_right_at_other_sizes(tmp_path):
    """level2/bmm_scale_softmax scales by 1/sqrt(K), given at init: traced at its small K, every move must still
    be right at other K (each K its own scale)."""
    problem = load_problem("level2/bmm_scale_softmax")
    ops = analyze(problem).chain
    assert ops is not None and ["mul", "self.scale"] in ops[0].detail["steps"], ops
    for k, move in enumerate(chain.moves(ops)[:4]):
        source = chain.render(ops, problem.source, move.params)
        K = (5, 40, 128, 77)[k]
        torch.manual_seed(k)
        _run(tmp_path, source, [1.0 / math.sqrt(K)], [torch.randn(2, 9, K), torch.randn(2, K, 13)])


PROBLEM = '''
import torch
import torch.nn as nn

SIZE = 64
SMALL_SIZES = {"SIZE": 8}


class Model(nn.Module):
    def __init__(self, slope: float, factor: float, low: float):
        super().__init__()
        self.slope, self.factor, self.low = slope, factor, low

    def forward(self, x):
        return torch.clamp(torch.nn.functional.leaky_relu(x, self.slope) * self.factor, min=self.low)


def get_inputs():
    return [torch.randn(4, SIZE)]


def get_init_inputs():
    return [0.01 * SIZE, 1.0 / SIZE, -0.5 / SIZE]
'''


def test_an_elementwise_chain_of_attribute_numbers_follows_the_model(tmp_path):
    path = tmp_path / "attrs.py"
    path.write_text(PROBLEM)
    problem = load_problem(path)
    op = analyze(problem).single
    assert op is not None and op.detail["steps"] == [["leaky_relu", "self.slope"], ["mul", "self.factor"],
                                                     ["clamp", "self.low", None]], op
    for move in kernel_check.moves(op)[:2]:
        source = kernel_check.render(op, problem.source, move.params)
        for size in (8, 64, 30):
            _run(tmp_path, source, [0.01 * size, 1.0 / size, -0.5 / size], [torch.randn(4, size)])


def test_a_number_derived_from_an_attribute_is_not_covered(tmp_path):
    path = tmp_path / "derived.py"
    path.write_text(PROBLEM.replace("* self.factor", "* (1.0 / self.factor)"))
    with pytest.raises(CoverageError, match=r"a number computed from self\.factor"):
        BuiltinProposer("cpu").coverage(load_problem(path), "triton")


def test_an_attribute_with_a_double_underscore_is_read_as_it_is_named(tmp_path):
    """`self.fac__tor` is read as self.fac__tor (a name is never turned back into a path)."""
    path = tmp_path / "dunder.py"
    path.write_text(PROBLEM.replace("self.factor", "self.fac__tor"))
    problem = load_problem(path)
    op = analyze(problem).single
    assert op is not None and ["mul", "self.fac__tor"] in op.detail["steps"], op
    source = kernel_check.render(op, problem.source, kernel_check.moves(op)[0].params)
    assert "kc_s_fac__tor = float(self.fac__tor)" in source
    for size in (8, 30):
        _run(tmp_path, source, [0.01 * size, 1.0 / size, -0.5 / size], [torch.randn(4, size)])
