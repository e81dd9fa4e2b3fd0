"""Parameter operands in the channel norms' epilogues (x * self.scale, x + self.bias after a batchnorm, groupnorm or
instancenorm): folded into the norm by analyze(), read by its kernels over (n, channel, flat spatial) and broadcast
by torch's rules (per channel, one value, along the spatial dims, one that varies along some spatial dims only and
is expanded first), on every move and on odd shapes taking each kernel path (flat tiles and planes; slabs in
registers and split), against the reference."""

import pytest

from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import moves

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

FORWARD = "x = self.norm(x) * self.a\nreturn x * torch.sigmoid(x) + self.b"  # x * sigmoid(x): an own earlier value too
STEPS = [["tmul", ("attr", "a")], ["sigmoid"], ["tmul", ("step", 1)], ["tadd", ("attr", "b")]]
STATS = "\nself.norm.eval()\nwith torch.no_grad():\n    self.norm.running_mean.normal_()\n" \
        "    self.norm.running_var.uniform_(0.5, 1.5)\n    self.norm.weight.normal_()\n    self.norm.bias.normal_()"
NORMS = {  # kind -> (its module, input cases: two short, one long (planes; split slabs))
    "batchnorm": ("nn.BatchNorm2d(6)" + STATS, [[(2, 6, 5, 7)], [(1, 6, 3, 7)], [(1, 6, 150, 7)]]),
    "groupnorm": ("nn.GroupNorm(3, 6)", [[(2, 6, 5, 7)], [(1, 6, 3, 7)], [(1, 6, 1200, 7)]]),
    "instancenorm": ("nn.InstanceNorm2d(6, affine=True)", [[(2, 6, 5, 7)], [(1, 6, 3, 7)], [(1, 6, 2400, 7)]]),
}
OPERANDS = [((6, 1, 1), (1,)), ((), (6, 1, 1)), ((1, 6, 1, 7), (7,)), ((6, 1, 1), (6, 1, 7)), ((1,), ()),
            ((1, 6, 1, 1), (1, 1, 7))]


def params(module: str, a: tuple, b: tuple) -> str:
    return (f"self.norm = {module}\nself.a = nn.Parameter(torch.randn({a!r}))\n"
            f"self.b = nn.Parameter(torch.randn({b!r}))")


MOVES = {"batchnorm": 5, "groupnorm": 6, "instancenorm": 6}  # each kind's moves


@pytest.mark.parametrize("kind, move", [(kind, m) for kind in NORMS for m in range(MOVES[kind])])
def test_every_move_folds_and_reads_the_operands(kind, move, tmp_path):
    module, cases = NORMS[kind]
    assert len(moves(Op(kind, {}))) == MOVES[kind]
    a, b = OPERANDS[move]  # (1, 6, 1, 7), (7,) and (6, 1, 7) vary along W only: expanded to the output first
    ops, source = check_chain(tmp_path, FORWARD, params(module, a, b), cases, move=move, single=True)
    assert ops[0].kind == kind and ops[0].detail["steps"] == STEPS
    assert "kc_operand_args" in source and "kc_bcast_kernel" not in source


@pytest.mark.parametrize("kind", list(NORMS))
def test_operands_along_the_whole_spatial_run_read_it_flat(kind, tmp_path):
    module, _ = NORMS[kind]
    check_chain(tmp_path, FORWARD, params(module, (5, 7), (6, 5, 7)), [[(2, 6, 5, 7)], [(1, 6, 5, 7)]], single=True)


@pytest.mark.parametrize("forward, init, cases, steps", [
    # 84 and 97 of KernelBench level 2: a batchnorm over (N, C) scaled by a one-value parameter
    ("return self.norm(x) * self.s", "self.norm = nn.BatchNorm1d(9)" + STATS + "\nself.s = nn.Parameter(torch.randn(1))",
     [[(5, 9)], [(1, 9)]], [["tmul", ("attr", "s")]]),
    ("x = (self.norm(x) + self.s) / 2.0\nreturn x * torch.sigmoid(x)",
     "self.norm = nn.BatchNorm1d(9)" + STATS + "\nself.s = nn.Parameter(torch.randn(1))",
     [[(5, 9)], [(3, 9, 4)]], [["tadd", ("attr", "s")], ["div", 2.0], ["silu"]]),
    # 88: a groupnorm over (N, C) times one weight per feature between two swishes
    ("x = self.norm(x)\nx = x * torch.sigmoid(x) * self.w\nreturn x * torch.sigmoid(x)",
     "self.norm = nn.GroupNorm(4, 12)\nself.w = nn.Parameter(torch.randn(12))", [[(5, 12)], [(1, 12)]],
     [["silu"], ["tmul", ("attr", "w")], ["sigmoid"], ["tmul", ("step", 2)]]),
    # 79: an instance norm over (N, C, D, H, W), clamped, times a per-channel multiplier; unbatched too
    ("return torch.clamp(self.norm(x), -1.0, 1.0) * self.m",
     "self.norm = nn.InstanceNorm3d(4)\nself.m = nn.Parameter(torch.randn(4, 1, 1, 1))",
     [[(2, 4, 3, 5, 7)], [(4, 3, 2, 5)]], [["clamp", -1.0, 1.0], ["tmul", ("attr", "m")]]),
])
def test_the_upstream_spellings_fold(forward, init, cases, steps, tmp_path):
    ops, _ = check_chain(tmp_path, forward, init, cases, single=True)
    assert ops[0].detail["steps"] == steps
