"""The suite problems whose forward reads numbers from its module (`x * self.scale_factor`): every move of every
family, as a Hopper GPU would be offered them (the TMA moves, CUDA before Triton), renders a file whose
module-level code never reads `self` and whose kernels use only their own names (names_check.py); the Triton
moves run in the interpreter (or on the GPU) at the problem's small sizes and at another shape with other numbers;
on a GPU every move of these problems, and the first moves of the rest of the covered level-1/2 suite, run."""

import pytest
import torch

from kernelcraft.problems import Problem, load_problem, suite_names
from kernelcraft.propose.builtin import chain, registry, scalars
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from kernelcraft.verify.policy import get_policy
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, move_tolerance
from tests.propose.builtin.names_check import check_names

# Another small shape for each, with other numbers in the attributes (bmm_scale_softmax's scale is 1/sqrt(K)).
# gemm_gelu_scale's has 16-byte rows (48 and 40 floats), so on a Hopper GPU its TMA moves take their TMA kernels
# there (its SMALL_SIZES' 130-float rows are not 16-byte aligned: the strided kernel)
OTHER_SIZES = {
    "level1/elu": {"batch_size": 5, "dim": 77, "alpha": 0.3},
    "level1/hardtanh": {"batch_size": 5, "dim": 77, "min_val": -0.25, "max_val": 0.5},
    "level1/leaky_relu": {"batch_size": 5, "dim": 77, "negative_slope": 0.2},
    "level2/gemm_gelu_scale": {"batch_size": 9, "in_features": 48, "out_features": 40, "scale_factor": -0.37},
    "level2/bmm_scale_softmax": {"batch_size": 2, "M": 9, "K": 77, "N": 13},
}
LEVELS = ("level1/", "level2/")


def _ops(name: str):
    """The problem's op (or chain), and the attribute paths of the numbers forward reads."""
    analysis = analyze(load_problem(name))
    ops = analysis.single or analysis.chain
    paths = {ref[len("self."):] for op in analysis.ops for ref in scalars.refs(op.detail.get("steps") or [])}
    return ops, paths


def scalar_problems() -> list[str]:
    return [n for n in suite_names() if n.startswith(LEVELS) and _ops(n)[1]]


SCALAR_PROBLEMS = scalar_problems()


def hopper_moves(name: str, precision_moves: bool = True) -> list:
    """The moves the built-in engineer offers for `name` on a Hopper GPU: without a GPU visible here, a "cuda"
    device is taken at its word (sm_90, clusters), so the CUDA moves come first and the TMA ones are in."""
    proposer = BuiltinProposer("cuda", precision_moves=precision_moves)
    problem = load_problem(name)
    out = []
    for backend in ("cuda_nvrtc", "triton"):
        try:
            op = proposer.coverage(problem, backend)
        except CoverageError:
            if backend == "triton":  # every problem here is covered in Triton: a lost coverage fails, not skips
                raise
            continue  # most have no CUDA family
        op = op.single or op.chain
        out += [m for m in proposer.moves(op, backend) if m.backend == backend]
    return out


def render(name: str, move) -> str:
    ops, _ = _ops(name)
    source = load_problem(name).source
    if isinstance(ops, list):
        return chain.render(ops, source, move.params, move.lead)
    return registry.render(ops, source, move.params)


def test_the_scalar_problems_are_found():
    assert {"level2/gemm_gelu_scale", "level2/bmm_scale_softmax"} <= set(SCALAR_PROBLEMS)
    assert set(SCALAR_PROBLEMS) <= set(OTHER_SIZES), "give each scalar problem another shape in OTHER_SIZES"
    tma = [m for m in hopper_moves("level2/gemm_gelu_scale", precision_moves=False) if m.params.tma]
    assert len(tma) == 3 and all(m.params.precision == "tf32x3" for m in tma), tma  # a linear's three TMA tiles


@pytest.mark.parametrize("name", SCALAR_PROBLEMS)
def test_every_move_reads_the_numbers_in_forward_only(name):
    _, paths = _ops(name)
    moves = hopper_moves(name)
    assert moves
    for move in moves:
        source = render(name, move)
        assert_no_torch_compute(source)
        try:
            check_names(source, paths)
        except AssertionError as exc:
            raise AssertionError(f"{name}, move {move.text[:60]!r}:\n{exc}") from None


def run_move(name: str, move, constants: dict, tmp_path) -> None:
    """Render `move`, load it with the problem's SMALL_SIZES and `constants` over them, compare with Model."""
    problem = load_problem(name)
    source = render(name, move)
    path = tmp_path / f"{name.replace('/', '_')}_{abs(hash(move.text))}.py"
    path.write_text(source)
    small = dict(getattr(problem.load(small=True), "SMALL_SIZES", {}) or {})
    module = Problem(name, path, source).load(sizes={**small, **constants})
    init = module.get_init_inputs()
    torch.manual_seed(0)
    ref = module.Model(*init).to(DEVICE).eval()
    new = module.ModelNew(*init).to(DEVICE).eval()
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    inputs = [t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in module.get_inputs()]
    with torch.no_grad():
        got, want = new(*inputs), ref(*inputs)
    tol = move_tolerance(move.params)
    if want.dtype in (torch.float16, torch.bfloat16):  # a half-precision output: the strict policy's half tolerance
        half = get_policy("strict").tolerance(want.dtype)
        tol = {"rtol": max(tol["rtol"], half), "atol": max(tol["atol"], half)}
    torch.testing.assert_close(got, want, **tol, msg=lambda m: f"{name} {constants} {move.text[:60]!r}: {m}")


@pytest.mark.parametrize("name", SCALAR_PROBLEMS)
def test_the_triton_moves_follow_the_numbers_at_two_sizes(name, tmp_path):
    """Traced at the small sizes, each Triton move (a TMA one takes its strided kernel off a Hopper GPU) is right
    there and at another shape whose attributes hold other numbers."""
    for move in (m for m in hopper_moves(name) if m.backend == "triton"):
        for constants in ({}, OTHER_SIZES[name]):
            run_move(name, move, constants, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("name", SCALAR_PROBLEMS)
def test_gpu_every_move_of_the_scalar_problems(name, tmp_path):
    for move in hopper_moves(name):
        for constants in ({}, OTHER_SIZES[name]):
            run_move(name, move, constants, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in suite_names() if n.startswith(LEVELS) and n not in SCALAR_PROBLEMS])
def test_gpu_first_moves_of_the_covered_suite(name, tmp_path):
    """The first two strict moves (those a Hopper GPU tries first) of every other covered level-1/2 problem."""
    moves = hopper_moves(name, precision_moves=False)
    if not moves:
        pytest.skip(f"{name}: not covered")
    for move in moves[:2]:
        run_move(name, move, {}, tmp_path)
