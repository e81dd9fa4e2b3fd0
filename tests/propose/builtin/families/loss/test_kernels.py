"""The loss family (mse / l1 / smooth_l1 / huber, cross-entropy): every move rendered and run against torch on
awkward shapes, every reduction, ignore_index present in the targets, hyper-parameters read from the module.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import json

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves, render
from tests.propose.builtin.kernel_check import DEVICE, HEAD, assert_no_torch_compute, load

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter


def reference2(expr: str, init: str = "self", body: str = "") -> str:
    """A small two-input reference: forward(self, a, b) returns `expr`."""
    return (HEAD + f"class Model(nn.Module):\n    def __init__({init}):\n        super().__init__()\n"
            + "".join(f"        {line}\n" for line in body.split("\n") if line)
            + f"\n    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:\n        return {expr}\n")


def check2(op: Op, ref_src: str, params: dict, cases: list, tmp_path, rtol=1e-5, atol=1e-5):
    """Like kernel_check.check with two inputs: each case is (init args, a, b)."""
    source = render(op, ref_src, params)
    assert source.startswith(ref_src.rstrip()) and "a, b = a, b" in source
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    for init, a, b in cases:
        a, b = a.to(DEVICE), b.to(DEVICE)
        ref, new = module.Model(*init).to(DEVICE), module.ModelNew(*init).to(DEVICE)
        with torch.no_grad():
            want, got = ref(a, b), new(a, b)
            again = new(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype, (a.shape, got.shape, want.shape)
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{op} {params} {tuple(a.shape)}: {m}")
        assert torch.equal(got, again) or (got.isnan().all() and again.isnan().all())  # deterministic


def randn(*shape, scale=1.0, seed=0):
    torch.manual_seed(seed)
    return torch.randn(shape) * scale


@pytest.mark.parametrize("op", [Op("loss", {"fn": "mse", "reduction": r, "param": None, "param_attr": None})
                                for r in ("mean", "none")]
                         + [Op("cross_entropy", {"reduction": r, "ignore_index": -100, "ignore_index_attr": None})
                            for r in ("mean", "none")], ids=lambda op: f"{op.kind}-{op.detail['reduction']}")
def test_moves_are_distinct_categorized_and_json(op):
    ms = moves(op)
    assert 3 <= len(ms) <= 6
    assert len({m.text for m in ms}) == len(ms)
    assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
    assert all(m.category in CATEGORIES for m in ms)


# ---------------------------------------------------------------- pointwise losses

LOSS_SHAPES = [(3, 17), (1,), (2, 3, 130), (5, 1000), (20001,)]
TORCH_LOSS = {"mse": "F.mse_loss", "l1": "F.l1_loss", "smooth_l1": "F.smooth_l1_loss", "huber": "F.huber_loss"}


def loss_cases(shapes, init=()):
    return [(init, randn(*s, scale=2.0, seed=i), randn(*s, seed=i + 100)) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("params", [m.params for m in moves(Op("loss", {"fn": "mse", "reduction": "mean"}))],
                         ids=ident)
def test_loss_moves(params, tmp_path):
    for fn, reduction in (("mse", "mean"), ("l1", "sum"), ("mse", "none")):
        op = Op("loss", {"fn": fn, "reduction": reduction, "param": None, "param_attr": None})
        ref = reference2(f"{TORCH_LOSS[fn]}(a, b, reduction='{reduction}')")
        check2(op, ref, params, loss_cases(LOSS_SHAPES), tmp_path)
    op = Op("loss", {"fn": "smooth_l1", "reduction": "mean", "param": 1.0, "param_attr": "beta"})
    ref = reference2("F.smooth_l1_loss(a, b, beta=self.beta)", "self, beta", "self.beta = beta")
    check2(op, ref, params, loss_cases(LOSS_SHAPES[:3], (0.5,)) + loss_cases(LOSS_SHAPES[3:], (0.0,)), tmp_path)


@pytest.mark.parametrize("fn, expr, param, param_attr, init", [
    ("huber", "F.huber_loss(a, b, delta=0.7, reduction='{r}')", 0.7, None, ""),
    ("huber", "self.crit(a, b)", 1.3, "crit.delta", "self.crit = nn.HuberLoss(reduction='{r}', delta=1.3)"),
    ("smooth_l1", "self.crit(a, b)", 0.25, "crit.beta", "self.crit = nn.SmoothL1Loss(reduction='{r}', beta=0.25)"),
    ("l1", "self.crit(a, b)", None, None, "self.crit = nn.L1Loss(reduction='{r}')"),
    ("mse", "self.crit(a, b)", None, None, "self.crit = nn.MSELoss(reduction='{r}')"),
])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_loss_kinds_and_reductions(fn, expr, param, param_attr, init, reduction, tmp_path):
    op = Op("loss", {"fn": fn, "reduction": reduction, "param": param, "param_attr": param_attr})
    ref = reference2(expr.format(r=reduction), "self", init.format(r=reduction))
    check2(op, ref, {}, loss_cases([(7, 33), (1, 1), (4099,)]), tmp_path)


def test_loss_empty_and_half(tmp_path):
    for reduction in ("mean", "sum", "none"):
        op = Op("loss", {"fn": "mse", "reduction": reduction, "param": None, "param_attr": None})
        check2(op, reference2(f"F.mse_loss(a, b, reduction='{reduction}')"), {},
               [((), torch.zeros(0, 5), torch.zeros(0, 5))], tmp_path)
    op = Op("loss", {"fn": "l1", "reduction": "mean", "param": None, "param_attr": None})
    check2(op, reference2("F.l1_loss(a, b)"), {}, [((), randn(9, 301).half(), randn(9, 301, seed=1).half())],
           tmp_path, rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- cross-entropy

def targets(shape, classes, ignore=None, seed=0):
    torch.manual_seed(seed)
    t = torch.randint(0, classes, shape)
    if ignore is not None and t.numel() > 1:
        t.view(-1)[::3] = ignore  # every third target ignored
    return t


CE_CASES = [  # (logits shape, targets shape)
    ((37, 101), (37,)), ((1, 1), (1,)), ((3, 20000), (3,)), ((2, 5, 3, 4), (2, 3, 4)), ((7,), ()), ((5, 3, 1), (5, 1)),
]


def ce_cases(ignore, init=(), scale=3.0):
    return [(init, randn(*ls, scale=scale, seed=i), targets(ts, ls[1] if len(ls) > 1 else ls[0], ignore, seed=i))
            for i, (ls, ts) in enumerate(CE_CASES)]


@pytest.mark.parametrize("params", [m.params for m in moves(Op("cross_entropy", {"reduction": "mean"}))],
                         ids=ident)
def test_cross_entropy_moves(params, tmp_path):
    for reduction in ("mean", "sum", "none"):
        op = Op("cross_entropy", {"reduction": reduction, "ignore_index": -100, "ignore_index_attr": None})
        check2(op, reference2(f"F.cross_entropy(a, b, reduction='{reduction}')"), params, ce_cases(-100), tmp_path)
    op = Op("cross_entropy", {"reduction": "mean", "ignore_index": 0, "ignore_index_attr": "ignore"})
    ref = reference2("F.cross_entropy(a, b, ignore_index=self.ignore)", "self, ignore", "self.ignore = ignore")
    check2(op, ref, params, ce_cases(2, (2,)) + ce_cases(None, (0,), scale=40.0), tmp_path, atol=1e-4)


def test_cross_entropy_module_all_ignored_and_empty(tmp_path):
    for reduction in ("mean", "sum", "none"):
        op = Op("cross_entropy", {"reduction": reduction, "ignore_index": 1, "ignore_index_attr": "crit.ignore_index"})
        ref = reference2("self.crit(a, b)", "self", f"self.crit = nn.CrossEntropyLoss(ignore_index=1, "
                                                    f"reduction='{reduction}')")
        all_ignored = torch.ones(4, dtype=torch.long)  # mean: 0 / 0 = NaN, like torch
        check2(op, ref, {}, [((), randn(4, 9), all_ignored), ((), randn(0, 9), torch.zeros(0, dtype=torch.long)),
                             ((), randn(6, 9), targets((6,), 9, 1))], tmp_path)


def test_cross_entropy_half(tmp_path):
    op = Op("cross_entropy", {"reduction": "mean", "ignore_index": -100, "ignore_index_attr": None})
    check2(op, reference2("F.cross_entropy(a, b)"), {}, [((), randn(33, 257, scale=4.0).half(), targets((33,), 257))],
           tmp_path, rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- kl_div of two logit tensors

KL_CASES = {-1: [(37, 101), (1, 1), (3, 20000), (7,)], 1: [(2, 5, 7), (3, 1, 4)], 0: [(6, 5)]}


def kl_ref(dim: int, reduction: str) -> str:
    return reference2(f"F.kl_div(F.log_softmax(a, dim={dim}), F.log_softmax(b, dim={dim}), reduction='{reduction}', "
                      "log_target=True)")


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")
@pytest.mark.parametrize("params", [m.params for m in moves(Op("kl_div_logits", {"dim": -1}))],
                         ids=ident)
def test_kl_div_logits_moves(params, tmp_path):
    for reduction in ("batchmean", "sum", "mean"):
        for dim, shapes in KL_CASES.items():
            cases = [((), randn(*s, scale=3.0, seed=i), randn(*s, scale=0.5 + i, seed=i + 7))
                     for i, s in enumerate(shapes)]
            check2(Op("kl_div_logits", {"dim": dim, "reduction": reduction}), kl_ref(dim, reduction), params, cases,
                   tmp_path, atol=1e-5, rtol=1e-4)


def test_kl_div_logits_of_equal_inputs_is_zero(tmp_path):
    a = randn(5, 300, scale=4.0)
    check2(Op("kl_div_logits", {"dim": -1, "reduction": "batchmean"}), kl_ref(-1, "batchmean"), {},
           [((), a, a.clone())], tmp_path, atol=1e-6)
