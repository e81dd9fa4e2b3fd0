"""What analyze() reads out of channel norms: the suite problems (one Op each, and the first move's kernel right on
their small sizes), the nn.* and F.* spellings, and what it must refuse, by name."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.problems.problem import Problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from tests.propose.builtin.kernel_check import moves, render
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute
from tests.propose.builtin.test_analyze import write

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NORM = {"eps": 1e-5, "eps_attr": "norm.eps", "weight": None, "bias": None}
SUITE = {
    "batchnorm2d": ("batchnorm", {"eps": 1e-5, "eps_attr": "eps", "weight": "weight", "bias": "bias",
                                  "running_mean": "running_mean", "running_var": "running_var"}),
    "instancenorm": ("instancenorm", {**NORM, "spatial": 2}),
    "groupnorm": ("groupnorm", {"groups": 3, "groups_attr": "norm.num_groups", **NORM, "weight": "norm.weight",
                                "bias": "norm.bias"}),  # groups of the small sizes; the kernel reads norm.num_groups
}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems_give_their_single_op(name):
    analysis = analyze(load_problem(f"level1/{name}"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == SUITE[name]
    assert analysis.n_inputs == 1


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_problems_end_to_end_with_their_first_move(name, tmp_path):
    """Analysis, the first move's kernel and the problem's own small inputs, in eval mode like the verifier."""
    problem = load_problem(f"level1/{name}")
    op = analyze(problem).single
    source = render(op, problem.source, moves(op)[0].params)
    assert_no_torch_compute(source)
    path = tmp_path / f"{name}_candidate.py"
    path.write_text(source)
    module = Problem(name, path, source).load(small=True)
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).to(DEVICE).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).to(DEVICE).eval()
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) for t in module.get_inputs()]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), ref(*inputs), rtol=1e-4, atol=1e-4)


def test_the_proposer_covers_the_suite_norms():
    engineer = BuiltinProposer("cpu")
    for name in SUITE:
        op = engineer.coverage(load_problem(f"level1/{name}"), "triton").single
        assert op is not None and engineer.moves(op, "triton")



X4 = "[torch.randn(2, 4, 5, 5)]"


def bn(prefix="bn.", eps=1e-5, eps_attr="bn.eps", affine=True):
    return "batchnorm", {"eps": eps, "eps_attr": eps_attr, "weight": f"{prefix}weight" if affine else None,
                         "bias": f"{prefix}bias" if affine else None, "running_mean": f"{prefix}running_mean",
                         "running_var": f"{prefix}running_var"}


def norm_op(tmp_path, forward, init, inputs=X4):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs))
    assert analysis.single is not None, analysis
    return analysis.single.kind, analysis.single.detail


@pytest.mark.parametrize("forward, init, inputs, want", [
    ("return self.bn(x)", "self.bn = nn.BatchNorm2d(4)", X4, bn()),  # modules run .eval() in the verifier
    ("return self.bn(x)", "self.bn = nn.BatchNorm1d(4, eps=1e-3, affine=False)", "[torch.randn(3, 4)]",
     bn(eps=1e-3, affine=False)),
    ("return self.bn(x)", "self.bn = nn.BatchNorm3d(4)\nself.bn.eval()", "[torch.randn(2, 4, 3, 3, 3)]", bn()),
    ("return F.batch_norm(x, self.rm, self.rv, eps=1e-4)",
     "self.register_buffer('rm', torch.zeros(4))\nself.register_buffer('rv', torch.ones(4))", X4,
     ("batchnorm", {"eps": 1e-4, "eps_attr": None, "weight": None, "bias": None, "running_mean": "rm",
                    "running_var": "rv"})),
    ("return self.norm(x)", "self.norm = nn.InstanceNorm2d(4, affine=True)", X4,
     ("instancenorm", {**NORM, "weight": "norm.weight", "bias": "norm.bias", "spatial": 2})),
    ("return self.norm(x)", "self.norm = nn.InstanceNorm1d(4)", "[torch.randn(2, 4, 9)]",
     ("instancenorm", {**NORM, "spatial": 1})),
    ("return F.instance_norm(x, eps=self.eps)", "self.eps = 1e-3", X4,
     ("instancenorm", {"eps": 1e-3, "eps_attr": "eps", "weight": None, "bias": None, "spatial": None})),
    ("return self.norm(x)", "self.norm = nn.GroupNorm(2, 4, affine=False)", X4,
     ("groupnorm", {"groups": 2, "groups_attr": "norm.num_groups", **NORM})),
    ("return F.group_norm(x, self.groups, self.w, self.b, self.eps)",
     "self.groups = 2\nself.eps = 1e-6\nself.w = nn.Parameter(torch.ones(4))\nself.b = nn.Parameter(torch.zeros(4))",
     X4, ("groupnorm", {"groups": 2, "groups_attr": "groups", "eps": 1e-6, "eps_attr": "eps", "weight": "w",
                        "bias": "b"})),
    ("return F.group_norm(x, 4)", "", X4,
     ("groupnorm", {"groups": 4, "groups_attr": None, "eps": 1e-5, "eps_attr": None, "weight": None, "bias": None})),
])
def test_channel_norm_spellings(tmp_path, forward, init, inputs, want):
    assert norm_op(tmp_path, forward, init, inputs) == want


@pytest.mark.parametrize("forward, init, missing", [
    ("return F.batch_norm(x, self.rm, self.rv, training=True)",
     "self.register_buffer('rm', torch.zeros(4))\nself.register_buffer('rv', torch.ones(4))", "batch_norm (training)"),
    ("return F.batch_norm(x, None, None, training=False)", "", "batch_norm (training)"),
    ("return self.bn(x)", "self.bn = nn.BatchNorm2d(4, track_running_stats=False)", "batch_norm (training)"),
    ("return self.norm(x)", "self.norm = nn.InstanceNorm2d(4, track_running_stats=True)",
     "instance_norm (running stats)"),
    ("return F.instance_norm(x, self.rm, self.rv)",
     "self.register_buffer('rm', torch.zeros(4))\nself.register_buffer('rv', torch.ones(4))",
     "instance_norm (running stats)"),
    ("return F.group_norm(x, 2, x.mean(0).mean(-1).mean(-1))", "", "group_norm"),  # a computed weight
])
def test_channel_norms_refused_by_name(tmp_path, forward, init, missing):
    analysis = analyze(write(tmp_path, forward, init, inputs=X4))
    assert analysis.single is None and analysis.error is None
    assert missing in analysis.unsupported, analysis.unsupported
