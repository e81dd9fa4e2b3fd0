"""The convolution families' shared epilogue-operand primitive (families/conv/operands.py): an operand's strides
placed on the kernel's output dims (0 where broadcast or absent), what it refuses, and the kernel expression."""

import pytest
import torch

from kernelcraft.propose.builtin.families.conv.operands import kc_operand_args, load, tile_load


@pytest.mark.parametrize("shape, out, dims, ndim, want", [
    ((4, 1, 1, 1), [2, 4, 5, 6, 7], [0, 1, 2, 3, 4], 5, [0, 1, 0, 0, 0]),  # per channel
    ((), [2, 4, 5, 6, 7], [0, 1, 2, 3, 4], 5, [0, 0, 0, 0, 0]),  # a scalar
    ((1, 1, 1, 1, 1), [2, 4, 5, 6, 7], [0, 1, 2, 3, 4], 5, [0, 0, 0, 0, 0]),
    ((2, 4, 5, 6, 7), [2, 4, 5, 6, 7], [0, 1, 2, 3, 4], 5, [840, 210, 42, 7, 1]),  # full: its own strides
    ((5, 1, 7), [4, 5, 6, 7], [1, 2, 3, 4], 5, [0, 0, 7, 0, 1]),  # unbatched output: no n
    ((4, 9), [2, 4, 9], [0, 1, 3], 4, [0, 9, 0, 1]),  # a 1-D conv's output on a one-row 2-D kernel
])
def test_strides_land_on_the_kernel_dims(shape, out, dims, ndim, want):
    o = torch.randn(shape)
    got = kc_operand_args(o, out, dims, ndim)
    assert got[0] is o and got[1:] == want


def test_a_transposed_operand_keeps_its_own_strides():
    o = torch.randn(7, 4).t()  # (4, 7), strides (1, 4)
    assert kc_operand_args(o, [2, 4, 7], [0, 1, 3], 4)[1:] == [0, 1, 0, 4]


@pytest.mark.parametrize("shape, out", [((3, 1, 1), [2, 4, 5, 5]), ((1, 4, 1, 1), [4, 5, 5]),
                                        ((2, 4, 1, 1), [1, 4, 5, 5])])
def test_an_operand_that_would_grow_or_not_fit_the_output_is_refused(shape, out):
    with pytest.raises(ValueError, match="broadcasts beyond the output"):
        kc_operand_args(torch.randn(shape), out, list(range(len(out))), 4)


def test_the_kernel_reads_the_sum_of_index_times_stride():
    assert load(1, [({0: "p", 1: "c"}, ""), ({2: "oh"}, "[:, None]"), ({}, "[None, :]")], "m") == \
        "tl.load(o1_ptr + (p * o1_s0 + c * o1_s1) + (oh * o1_s2)[:, None], mask=m, other=0.0).to(tl.float32)"
    assert tile_load(0, ("od", "oh", "ow")) == (  # along the out-channels only (O0_COLS): one vector per tile
        "(tl.load(o0_ptr + (co.to(tl.int64) * o0_s1), mask=nmask, other=0.0).to(tl.float32)[None, :] if O0_COLS else "
        "tl.load(o0_ptr + (n.to(tl.int64) * o0_s0 + od * o0_s2 + oh * o0_s3 + ow * o0_s4)[:, None] + "
        "(co.to(tl.int64) * o0_s1)[None, :], mask=mmask[:, None] & nmask[None, :], other=0.0).to(tl.float32))")


@pytest.mark.parametrize("shape, out, dims, want", [  # a norm's kernel dims (n, c, s): the spatial dims one run
    ((6, 1, 1), [2, 6, 5, 7], [0, 1, 2, 2], [0, 1, 0]),  # per channel
    ((5, 7), [2, 6, 5, 7], [0, 1, 2, 2], [0, 0, 1]),  # along the whole run: its flat index
    ((6, 5, 7), [2, 6, 5, 7], [0, 1, 2, 2], [0, 35, 1]),
    ((6, 1, 5, 1), [2, 6, 1, 5, 1], [0, 1, 2, 2, 2], [0, 5, 1]),  # size-1 output dims take no part
    ((2, 3, 1, 1, 1), [2, 3, 4, 5, 6], [0, 0, 1, 2, 2], [1, 0, 0]),  # a softmax over dim 2: (outer, r, inner)
    ((6,), [4, 6], [0, 1], [0, 1, 0]),  # a 2-D input: no spatial dims
])
def test_a_run_of_output_dims_on_one_kernel_dim_takes_its_flat_stride(shape, out, dims, want):
    o = torch.randn(shape)
    got = kc_operand_args(o, out, dims, 3)
    assert got[0] is o and got[1:] == want


@pytest.mark.parametrize("shape", [(7,), (5, 1), (6, 1, 7), (2, 6, 1, 7)])
def test_an_operand_that_does_not_step_through_a_run_flat_is_expanded_first(shape):
    o, out = torch.randn(shape), [2, 6, 5, 7]
    got = kc_operand_args(o, out, [0, 1, 2, 2], 3)
    assert got[0] is not o and got[0].is_contiguous() and tuple(got[0].shape) == tuple(out)
    assert torch.equal(got[0], o.expand(out)) and got[1:] == [210, 35, 1]
