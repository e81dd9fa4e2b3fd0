"""The channel-norm family (batchnorm in eval mode, groupnorm, instancenorm): every move rendered and run against
torch on 0-D to 3-D spatial inputs with odd sizes, groups that are not the channels, affine on and off, slabs long
enough (or a row limit small enough) to take the split path; the pointwise steps after a norm as its epilogue.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import json

import pytest
import torch

from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import ident, moves
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import Launches, check, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's NaN/inf notes from the interpreter

BN = Op("batchnorm", {"eps": 1e-5, "eps_attr": "eps", "weight": "weight", "bias": "bias",
                      "running_mean": "running_mean", "running_var": "running_var"})
GN = Op("groupnorm", {"groups": 3, "groups_attr": "norm.num_groups", "eps": 1e-5, "eps_attr": "norm.eps",
                      "weight": "norm.weight", "bias": "norm.bias"})


@pytest.mark.parametrize("op", [BN, GN, Op("instancenorm", {})], ids=lambda op: op.kind)
def test_moves_are_distinct_categorized_and_json(op):
    ms = moves(op)
    assert 3 <= len(ms) <= 6
    assert len({m.text for m in ms}) == len(ms)
    assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
    assert all(m.category in CATEGORIES for m in ms)


# ---------------------------------------------------------------- batchnorm (eval)

BN_REF = reference(  # the suite's spelling: F.batch_norm over buffers and parameters of the model
    "F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, training=False, eps=self.eps)",
    "self, c, eps", "self.eps = eps\nself.weight = nn.Parameter(1.0 + 0.3 * torch.randn(c))\n"
    "self.bias = nn.Parameter(0.3 * torch.randn(c))\nself.register_buffer('running_mean', torch.randn(c))\n"
    "self.register_buffer('running_var', 0.2 + torch.rand(c))")
BN_CASES = [((5, 1e-5), (3, 5)), ((5, 1e-3), (2, 5, 7)), ((3, 1e-5), (2, 3, 33, 37)), ((1, 1e-5), (1, 1, 1, 1)),
            ((4, 0.1), (2, 4, 3, 5, 7)), ((2, 1e-5), (1, 2, 2100))]


@pytest.mark.parametrize("params", [m.params for m in moves(BN)], ids=ident)
def test_batchnorm_moves(params, tmp_path):
    check(BN, BN_REF, params, BN_CASES, tmp_path)


@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_modules_without_affine_and_long_planes(affine, tmp_path):
    body = (f"self.bn = nn.BatchNorm2d(c, eps=1e-3, affine={affine})\nself.bn.eval()\nwith torch.no_grad():\n"
            "    self.bn.running_mean.normal_()\n    self.bn.running_var.uniform_(0.5, 2.0)")
    op = Op("batchnorm", {"eps": 1e-3, "eps_attr": "bn.eps", "weight": "bn.weight" if affine else None,
                          "bias": "bn.bias" if affine else None, "running_mean": "bn.running_mean",
                          "running_var": "bn.running_var"})
    ref = reference("self.bn(x)", "self, c", body)
    for params in ({}, {"BLOCK": 16, "num_warps": 1, "planes": True}):  # 16-element tiles: planes loop past 1024
        check(op, ref, params, [((3,), (2, 3, 5, 7)), ((1,), (1, 1, 1, 20000))], tmp_path)
    check(op, ref, {}, [((3,), (2, 3, 9, 11))], tmp_path, rtol=2e-3, atol=2e-3, dtype=torch.float16)


# ---------------------------------------------------------------- groupnorm / instancenorm

def gn_ref(affine: bool) -> str:
    body = f"self.norm = nn.GroupNorm(g, c, eps=eps, affine={affine})"
    if affine:
        body += "\nwith torch.no_grad():\n    self.norm.weight.normal_()\n    self.norm.bias.normal_()"
    return reference("self.norm(x)", "self, g, c, eps", body)


GN_CASES = [((3, 6, 1e-5), (2, 6, 7)), ((2, 6, 1e-3), (2, 6, 5, 3)), ((4, 4, 1e-5), (1, 4, 2, 3, 5)),
            ((3, 6, 1e-5), (3, 6)), ((2, 2, 1e-5), (2, 2, 1)), ((1, 2, 1e-5), (1, 2, 130, 131), 3.0)]


@pytest.mark.parametrize("params", [m.params for m in moves(GN)], ids=ident)
def test_groupnorm_moves(params, tmp_path):
    check(GN, gn_ref(True), params, GN_CASES, tmp_path, atol=2e-5)


SPLIT = {"ROW_MAX": 64, "BLOCK_N": 16, "split_target": 64}  # small rows limit: odd slabs take the split path


@pytest.mark.parametrize("welford", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_groupnorm_split_slabs_cross_channels(affine, welford, tmp_path):
    op = Op("groupnorm", {**GN.detail, "weight": "norm.weight" if affine else None,
                          "bias": "norm.bias" if affine else None})
    cases = [((2, 6, 1e-5), (2, 6, 7, 5), 2.0), ((3, 9, 1e-5), (1, 9, 37)), ((1, 3, 1e-5), (2, 3, 70))]
    check(op, gn_ref(affine), {**SPLIT, "welford": welford}, cases, tmp_path)
    check(op, gn_ref(affine), {**SPLIT, "split_target": 0}, cases, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("wait", ["atomic", "load"])
@pytest.mark.parametrize("affine", [True, False])
def test_resident_slabs_on_the_gpu(affine, wait, tmp_path):
    """resident (the first move): long slabs split into chunks that programs running at once hold in registers,
    their statistics merged through a barrier. Slabs of one chunk, of several with a partial last one, channels that
    cross chunks, and more programs than the GPU holds at once (tickets wait for earlier slabs); the resident kernel
    is what ran. Only on a GPU: the interpreter runs programs one after another, so the forward never takes it."""
    from kernelcraft.propose.builtin.families.channel_norm.kernels import RESIDENT_CHUNK, RESIDENT_MAX_PARTS

    op = Op("groupnorm", {**GN.detail, "weight": "norm.weight" if affine else None,
                          "bias": "norm.bias" if affine else None})
    params = moves(GN)[0].params.but(resident_wait=wait)
    assert moves(GN)[0].params.resident and "barrier" in params.idea()
    most = min(RESIDENT_MAX_PARTS, torch.cuda.get_device_properties(0).multi_processor_count)
    cases = [((2, 6, 1e-5), (2, 6, 99, 101), 2.0),  # L = 29,997: one chunk a slab
             ((4, 8, 1e-5), (3, 8, 250, 257)),  # L = 128,500: four chunks and a partial fifth
             ((2, 4, 1e-5), (32, 4, 256, 257), 3.0),  # 64 slabs of 5 chunks: 320 programs, past the GPU's SMs
             ((2, 4, 1e-5), (2, 4, 512, 511)),  # L = 523,264: 16 chunks a slab
             ((1, 4, 1e-5), (3, 4, most * RESIDENT_CHUNK // 4 - 3))]  # as many chunks a slab as the GPU holds
    assert all(c[1][1] // c[0][0] * torch.Size(c[1][2:]).numel() > RESIDENT_CHUNK // 2 for c in cases)
    spy = Launches("kc_group_resident_kernel", "kc_group_apply_kernel", "kc_group_row_kernel")
    check(op, gn_ref(affine), params, cases, tmp_path, patch=spy, atol=2e-5)
    assert set(spy.seen) == {"kc_group_resident_kernel"}


def test_resident_waits_and_parts_as_parameters(tmp_path):
    """resident_wait and resident_parts: the rendered wait and limit (the resident kernel itself runs only on a GPU;
    here the forward takes the split path, checked against torch), and what is refused."""
    from kernelcraft.propose.builtin.families.channel_norm import GroupRows

    first = moves(GN)[0].params
    assert (first.resident_wait, first.resident_parts) == ("atomic", 132)
    params = first.but(resident_wait="load", resident_parts=16)
    assert "volatile loads" in params.idea() and "at most 16 programs" in params.idea()
    source = render(GN, gn_ref(True), params)
    assert "tl.load(arrived_ptr + row, volatile=True)" in source and "min(16, sms)" in source
    assert "volatile=True" not in render(GN, gn_ref(True), first) and "min(132, sms)" in render(GN, gn_ref(True), first)
    check(GN, gn_ref(True), params, [((2, 4, 1e-5), (2, 4, 30, 31))], tmp_path)
    with pytest.raises(ValueError, match="resident_wait"):
        GroupRows(resident=True, resident_wait="spin")
    with pytest.raises(ValueError, match="resident_parts"):
        GroupRows(resident=True, resident_parts=0)


def test_functional_group_norm_reads_groups_from_self(tmp_path):
    ref = reference("F.group_norm(x, self.groups, self.w, None, 1e-4)", "self, groups, c",
                    "self.groups = groups\nself.w = nn.Parameter(torch.randn(c))")
    op = Op("groupnorm", {"groups": 2, "groups_attr": "groups", "eps": 1e-4, "eps_attr": None, "weight": "w",
                          "bias": None})
    check(op, ref, {}, [((2, 4), (3, 4, 9)), ((4, 4), (2, 4, 3, 3))], tmp_path)


INSTANCE = {1: [(2, 3, 17), (3, 40)], 2: [(2, 3, 5, 7), (1, 1, 3, 1)], 3: [(1, 2, 3, 4, 5), (2, 3, 4, 5)]}


@pytest.mark.parametrize("params", [m.params for m in moves(Op("instancenorm", {}))] + [SPLIT],
                         ids=ident)
def test_instancenorm_moves_and_unbatched_inputs(params, tmp_path):
    for spatial, shapes in INSTANCE.items():  # the second shape of 1-D and 3-D is unbatched (C, *spatial)
        for affine in (False, True):
            body = f"self.norm = nn.InstanceNorm{spatial}d(shape[-{spatial + 1}], affine={affine}, eps=1e-4)"
            if affine:
                body += "\nwith torch.no_grad():\n    self.norm.weight.normal_()\n    self.norm.bias.normal_()"
            op = Op("instancenorm", {"eps": 1e-4, "eps_attr": "norm.eps", "weight": "norm.weight" if affine else None,
                                     "bias": "norm.bias" if affine else None, "spatial": spatial})
            check(op, reference("self.norm(x)", "self, shape", body), params, [((s,), s) for s in shapes], tmp_path)


def test_functional_instance_norm(tmp_path):
    op = Op("instancenorm", {"eps": 1e-5, "eps_attr": None, "weight": "w", "bias": "b", "spatial": None})
    ref = reference("F.instance_norm(x, weight=self.w, bias=self.b)", "self, c",
                    "self.w = nn.Parameter(torch.randn(c))\nself.b = nn.Parameter(torch.randn(c))")
    check(op, ref, {}, [((3,), (2, 3, 11)), ((2,), (1, 2, 4, 5))], tmp_path)


STATS = "\nself.norm.running_mean.normal_()\nself.norm.running_var.uniform_(0.5, 1.5)"


@pytest.mark.parametrize("forward, init, move", [
    ("x = self.norm(x)\nreturn x * torch.sigmoid(x)", "self.norm = nn.GroupNorm(2, 6)", 0),
    ("return torch.tanh(self.norm(x)) * 2.0", "self.norm = nn.GroupNorm(1, 6)", 3),  # long slabs: split, no partials
    ("return F.relu(self.norm(x))", "self.norm = nn.InstanceNorm2d(6)", 2),  # split finer
    ("return torch.relu(self.norm(x)) - 1.0", "self.norm = nn.BatchNorm2d(6)" + STATS, 0),
    ("return F.gelu(self.norm(x))", "self.norm = nn.BatchNorm2d(6)" + STATS, 1),  # planes
])
def test_channel_norms_take_the_steps_after_them(tmp_path, forward, init, move):
    ops, _ = check_chain(tmp_path, forward, init, [[(2, 6, 5, 7)], [(1, 6, 3, 1)], [(1, 6, 47, 93)]], move=move,
                         single=True)
    assert ops[0].detail["steps"]


def test_two_norms_in_a_chain_each_apply_their_own_steps(tmp_path):
    """Each norm's kernels under its op's names, each with the steps after it and the scalars they read."""
    ops, source = check_chain(
        tmp_path, "x = torch.relu(self.n1(x))\nreturn self.n2(x * 2.0) * self.scale",
        "self.n1 = nn.GroupNorm(2, 6)\nself.n2 = nn.InstanceNorm2d(6)\nself.scale = 0.5",
        [[(2, 6, 5, 7)], [(1, 6, 47, 93)]])
    assert [op.kind for op in ops] == ["groupnorm", "instancenorm"]
    assert ops[0].detail["steps"] == [["relu"], ["mul", 2.0]] and ops[1].detail["steps"] == [["mul", "self.scale"]]
    assert "def kc_group_row_kernel_op0(x_ptr," in source and "def kc_group_row_kernel_op1(kc_s_scale, x_ptr," in source
