"""Elementwise chains with tensor operands (x + self.bias, x * y, y / x): torch's broadcasting on any shapes,
operands read through their own strides (broadcast dims at stride 0, transposed views as they are), the
coalescing of dims, and every pointwise move."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.families.pointwise.kernels import MAX_DIMS, kc_bcast_layout
from tests.helpers import KERNELBENCH
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, check_first_answer, load
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")


@pytest.mark.parametrize("c, shapes", [(3, [(2, 3, 5, 7), (1, 3, 1, 9), (4, 3, 13, 1)]),
                                       (1, [(2, 1, 3, 3), (3, 5, 2)])])
def test_a_per_channel_parameter(tmp_path, c, shapes):
    ops, _ = check_chain(tmp_path, "return torch.sigmoid(x + self.bias) * 2.0",
                         f"self.bias = nn.Parameter(torch.randn({c}, 1, 1))", [[s] for s in shapes])
    assert [op.detail["steps"] for op in ops] == [[["tadd", ("attr", "bias")], ["sigmoid"], ["mul", 2.0]]]


@pytest.mark.parametrize("forward", ["return x * y", "return x - y", "return y / (x * x + 1.0)",
                                     "return torch.relu(y) - torch.tanh(x)"])
def test_two_inputs_broadcast_both_ways(tmp_path, forward):
    cases = [[(4, 5, 6), (5, 1)],  # y broadcast over x
             [(3, 1, 7), (2, 1)],  # both broadcast: the output (3, 2, 7) is larger than either
             [(7,), (3, 7)],  # x broadcast over y
             [(37, 130), (37, 130)],  # same shapes: one flat dim
             [(0, 5), (5,)]]  # empty
    check_chain(tmp_path, forward, "", cases, args="x, y")


def test_strided_operands_are_read_as_they_are(tmp_path):
    y = torch.randn(9, 5).t()  # (5, 9), strides (1, 5)
    z = torch.randn(4, 6, 10)[:, ::2, 1:]  # (4, 3, 9), a sliced view
    check_chain(tmp_path, "return x + y", "", [[(5, 9), y], [(4, 5, 9), y], [z, (3, 9)], [(3, 9), z]],
                args="x, y")


@pytest.mark.parametrize("forward, init", [
    ("return self.w - x", "self.w = nn.Parameter(torch.randn(6))"),  # parameter first: rsub
    ("return 1.0 / (self.w + torch.exp(x))", "self.register_buffer('w', torch.rand(6) + 1.0)"),
    ("return x * self.scale + self.shift", "self.scale = nn.Parameter(torch.randn(6))\n"
                                           "self.shift = nn.Parameter(torch.randn(5, 1))"),
])
def test_parameters_on_either_side(tmp_path, forward, init):
    check_chain(tmp_path, forward, init, [[(5, 6)], [(2, 5, 6)], [(1, 1, 6)]])


@pytest.mark.parametrize("move", range(6))
def test_every_pointwise_move(tmp_path, move):
    check_chain(tmp_path, "return x * self.s + y", "self.s = nn.Parameter(torch.randn(3, 1))",
                [[(2, 3, 33), (33,)], [(3, 1), (3, 1)], [(5, 3, 7), (5, 3, 7)]], args="x, y", move=move)


def test_many_dims_coalesce():
    x = torch.randn(2, 1, 3, 2, 2, 3, 2, 5)
    shape, sizes, strides, nd, wide = kc_bcast_layout([x, x], MAX_DIMS)
    assert shape == list(x.shape) and nd == 1 and not wide and sizes[-1] == x.numel() and strides == [[0] * 5 + [1]] * 2
    bias = torch.randn(3, 1, 1)
    shape, sizes, strides, nd, _ = kc_bcast_layout([torch.randn(4, 3, 5, 7), bias], MAX_DIMS)
    assert (shape, sizes[-3:], nd) == ([4, 3, 5, 7], [4, 3, 35], 3)
    assert strides[1][-3:] == [0, 1, 0]  # the bias: broadcast over N and the plane
    big = torch.empty(2**16, 2**15 + 1, device="meta")  # 2**31 + 2**16 elements: 64-bit offsets
    assert kc_bcast_layout([big, torch.empty(2**15 + 1, device="meta")], MAX_DIMS)[4]
    assert kc_bcast_layout([torch.empty(3, 2**30, device="meta")[:, ::2**29]], MAX_DIMS)[4]  # a far stride
    with pytest.raises(ValueError, match="do not broadcast"):
        kc_bcast_layout([torch.randn(3, 4), torch.randn(5)], MAX_DIMS)


def test_seven_dims_that_do_not_coalesce(tmp_path):
    shapes = [(2, 1, 2, 1, 2, 1, 2), (1, 2, 1, 2, 1, 2, 1)]  # alternating broadcasts: seven dims, none merge
    with pytest.raises(ValueError, match="do not coalesce"):
        check_chain(tmp_path, "return x + y", "", [shapes], args="x, y")
    check_chain(tmp_path, "return x + y", "", [[(2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 3)]], args="x, y")


@pytest.mark.parametrize("forward", ["return x * s", "return torch.relu(x - s) / s"])
def test_a_number_passed_to_forward_is_an_operand(tmp_path, forward):
    """KernelBench's matrix-scalar problem passes s = 3.14 to forward: read as a 0-dim operand of x's dtype, at any
    shape and any value of s (it is not baked in at analysis)."""
    problem = write(tmp_path, forward, inputs="[torch.randn(33, 17), 3.14]", args="x, s")
    ops = analyze(problem).chain
    source = chain.render(ops, problem.source, chain.moves(ops)[0].params)
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    new, ref = module.ModelNew().to(DEVICE), module.Model().to(DEVICE)
    for shape, s in [((33, 17), 3.14), ((5, 2, 9), -0.5), ((1,), 7.0), ((0, 3), 2.0)]:
        x = torch.randn(shape, device=DEVICE)
        with torch.no_grad():
            torch.testing.assert_close(new(x, s), ref(x, s), rtol=1e-5, atol=1e-5)


@needs_kernelbench
def test_upstream_matrix_scalar_multiplication(tmp_path):
    check_first_answer(load_problem(KERNELBENCH / "level1" / "5_Matrix_scalar_multiplication.py"), tmp_path)


@pytest.mark.parametrize("forward", ["return torch.cumsum(x * m, dim=1)", "return x * m + 1.0", "return m / (x * x + 1.0)"])
def test_a_bool_or_integer_operand_of_a_floating_x(tmp_path, forward):
    """x * mask (KernelBench's masked cumsum): torch promotes a bool or integer tensor to x's floating dtype; the
    kernel loads it as it is. Integer x with a bool operand is still refused (its promotion is not followed)."""
    cases = [[torch.randn(6, 37), torch.rand(6, 37) > 0.5],
             [torch.randn(3, 5), torch.randint(-3, 4, (3, 5), dtype=torch.int32)],
             [torch.randn(4, 9), torch.rand(9) > 0.3]]
    check_chain(tmp_path, forward, "", cases, args="x, m")


@needs_kernelbench
def test_upstream_masked_cumsum(tmp_path):
    check_first_answer(load_problem(KERNELBENCH / "level1" / "93_masked_cumsum.py"), tmp_path)


def test_compiled_sizes_build_the_broadcast_kernel_per_shape(tmp_path):
    """compiled_sizes: the sizes and strides are constexprs (a build per shape), right on every shape and layout the
    run-time kernel takes: both operands broadcast, a transposed view, a sliced one, a row-broadcast diag(A) @ B."""
    from tests.propose.builtin import kernel_check

    problem = write(tmp_path, "return x * y", "", inputs="[torch.randn(4, 5), torch.randn(5)]", args="x, y")
    ops = analyze(problem).chain
    params = kernel_check.moves(ops[0])[0].params.but(compiled_sizes=True, packed_layout=False)
    assert len(ops) == 1 and "compiled in as constants" in params.idea()
    source = chain.render(ops, problem.source, params, lead_index=0)
    assert "D5: tl.constexpr" in source and "x_s5: tl.constexpr" in source
    assert_no_torch_compute(source)
    run_layouts(load(source, tmp_path))


LAYOUTS = [((3, 1, 7), (2, 1)), ((4096, 1), (4096, 33)), (torch.randn(9, 5).t(), (4, 5, 9)),
           (torch.randn(4, 6, 10)[:, ::2, 1:], (3, 9)), ((37, 130), (37, 130)), ((3, 32, 64), (32, 1))]


def run_layouts(module) -> None:
    """x * y on LAYOUTS (both operands broadcast, a transposed view, a sliced one, a row broadcast, same shapes, a
    channel broadcast over three dims), exactly torch's."""
    for a, b in LAYOUTS:
        x = a if isinstance(a, torch.Tensor) else torch.randn(a)
        y = b if isinstance(b, torch.Tensor) else torch.randn(b)
        x, y = x.to(DEVICE), y.to(DEVICE)
        torch.testing.assert_close(module.ModelNew()(x, y), module.Model()(x, y), rtol=0, atol=0)


def test_packed_layout_passes_the_last_dim_and_a_pointer(tmp_path):
    """packed_layout (the first move): the sizes and strides but the last dim's read from a tensor the host keeps per
    layout (one entry per shapes and strides met, on their device), with a mask of the tensors whose strides are all
    multiples of 16 (hinted so in the kernel); right on the same layouts; it excludes compiled_sizes."""
    from kernelcraft.propose.builtin.families.pointwise import Tiles
    from tests.propose.builtin import kernel_check

    problem = write(tmp_path, "return x * y", "", inputs="[torch.randn(4, 5), torch.randn(5)]", args="x, y")
    ops = analyze(problem).chain
    params = kernel_check.moves(ops[0])[0].params
    assert params.packed_layout and "packed in a small tensor" in params.idea()  # the first move
    source = chain.render(ops, problem.source, params, lead_index=0)
    assert "layout_ptr, D5, x_s5, o0_s5, NDIM: tl.constexpr" in source and "D4 = tl.load(layout_ptr + 4)" in source
    assert "o0_s4 = tl.load(layout_ptr + 14)" in source and "x_s0 = tl.multiple_of(x_s0, 16)" in source
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    run_layouts(module)
    assert len(module.KC_BCAST_LAYOUTS) == len(LAYOUTS)
    run_layouts(module)  # the same shapes and strides again: nothing new kept
    assert len(module.KC_BCAST_LAYOUTS) == len(LAYOUTS)
    for shape, packed, nd, wide, aligned, sizes, strides in module.KC_BCAST_LAYOUTS.values():
        assert packed.dtype == torch.int32 and not wide
        assert packed.tolist() == sizes[:-1] + [s for st in strides for s in st[:-1]]
    # hinted (x, as forward makes it contiguous, is bit 1; y bit 2): the same shapes (one dim, no outer strides) both;
    # the channel broadcast x (outer strides 2048, 64), not y (1 along the channels); the sliced x's layout y (0: x
    # merged to (4, 27)); the transposed one x (0 along the batch); the others neither (strides 7, 33, 1)
    masks = {tuple(entry[0]): entry[4] for entry in module.KC_BCAST_LAYOUTS.values()}
    assert masks == {(37, 130): 3, (3, 32, 64): 1, (4, 3, 9): 2, (4, 5, 9): 1, (3, 2, 7): 0, (4096, 33): 0}
    with pytest.raises(ValueError, match="exclude each other"):
        Tiles(compiled_sizes=True, packed_layout=True)
