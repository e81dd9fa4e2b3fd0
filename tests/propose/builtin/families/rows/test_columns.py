"""Reductions over a leading or middle dim on adjacent columns of one outer index (columns.py's kc_plan and PLACE):
every reduce kind and argmax / argmin, at shapes that take the within, packed and row placements, a partial last
column block, every vector width (inner and R multiples of 4, of 2, odd), one outer index, inner 1, negative dims,
keepdim and split R; the plan's choices at KernelBench's sizes; and, where Triton can compile for a GPU here, that
the within placement's loads are vector loads. Without a GPU in Triton's interpreter (conftest.py)."""

import re

import pytest
import torch
import triton

from kernelcraft.propose.builtin.columns import PLAN, TILES
from kernelcraft.propose.builtin.families.rows.kernels import reduce_kernel
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import DEVICE, check, ident, load, moves, reference, render

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TORCH = {"sum": "torch.sum", "mean": "torch.mean", "max": "torch.amax", "min": "torch.amin",
         "logsumexp": "torch.logsumexp", "norm2": "torch.linalg.vector_norm"}
SMALL = {"BLOCK_R": 8, "TILE": 256, "COLUMNS": 16}  # small tiles: several column blocks, R tiles and splits
# (dim, keepdim, shapes): within (inner 300, 302, 301 past one 256- or 16-wide block), packed (inner 2, short R),
# rows (inner 1, R a multiple of 4 and odd), one outer index, a size-1 reduced dim
CASES = [(1, False, [(3, 40, 300), (2, 33, 302), (1, 70, 301), (2, 5, 2)]),
         (-2, True, [(5, 17, 36), (1, 1, 40)]),
         (0, False, [(50, 33), (3, 1)]),
         (-1, True, [(3, 5, 44), (4, 37)])]


def _reduce(kind, dim=None, keep=False):
    return Op("reduce", {"op": kind, "dim": dim, "dim_attr": None, "keepdim": keep})


@pytest.mark.parametrize("kind", sorted(TORCH))
@pytest.mark.parametrize("params", [None, SMALL, {**SMALL, "split_target": 0}, {**SMALL, "COLUMNS": 512},
                                    {**SMALL, "lean": True}, {**SMALL, "lean": True, "split_target": 0}],
                         ids=lambda p: "first" if p is None else ident(p))
def test_every_kind_at_every_placement(kind, params, tmp_path):
    for dim, keep, shapes in CASES:
        op = _reduce(kind, dim, keep)
        check(op, reference(f"{TORCH[kind]}(x, dim={dim}, keepdim={keep})"), params, [((), s) for s in shapes],
              tmp_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index", range(len(moves(_reduce("sum", 1)))))
def test_every_move_over_a_middle_dim(index, tmp_path):
    op = _reduce("mean", 1, True)
    check(op, reference("torch.mean(x, dim=1, keepdim=True)"), moves(op)[index].params,
          [((), (3, 70, 300)), ((), (2, 9, 1030)), ((), (1, 300, 3))], tmp_path, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lean", [False, True])
def test_nan_and_half_over_a_middle_dim(lean, tmp_path):
    small = {**SMALL, "lean": lean}
    for kind in ("max", "min", "logsumexp"):
        module = load(render(_reduce(kind, 1), reference(f"{TORCH[kind]}(x, dim=1)"), small), tmp_path)
        x = torch.randn(2, 40, 300, device=DEVICE)
        x[0, 7, 5] = float("nan")
        x[1, 39, 299] = float("nan")  # in the ragged last tile, in the last column block
        x[0, 0, 0] = float("nan")
        x[1, :, 3] = float("inf")
        torch.testing.assert_close(module.ModelNew()(x), module.Model()(x), equal_nan=True)
    op = _reduce("sum", -2)
    check(op, reference("torch.sum(x, dim=-2)"), small, [((), (3, 40, 300))], tmp_path, rtol=2e-3, atol=2e-2,
          dtype=torch.float16)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_over_a_middle_dim(kind, tmp_path):
    """Ties (few distinct values) give the first index, across column blocks and splits."""
    op = Op("argreduce", {"op": kind, "dim": 1, "dim_attr": None, "keepdim": False})
    for params in ({"ROW_MAX": 0, "BLOCK_R": 8, "TILE": 256}, {"ROW_MAX": 0, "BLOCK_R": 8, "TILE": 256,
                                                                 "split_target": 0}, None):
        module = load(render(op, reference(f"torch.{kind}(x, dim=1)"), params), tmp_path)
        for shape in ((3, 40, 300), (1, 70, 301), (2, 33, 2)):
            x = torch.randint(0, 4, shape, device=DEVICE).float()
            torch.testing.assert_close(module.ModelNew()(x), module.Model()(x))
        x = torch.randn(2, 40, 300, device=DEVICE)
        x[0, 9, 3] = x[0, 30, 3] = float("nan")
        torch.testing.assert_close(module.ModelNew()(x), module.Model()(x))


def _plan():
    scope = {"triton": triton}
    exec(TILES + PLAN, scope)
    return scope["kc_plan"]


def test_the_plan_at_kernelbench_sizes():
    plan = _plan()
    # level-1 47-53 (128 x 4096 x 4095 over dim 1): adjacent columns of one outer index, inner odd: no vectors
    br, bc, within, n_cb, tiles, splits, chunk, vr, vi = plan(128, 4096, 4095, 0, 1024, 4096, 256, 2048, 4)
    assert within and (br, bc, n_cb, tiles, vr, vi) == (16, 256, 16, 2048, 1, 1) and splits == 1
    # level-2 25 / 92 (a min / logsumexp over 64 channels of 254 x 254 planes): 16-byte vectors
    br, bc, within, n_cb, tiles, splits, chunk, vr, vi = plan(128, 64, 254 * 254, 0, 1024, 4096, 256, 2048, 4)
    assert within and vi == 4 and bc == 256 and n_cb == 253 and splits == 1
    # level-2 67's global pool (8192 planes of 254 x 254): rows, 4 planes per program, 16-byte vectors
    br, bc, within, n_cb, tiles, splits, chunk, vr, vi = plan(8192, 254 * 254, 1, 0, 1024, 4096, 256, 1024, 4)
    assert not within and (br, bc, tiles, splits, vr) == (1024, 4, 2048, 1, 4)
    # few long rows: R split over programs; a tiny inner with short R: columns packed across outer indices
    assert plan(2, 10 ** 6, 1, 0, 1024, 4096, 256, 2048, 4)[5] > 1
    assert plan(10 ** 5, 4, 2, 0, 1024, 4096, 256, 2048, 4)[2] is False
    assert plan(1, 4096, 4095, 0, 1024, 4096, 256, 2048, 2)[8] == 1  # fp16 with odd inner: no vectors


def test_the_plan_takes_no_vectors_for_sizes_past_int32():
    """R // VEC_R would reach the kernel as int32 and R_v * VEC_R overflow there: from 2**31 no vector width (the
    size then arrives as int64)."""
    plan = _plan()
    assert plan(1, 2**31 - 16, 1, 0, 1024, 4096, 256, 2048, 4)[7] == 4
    assert plan(1, 2**31, 1, 0, 1024, 4096, 256, 2048, 4)[7] == 1
    assert plan(1, 2**31 + 8, 1, 0, 1024, 4096, 256, 2048, 2)[7] == 1
    within = plan(1, 2, 2**31, 0, 1024, 4096, 256, 2048, 4)
    assert within[2] and within[8] == 1
    assert plan(1, 2, 2**31 - 16, 0, 1024, 4096, 256, 2048, 4)[8] == 4


def _compile_loads(kernel, constexprs, tmp_path, monkeypatch) -> set[str]:
    """The kinds of global loads of `kernel` compiled for sm_90 (skips where Triton cannot compile for it here)."""
    import importlib.util

    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for module in (tl, tl.core, tl.standard, tl.math):  # the compiler's tl.sum, tl.cdiv, ... (conftest swaps them)
        for name, value in list(vars(module).items()):
            if isinstance(value, InterpretedFunction):
                monkeypatch.setattr(module, name, JITFunction(value.fn))

    path = tmp_path / f"{kernel.name}_src.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n" + kernel.source() + "\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, kernel.name)
    fn = fn if isinstance(fn, JITFunction) else JITFunction(fn.fn)  # the interpreter wraps the function
    signature = {p: "*fp32" if p.endswith("_ptr") else "fp32" if p == "div" else "i32" for p in fn.arg_names}
    signature.update({k: "constexpr" for k in constexprs})
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(fn.arg_names) if p.endswith("_ptr")}
    try:
        compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs),
                                  target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    except Exception as exc:  # noqa: BLE001 - no CUDA toolchain here
        pytest.skip(f"cannot compile for sm_90 here: {type(exc).__name__}: {exc}"[:200])
    return set(re.findall(r"ld\.global[.\w]*", compiled.asm["ptx"]))


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("kind", ["min", "logsumexp"])
def test_adjacent_columns_and_rows_load_in_vectors(kind, lean, tmp_path, monkeypatch):
    """Over a middle dim whose inner size is a multiple of 4 (level-2 25's min over channels), and along rows whose
    length is (a global pool of 254 x 254 planes), fp32 loads are 16-byte vectors, in the lean loop too; with an odd
    inner size they cannot be (unaligned rows), but stay one load per element of adjacent columns."""
    plan, kernel = _plan(), reduce_kernel(kind, lean)
    for (outer, R, inner), want in (((128, 64, 254 * 254), "ld.global.v4.b32"), ((8192, 254 * 254, 1), "ld.global.v4.b32"),
                                    ((128, 4096, 4095), "ld.global.b32")):
        br, bc, within, n_cb, _, _, _, vr, vi = plan(outer, R, inner, 0, 1024, 4096, 256, 2048, 4)
        consts = {"BLOCK_R": br, "BLOCK_C": bc, "WITHIN": within, "VEC_R": vr, "VEC_I": vi}
        if inner == 1:
            consts.update(inner_v=1, n_cb=1)  # Triton specializes arguments equal to 1 as constants
        assert _compile_loads(kernel, consts, tmp_path, monkeypatch) == {want}, (outer, R, inner)
