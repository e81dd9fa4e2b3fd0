"""The reduce family's logsumexp, 2-norm (torch.norm) and its reductions over several adjacent dims: every move, at shapes that take the
plain, tiled and split paths, compared with torch; what analyze() reads of each spelling and what it refuses; chains
such as KernelBench's (a global average pool as a mean over (2, 3), a logsumexp after a linear). Without a GPU in
Triton's interpreter (conftest.py)."""


import pytest
import torch

from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves, render
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, check, load, reference
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

LSE_MOVES = [m.params for m in moves(Op("reduce", {"op": "logsumexp", "dim": 1, "dim_attr": None, "keepdim": False}))]
LSE_CASES = [  # (dim, keepdim, shapes, input scale)
    (1, False, [(3, 17), (2, 3000), (2, 37, 5)], 1.0), (-1, True, [(4, 2, 130), (1, 1)], 30.0),
    (0, False, [(3000, 3), (7, 5)], 5.0), (None, False, [(5, 1000)], 1.0),
]


@pytest.mark.parametrize("params", LSE_MOVES, ids=ident)
def test_logsumexp_moves(params, tmp_path):
    for dim, keep, shapes, scale in LSE_CASES:
        if dim is None:
            ref, detail_dim = reference("torch.logsumexp(x, dim=(0, 1))"), [0, 1]
        else:
            ref, detail_dim = reference(f"torch.logsumexp(x, dim={dim}, keepdim={keep})"), dim
        op = Op("reduce", {"op": "logsumexp", "dim": detail_dim, "dim_attr": None, "keepdim": keep})
        check(op, ref, params, [((), s, scale) for s in shapes], tmp_path, rtol=1e-5, atol=1e-5)


def test_logsumexp_infinities_and_nan(tmp_path):
    op = Op("reduce", {"op": "logsumexp", "dim": 1, "dim_attr": None, "keepdim": False})
    for params in (LSE_MOVES[0], {"split_target": 8192, "BLOCK_R": 16, "TILE": 64}):  # one pass; split partials
        module = load(render(op, reference("torch.logsumexp(x, dim=1)"), params), tmp_path)
        inf = float("inf")
        x = torch.randn(5, 300)
        x[0] = -inf  # all -inf: -inf
        x[1, 7] = inf  # +inf anywhere: +inf
        x[2, 200] = -inf  # one -inf: ignored
        x[3, 5] = float("nan")
        x[4] = 1e30  # large and equal: no overflow
        x = x.to(DEVICE)
        got, want = module.ModelNew()(x), torch.logsumexp(x, dim=1)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


SEVERAL = [  # (torch expression, detail op, dims, keepdim, shapes)
    ("torch.mean(x, dim=(2, 3), keepdim=True)", "mean", [2, 3], True, [(2, 3, 5, 7), (1, 2, 40, 60)]),
    ("x.mean(dim=[1, 2, 3, 4])", "mean", [1, 2, 3, 4], False, [(2, 3, 4, 5, 6), (3, 1, 2, 1, 9)]),
    ("torch.sum(x, dim=[1, 2, 3])", "sum", [1, 2, 3], False, [(2, 4, 3, 5), (5, 1, 1, 1)]),
    ("torch.amax(x, dim=(-2, -1))", "max", [-2, -1], False, [(3, 17, 9), (2, 3, 4, 5)]),
    ("torch.logsumexp(x, dim=(0, 1), keepdim=True)", "logsumexp", [0, 1], True, [(30, 40, 3), (5, 7)]),
    ("torch.norm(x, dim=(1, 2))", "norm2", [1, 2], False, [(3, 40, 50), (2, 5, 7, 3)]),
    ("torch.norm(x, p=2, dim=1, keepdim=True)", "norm2", 1, True, [(4, 3000), (3, 17, 5)]),
    ("x.norm(p='fro', dim=-1)", "norm2", -1, False, [(5, 33), (2, 2, 4100)]),
    ("torch.linalg.vector_norm(x, dim=(1, 2))", "norm2", [1, 2], False, [(3, 40, 50), (2, 5, 7, 3)]),
    ("torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True)", "norm2", -1, True, [(4, 3000), (3, 17, 5)]),
]


@pytest.mark.parametrize("expr,kind,dims,keep,shapes", SEVERAL, ids=[s[0] for s in SEVERAL])
def test_several_adjacent_dims(expr, kind, dims, keep, shapes, tmp_path):
    analysis = analyze(write(tmp_path, f"return {expr}", inputs=f"[torch.randn{shapes[0]}]"))
    assert analysis.single is not None, analysis
    assert analysis.single.kind == "reduce" and analysis.single.detail["op"] == kind
    assert analysis.single.detail["dim"] == dims and analysis.single.detail["keepdim"] == keep
    for params in [m.params for m in moves(analysis.single)][:3]:
        check(analysis.single, reference(expr), params, [((), s) for s in shapes], tmp_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("expr", ["torch.mean(x, dim=(1, 3))", "torch.sum(x, dim=(1, -1))", "torch.mean(x, dim=(1, 1))",
                                  "torch.logsumexp(x, dim=(0, 2))"])
def test_dims_that_are_not_adjacent_at_every_rank_are_refused(expr, tmp_path):
    analysis = analyze(write(tmp_path, f"return {expr}", inputs="[torch.randn(2, 3, 4, 5)]"))
    assert analysis.single is None and analysis.chain is None
    assert any("over several dims" in u for u in analysis.unsupported), analysis


def test_norms_other_than_the_2_norm_are_refused(tmp_path):
    for expr in ("torch.norm(x, p=1, dim=1)", "torch.norm(x, p=float('inf'))", "torch.norm(x, p='nuc')",
                 "torch.linalg.vector_norm(x, ord=1, dim=1)", "torch.linalg.vector_norm(x, 3)"):
        analysis = analyze(write(tmp_path, f"return {expr}"))
        assert analysis.single is None and any("norm" in u for u in analysis.unsupported), (expr, analysis)


def test_logsumexp_spellings(tmp_path):
    for expr in ("torch.logsumexp(x, 1)", "x.logsumexp(dim=1)", "torch.logsumexp(x, dim=[1])"):
        analysis = analyze(write(tmp_path, f"return {expr}"))
        assert analysis.single is not None, (expr, analysis)
        assert analysis.single.detail == {"op": "logsumexp", "dim": 1, "dim_attr": None, "keepdim": False}


@pytest.mark.parametrize("forward,init,cases", [
    ("x = self.fc(x)\nreturn torch.relu(torch.logsumexp(x, dim=1, keepdim=True))", "self.fc = nn.Linear(30, 70)",
     [[(4, 30)], [(1, 30)]]),
    ("x = self.conv(x)\nx = torch.mean(x, dim=(2, 3), keepdim=True) + 0.5\nreturn torch.logsumexp(x, dim=1)",
     "self.conv = nn.Conv2d(3, 6, 3)", [[(2, 3, 9, 10)], [(1, 3, 5, 5)]]),
    ("x = self.conv(x)\nreturn x.mean(dim=[2, 3, 4]) * 2.0", "self.conv = nn.Conv3d(2, 4, 3)",
     [[(2, 2, 5, 6, 7)], [(1, 2, 4, 4, 4)]]),
    ("return x / torch.norm(x, p='fro')", "", [[(3, 5, 40, 7)], [(2, 9)]]),
    ("return x / torch.norm(x, p=2, dim=1, keepdim=True)", "", [[(6, 3000)], [(3, 7)]]),
    ("return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)", "", [[(6, 3000)], [(3, 7)]]),
], ids=["linear-logsumexp-relu", "conv-globalavg-logsumexp", "conv3d-mean-dhw", "frobenius", "l2-rows",
        "vector-norm-rows"])
def test_in_chains(forward, init, cases, tmp_path):
    ops, _ = check_chain(tmp_path, forward, init, cases)
    assert len(ops) >= 2 and ops[-1].kind in ("reduce", "elementwise")
