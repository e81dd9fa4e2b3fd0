"""The scan family: every move of cumsum / cumprod along the last, first and a middle dim, with size-1 dims,
odd sizes and rows long enough for the multi-tile carry and the split (two-launch) path.

Without a GPU the kernels run in Triton's interpreter (conftest.py). Tolerances: fp32 sums of n unit normals
carry an error of about sqrt(n) ulps of their magnitude, and torch's CPU reference accumulates in double."""

import json
from pathlib import Path

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, check, load, reference

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LEVEL1 = Path(__file__).resolve().parents[5] / "src" / "kernelcraft" / "problems" / "level1"


def scan(kind="cumsum", dim=-1, dim_attr=None) -> Op:
    return Op("scan", {"op": kind, "dim": dim, "dim_attr": dim_attr})


MOVES = moves(scan())
CASES = [  # (op, forward expression, input shapes)
    (scan("cumsum", 1), "torch.cumsum(x, dim=1)", [(3, 37), (4, 1), (2, 5000)]),
    (scan("cumsum", 0), "x.cumsum(0)", [(37, 5), (1, 7), (3000, 3)]),
    (scan("cumsum", -2), "torch.cumsum(x, -2)", [(3, 17, 5), (2, 1, 9), (2, 2100, 3)]),
    (scan("cumprod", -1), "torch.cumprod(x, -1)", [(3, 37), (5, 1), (2, 3, 2500)]),
    (scan("cumprod", 0), "x.cumprod(0)", [(37, 5), (1, 1), (2100, 2)]),
]


def test_moves_are_distinct():
    assert 3 <= len(MOVES) <= 6 and len({m.text for m in MOVES}) == len(MOVES)
    assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in MOVES}) == len(MOVES)
    assert all(m.category in CATEGORIES for m in MOVES)


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("move", range(len(MOVES)))
def test_scan_moves(case, move, tmp_path):
    op, expr, shapes = CASES[case]
    if op.detail["op"] == "cumprod":  # factors near 1, so long products neither vanish nor blow up
        source = render(op, reference(expr), MOVES[move].params)
        assert_no_torch_compute(source)
        mod = load(source, tmp_path)
        for shape in shapes:
            x = 1.0 + 0.01 * torch.randn(shape, device=DEVICE)
            torch.testing.assert_close(mod.ModelNew()(x), mod.Model()(x), rtol=1e-4, atol=1e-6)
        return
    check(op, reference(expr), MOVES[move].params, [((), s) for s in shapes], tmp_path, rtol=1e-4, atol=1e-4)


def test_half_input_accumulates_in_fp32(tmp_path):
    """fp16 in and out, fp32 inside: every output within an fp16 rounding of the exact running sum (a running
    sum kept in fp16 drifts far past that over 3000 steps). Compared with the exact sum, not with torch's, whose
    own fp32 order differs by an fp16 ulp at places."""
    module = load(render(scan("cumsum", -1), reference("torch.cumsum(x, -1)"), MOVES[2].params), tmp_path)
    torch.manual_seed(0)
    x = torch.randn(3, 3000, device=DEVICE).half()
    got = module.ModelNew()(x)
    exact = torch.cumsum(x.double(), -1)
    assert got.dtype == torch.float16 and got.shape == x.shape
    spacing = exact.abs().clamp(min=1.0) * 2.0 ** -10  # fp16's spacing at the running sum's size, at most
    assert ((got.double() - exact).abs() <= spacing).all()


def test_suite_problem(tmp_path):
    op = scan("cumsum", 1)
    check(op, (LEVEL1 / "cumsum.py").read_text(), MOVES[0].params, [((), (37, 1000))], tmp_path, rtol=1e-4,
          atol=1e-4)


def test_scans_in_a_chain_each_launch_their_own_kernels(tmp_path):
    """Two scans of one forward: each op's kernels under its own names, the shared tile helper defined once."""
    ops, source = check_chain(tmp_path, "return torch.cumprod(torch.cumsum(x, 1) * 0.01 + 1.0, 0)", "",
                              [[(3, 40)], [(5, 300)], [(2100, 2)]])
    assert [op.kind for op in ops] == ["scan", "scan"] and ops[1].detail["pre"] == [["mul", 0.01], ["add", 1.0]]
    assert "def kc_cumsum_kernel_op0(" in source and "def kc_cumprod_kernel_op1(" in source
    assert "kc_cumprod_total_op1(t, BLOCK_S)" in source and source.count("def kc_tiles(") == 1
