"""Paths and small builders shared by the tests (fixtures themselves live in conftest.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from kernelcraft.candidate import Candidate
from kernelcraft.verify import TimingConfig, VerifyConfig

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
REPO = TESTS.parent
# Upstream KernelBench problem files, beside the checkout when there, else in a `shared/` inside it (a copy of the
# checkout run on another machine); tests that read them skip otherwise.
KERNELBENCH = next((p for p in (REPO.parent / "shared" / "kernelbench", REPO / "shared" / "kernelbench")
                    if p.exists()), REPO.parent / "shared" / "kernelbench")
CPU_WORKER_ENV = {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}  # a worker's extra environment without a GPU


INTERRUPTED = threading.Event()  # Ctrl-C reached pytest (tests/conftest.py): shared verifiers close at once


def close_shared(verifier) -> None:
    """A fixture's verifier closed at its scope's end: at once where the run was interrupted (the evaluation in
    flight stopped, its worker killed), else after its work (a session of Ctrl-C waited on a verdict's end)."""
    verifier.close(cancel=INTERRUPTED.is_set())


def small_config(cache_dir: Path, **overrides) -> VerifyConfig:
    """CPU settings: SMALL_SIZES, no torch.compile baseline, a short timing budget, 3 trials.

    The static guards are off: these fixtures are plain PyTorch (no kernel of their own) and some
    call what the guards forbid (os._exit, ctypes), because what is tested here is the runtime path
    behind the guards. The guards themselves are tested in tests/adversarial.

    The check of the harness's own files is off too: a checkout edited while the suite runs would fail every later
    evaluation `harness_tampered`. It is tested on a copy of the package (tests/adversarial/test_cache_hacks.py,
    tests/verify/test_integrity.py).
    """
    settings = dict(small=True, compile_baseline=False, trials=3, cache_dir=Path(cache_dir),
                    timing=TimingConfig(budget_s=0.3, min_samples=5), static_guards=False, harness_check=False)
    settings.update(overrides)
    return VerifyConfig(**settings)


def fixture_candidate(name: str, backend: str = "") -> Candidate:
    """The candidate in tests/fixtures/<name>.py."""
    return Candidate.from_file(FIXTURES / f"{name}.py", backend)


def assert_examples_judged(device: str, cases: list[tuple[str, str, str]], config: VerifyConfig) -> None:
    """The bundled examples `cases` ((problem, example, expected status)) judged by one verifier on `device`: the
    honest ones `ok` with a speedup, on a GPU mostly in their own kernels (attribution counted them), with their
    compile time and their kernels' registers recorded; the wrong twins `incorrect` by their outputs."""
    from kernelcraft.candidate import EXAMPLES
    from kernelcraft.problems import load_problem
    from kernelcraft.verify import Job, Verifier

    with Verifier(device, config) as verifier:
        results = verifier.evaluate_many([Job(load_problem(p), Candidate.from_file(EXAMPLES / f"{c}.py"))
                                          for p, c, _ in cases])
    for (_, name, status), r in zip(cases, results):
        seen = f"{name}: status={r.status} reasons={r.reasons} message={r.message[-600:]!r}"
        assert r.status == status, seen
        if status != "ok":
            assert "mismatch" in r.reasons, seen
        elif device == "cpu":
            assert r.correct and r.speedup_eager is not None, seen
        else:
            assert r.correct and r.speedup_eager and r.custom_kernel_fraction > 0.5, seen
            # compiled at the first call, timed apart from it; its kernels' figures read from the profiler
            assert r.compile_seconds is not None and r.compile_seconds > 0, f"{seen} compile_seconds={r.compile_seconds}"
            assert r.kernels_resources and all(k.get("registers") for k in r.kernels_resources), \
                f"{seen} kernels_resources={r.kernels_resources}"
