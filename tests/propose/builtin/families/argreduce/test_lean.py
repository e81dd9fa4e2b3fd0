"""The lean arg-reduction kernel (ArgTiles.lean): NaN carried in the running value, each slot started at its own
first row, rows masked only in a ragged last tile. Against torch at odd shapes (R and inner past and short of the
tiles, size-1 dims), on every lean move and on lean variants forced onto the split path and tiny tiles, with the
values that decide ties: NaN first, last and twice, all -inf and all +inf columns, +inf beside NaN, -0.0 beside 0.0.

Without a GPU the kernels run in Triton's interpreter (conftest.py)."""

import pytest
import torch

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.families.argreduce import ArgTiles
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.families.rows.test_columns import _compile_loads, _plan
from tests.propose.builtin.kernel_check import DEVICE, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# the first three lean moves (test_kernels.py runs every move at its cases, ties and NaNs included)
LEAN = [m.params for m in moves(Op("argreduce", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False}))
        if m.params.lean][:3]
# forced paths: tiny tiles (a ragged last tile at most sizes, several column blocks), and the split path (PARTIAL
# lean partials combined by the tiled kernel's GATHER pass)
FORCED = [ArgTiles(ROW_MAX=0, BLOCK_R=8, TILE=64, lean=True),
          ArgTiles(ROW_MAX=0, BLOCK_R=16, TILE=256, split_target=4096, lean=True, num_warps=2)]
PARAMS = LEAN + FORCED
SHAPES = [(1, 1, 1), (3, 1, 5), (2, 33, 1), (3, 70, 5), (2, 301, 37), (1, 1100, 2), (4, 9, 300)]
SMALL = [(1, 1, 1), (2, 33, 1), (3, 70, 5), (1, 301, 3), (2, 9, 40)]  # the forced tiny tiles: many programs
# every params set over a middle dim and over all elements; the first lean move over the first and last dims too
CASES = [(i, kind, dim, keep) for i in range(len(PARAMS)) for kind in ("argmax", "argmin")
         for dim, keep in ((1, False), (None, False)) + (((0, True), (2, False)) if i == 0 else ())]


def special(shape: tuple[int, int, int], seed: int) -> torch.Tensor:
    """Values over [outer, R, inner] with many ties and the deciding values along R in several columns."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=g).float()
    outer, r, inner = shape
    cols = [(o, i) for o in range(outer) for i in range(inner)]
    last = r - 1
    plans = [{0: "nan"}, {last: "nan"}, {r // 2: "nan", last: "nan"}, "-inf", "+inf", {0: "inf", last: "nan"},
             {0: "nan", last: "inf"}, "zeros", {last: "big"}]
    for (o, i), plan in zip(cols, plans):
        if plan == "-inf":
            x[o, :, i] = -float("inf")
        elif plan == "+inf":
            x[o, :, i] = float("inf")
        elif plan == "zeros":  # -0.0 == 0.0: ties
            x[o, :, i] = torch.where(torch.arange(r) % 2 == 0, -0.0, 0.0)
        else:
            for row, v in plan.items():
                x[o, row, i] = {"nan": float("nan"), "inf": float("inf"), "big": 9.0}[v]
    return x


@pytest.mark.parametrize("case", range(len(CASES)))
def test_lean_matches_torch_at_odd_shapes_and_special_values(case, tmp_path):
    params, kind, dim, keep = CASES[case]
    op = Op("argreduce", {"op": kind, "dim": dim, "dim_attr": None, "keepdim": keep})
    mod = load(render(op, reference(f"torch.{kind}(x, {dim}, keepdim={keep})"), PARAMS[params]), tmp_path)
    for n, shape in enumerate(SHAPES if params < len(LEAN) else SMALL):
        for x in (special(shape, n), -special(shape, n)):
            x = x.to(DEVICE)
            want = getattr(torch, kind)(x, dim, keepdim=keep)
            got = mod.ModelNew()(x)
            assert torch.equal(got, want), (kind, dim, shape, got, want)


def test_lean_moves_come_first_and_keep_the_tiled_ones():
    ms = moves(Op("argreduce", {"op": "argmin", "dim": 0, "dim_attr": None, "keepdim": False}))
    lean = [m.params.lean for m in ms]
    assert lean[:3] == [True] * 3 and lean.count(False) == 1 and ms[lean.index(False)].params == ArgTiles()
    assert {m.params.num_warps for m in ms if m.params.lean} == {4, 8, 16}


def test_lean_falls_back_to_the_tiled_kernel_where_int32_offsets_could_overflow():
    op = Op("argreduce", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False})
    source = render(op, reference("torch.argmax(x, 1)"), LEAN[0])
    assert "if br * inner + bc < 2 ** 31:" in source and "kc_argmax_kernel[(tiles, 1)]" in source


def test_lean_loads_stay_vectors_where_the_columns_allow(tmp_path, monkeypatch):
    """As the tiled kernel's: 16-byte loads over a middle dim whose inner size is a multiple of 4 and along rows
    whose length is, one load per element with an odd inner size (KernelBench's 51 / 52)."""
    op = Op("argreduce", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False})
    blocks = registry.parts(op, LEAN[0]).blocks
    lean = next(b for b in blocks if getattr(b, "name", "").startswith("kc_argmax_lean"))
    plan = _plan()
    vector, scalar = "ld.global.v4.b32", "ld.global.b32"
    for (outer, R, inner), want in (((128, 64, 254 * 254), vector), ((8192, 254 * 254, 1), vector),
                                    ((128, 4096, 4095), scalar)):
        br, bc, within, n_cb, _, _, _, vr, vi = plan(outer, R, inner, 16384, 1024, 4096, 256, 2048, 4)
        consts = {"BLOCK_R": br, "BLOCK_C": bc, "PARTIAL": False, "WITHIN": within, "VEC_R": vr, "VEC_I": vi}
        if inner == 1:
            consts.update(inner_v=1, n_cb=1)  # Triton specializes arguments equal to 1 as constants
        assert _compile_loads(lean, consts, tmp_path, monkeypatch) == {want}, (outer, R, inner)
