"""Every move of every family, rendered as a Hopper GPU is offered them (CUDA moves first, TMA and TF32 moves in),
compiled and run on the GPU against the reference: each covered problem of the suite at its SMALL_SIZES and, where
the problem states one, at another shape. Together the suite's problems reach every family (test_registry.py
checks that for the Triton ones; here for all)."""

import pytest

from kernelcraft.problems import load_problem, suite_names
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.chain import FREE_KINDS, ChainMove
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from tests.propose.builtin.test_scalars_suite import OTHER_SIZES, run_move

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def offered(name: str) -> list:
    """The moves a Hopper GPU is offered for `name` on each backend (none when not covered)."""
    proposer = BuiltinProposer("cuda", precision_moves=True)
    problem = load_problem(name)
    out = []
    for backend in proposer.backends():
        try:
            analysis = proposer.coverage(problem, backend)
        except CoverageError:
            continue
        out += [m for m in proposer.moves(analysis.single or analysis.chain, backend) if m.backend == backend]
    return out


COVERED = [n for n in suite_names() if offered(n)]


def _families(move) -> set[str]:
    """The families a move runs: a chain move's lead on its move, the chain's other ops on their first ones."""
    if isinstance(move, ChainMove):
        return {registry.family_for(op.kind).name for op in move.ops if op.kind not in FREE_KINDS}
    return {move.family.name}


def test_the_suite_reaches_every_family():
    reached = {f for name in COVERED for move in offered(name) for f in _families(move)}
    assert reached >= {f.name for f in registry.all_families()}, {f.name for f in registry.all_families()} - reached


@pytest.mark.gpu
@pytest.mark.parametrize("name", COVERED)
def test_gpu_every_move(name, tmp_path):
    failures = []
    for move in offered(name):
        for sizes in ({}, *([OTHER_SIZES[name]] if name in OTHER_SIZES else [])):
            try:
                run_move(name, move, sizes, tmp_path)
            except Exception as exc:  # every move is tried; the failures are listed together
                failures.append(f"{move.backend} {move.text[:80]!r} {sizes}: {type(exc).__name__}: "
                                f"{str(exc).splitlines()[0] if str(exc) else ''}")
    assert not failures, "\n".join(failures)
