"""The matmul's first move on a short K (Tiles.short_k): a product whose K is at most SHORT_K takes exact fp32
products on the strided kernel's SHORT_K_TILES, in every layout and with steps or a triangle mask, ahead of the
split-once, TMA and split-K paths; K one longer does not. Checked against torch on odd shapes, with a spy on each
launch's constants. Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.propose.builtin.families.gemm.tiles import SHORT_K, SHORT_K_TILES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.gemm.test_matmul import mm_reference
from tests.propose.builtin.families.gemm.test_matmul_off_tma import TILES
from tests.propose.builtin.kernel_check import DEVICE, Keywords, load, moves, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

MM = Op("matmul", {"trans_a": False, "trans_b": False})
FIRST = moves(MM)[0].params
SHORT = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"), SHORT_K_TILES), PREC="ieee")


def launches(op, ta, tb, sa, sb, tmp_path, ref=None):
    """The first move's constants at each launch of the strided kernel for op(A) (sa) @ op(B) (sb), its output
    checked against torch."""
    module = load(render(op, ref or mm_reference(ta, tb), FIRST), tmp_path)
    spy = Keywords("kc_matmul_kernel", *TILES)
    spy(module)
    torch.manual_seed(0)
    a, b = torch.randn(sa, device=DEVICE), torch.randn(sb, device=DEVICE)
    a, b = (a.transpose(-2, -1).contiguous() if ta else a), (b.transpose(-2, -1).contiguous() if tb else b)
    torch.testing.assert_close(module.ModelNew()(a, b), module.Model()(a, b), rtol=1e-4, atol=1e-4)
    return spy.seen


def test_only_the_first_move_and_its_text():
    assert FIRST.short_k and [m.params.short_k for m in moves(MM)].count(True) == 1
    assert f"K at most {SHORT_K}" in moves(MM)[0].text and "64x64 tiles" in moves(MM)[0].text
    assert not any(m.params.short_k for m in moves(Op("linear", {"weight": "w", "bias": None})))
    half = Op("matmul", {"trans_a": False, "trans_b": False, "dtype": "float16"})
    assert not any(m.params.short_k for m in moves(half))


@pytest.mark.parametrize("ta, tb, sa, sb", [
    (False, False, (70, SHORT_K), (SHORT_K, 130)),  # K = SHORT_K: one full step, ragged tiles both ways
    (False, False, (1100, 19), (19, 1030)),  # large enough to split once, K rows not 16-byte aligned
    (True, False, (65, 7), (7, 66)),
    (False, True, (65, 7), (7, 66)),
    (True, True, (3, 33, 5), (3, 5, 17)),  # batched, both transposed
    (False, False, (33, 5), (2, 5, 17)),  # A shared by a batch of B
    (False, False, (2, 9, 12), (12, 3000)),  # A's rows flattened over a 2-D B
])
def test_a_short_k_takes_the_small_exact_tiles(ta, tb, sa, sb, tmp_path):
    assert launches(Op("matmul", {"trans_a": ta, "trans_b": tb}), ta, tb, sa, sb, tmp_path) == [SHORT]


def test_one_step_longer_does_not(tmp_path):
    """K = SHORT_K + 1 takes the move's other paths (in the interpreter the strided kernel at the first exact
    move's tiles; on a Hopper GPU TMA), never the short tiles."""
    seen = launches(MM, False, False, (70, SHORT_K + 1), (SHORT_K + 1, 130), tmp_path)
    assert SHORT not in seen and (len(seen) == 1 or DEVICE != "cpu")


def test_steps_and_a_triangle_on_the_short_path(tmp_path):
    """The short tiles run the same kernel, so a product's steps and its triangle mask apply as on any other path."""
    ref = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, a, b):\n"
           "        return torch.relu(torch.triu(torch.matmul(a, b), diagonal=1))\n")
    op = Op("matmul", {"trans_a": False, "trans_b": False, "steps": [["relu"]],
                       "mask": {"op": "triu", "diagonal": 1}})
    assert launches(op, False, False, (70, 20), (20, 70), tmp_path, ref=ref) == [SHORT]
