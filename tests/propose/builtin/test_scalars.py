"""Numbers forward reads from its module are read at run time, not baked in at the traced sizes (scalars.py)."""

import math
import textwrap

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain, scalars, triton_kernels
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load

_KERNELS = '''
@triton.jit
def kc_inner(x, kc_s_a):
    return x * kc_s_a


@triton.jit
def kc_outer_kernel(x_ptr, n, BLOCK: tl.constexpr):
    x = kc_inner(tl.load(x_ptr), kc_s_a) + kc_s_b
    tl.store(x_ptr, x)


def kc_host(self, x):
    kc_outer_kernel[(triton.cdiv(x.numel(), 8), 1)](x, x.numel(), BLOCK=8)
'''


def test_bind_makes_the_numbers_parameters_and_passes_them_at_launch():
    out = scalars.bind(_KERNELS)
    assert "def kc_outer_kernel(kc_s_a, kc_s_b, x_ptr, n, BLOCK: tl.constexpr):" in out
    assert "def kc_inner(x, kc_s_a):" in out  # already a parameter: unchanged
    assert "kc_outer_kernel[(triton.cdiv(x.numel(), 8), 1)](float(self.a), float(self.b), x, x.numel()" in out
    assert scalars.bind(out) == out  # bound once


def test_bind_passes_them_on_from_a_kernel_to_the_function_it_calls():
    text = textwrap.dedent('''
        @triton.jit
        def kc_step(x):
            return x + kc_s_shift


        @triton.jit
        def kc_k(p):
            tl.store(p, kc_step(tl.load(p)))


        def kc_host(self, p):
            kc_k[(1,)](p)
        ''')
    out = scalars.bind(text)
    assert "def kc_step(kc_s_shift, x):" in out and "kc_step(kc_s_shift, tl.load(p))" in out
    assert "def kc_k(kc_s_shift, p):" in out and "kc_k[(1,)](float(self.shift), p)" in out


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
    for move in triton_kernels.moves(op)[:2]:
        source = triton_kernels.render(op, problem.source, move.params)
        for size in (8, 64, 30):
            _run(tmp_path, source, [0.01 * size, 1.0 / size, -0.5 / size], [torch.randn(4, size)])


def test_a_number_derived_from_an_attribute_is_not_covered(tmp_path):
    path = tmp_path / "derived.py"
    path.write_text(PROBLEM.replace("* self.factor", "* (1.0 / self.factor)"))
    with pytest.raises(CoverageError, match=r"a number computed from self\.factor"):
        BuiltinProposer("cpu").coverage(load_problem(path), "triton")


def test_bind_through_two_levels_of_calls_passes_each_name_once():
    text = textwrap.dedent('''
        @triton.jit
        def kc_a(x):
            return x * kc_s_k


        @triton.jit
        def kc_b(x):
            return kc_a(x) + kc_s_j


        @triton.jit
        def kc_c(p):
            tl.store(p, kc_b(tl.load(p)) + kc_a(1.0))


        def kc_host(self, p):
            kc_c[(1,)](p)
        ''')
    out = scalars.bind(text)
    assert "def kc_a(kc_s_k, x):" in out and "def kc_b(kc_s_j, kc_s_k, x):" in out and "def kc_c(kc_s_j, kc_s_k, p):" in out
    assert "kc_b(kc_s_j, kc_s_k, tl.load(p)) + kc_a(kc_s_k, 1.0)" in out and "kc_a(kc_s_k, x) + kc_s_j" in out
    assert "kc_c[(1,)](float(self.j), float(self.k), p)" in out
    assert out.count("float(self.") == 2
