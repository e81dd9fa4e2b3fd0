"""Reverse scans: torch spells them flip(cumsum(flip(x, d), d), d); analyze() reads that as one scan Op with reverse,
and refuses a flip read by anything else. Every move of the scan family, at shapes that take the multi-tile carry and
the split path, compared with torch. Without a GPU in Triton's interpreter (conftest.py)."""


import pytest

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import check, reference
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def rev(kind="cumsum", dim=-1, dim_attr=None) -> Op:
    return Op("scan", {"op": kind, "dim": dim, "dim_attr": dim_attr, "reverse": True})


CASES = [  # (op, forward expression, input shapes)
    (rev("cumsum", 1), "torch.cumsum(x.flip(1), dim=1).flip(1)", [(3, 37), (4, 1), (2, 5000)]),
    (rev("cumsum", 0), "torch.flip(torch.cumsum(torch.flip(x, [0]), 0), [0])", [(37, 5), (3000, 3)]),
    (rev("cumsum", -2), "x.flip(-2).cumsum(-2).flip(-2)", [(3, 17, 5), (2, 2100, 3)]),
    (rev("cumprod", -1), "torch.cumprod(x.flip(-1), -1).flip(-1)", [(3, 37), (2, 3, 2500)]),
]


@pytest.mark.parametrize("params", [m.params for m in moves(rev())], ids=ident)
def test_reverse_scan_moves(params, tmp_path):
    for op, expr, shapes in CASES:
        scale = 0.1 if op.detail["op"] == "cumprod" else 1.0  # products of 2500 small factors: no overflow
        check(op, reference(expr), params, [((), s, scale) for s in shapes], tmp_path, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,expr,shapes", CASES, ids=[c[1] for c in CASES])
def test_flip_scan_flip_is_one_reverse_scan(op, expr, shapes, tmp_path):
    analysis = analyze(write(tmp_path, f"return {expr}", inputs=f"[torch.randn{shapes[0]}]"))
    assert analysis.single is not None, analysis
    assert analysis.single.detail == {**op.detail, "dim_attr": None}


def test_dim_read_from_the_module(tmp_path):
    ops, _ = check_chain(tmp_path, "return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)",
                         "self.dim = 1", [[(3, 40)], [(2, 2500)]], single=True)
    assert ops[0].detail["dim_attr"] == "dim" and ops[0].detail["reverse"]


@pytest.mark.parametrize("forward", ["return x.flip(1)", "return torch.relu(x.flip(1))",
                                     "return torch.cumsum(x.flip(1), dim=0).flip(1)",
                                     "return torch.cumsum(x.flip(1), dim=1)",
                                     "return torch.cumsum(x.flip(1), dim=1).flip(0)"])
def test_other_flips_are_refused(forward, tmp_path):
    analysis = analyze(write(tmp_path, forward))
    assert analysis.single is None and analysis.chain is None, analysis
    assert "flip" in analysis.unsupported or not analysis.ops, analysis


def test_flip_back_without_a_scan_keeps_the_chain(tmp_path):
    ops, _ = check_chain(tmp_path, "return torch.relu(x.flip(1).flip(1)) * 2.0", "", [[(3, 7)], [(2, 50)]],
                         single=True)
    assert ops[0].kind == "elementwise"
