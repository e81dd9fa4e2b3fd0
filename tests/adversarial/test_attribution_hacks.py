"""Hack class 29 (name squatting) of ../shared/REWARD_HACKS.md: a candidate calls the library while declaring a
kernel named like the library's own, so attribution by name credited the library's kernel to the candidate. The
verifier runs with `allow_library=False` (--no-allow-library), where that credit decided the verdict.

Each cheat must be rejected as `no_custom_kernel` (or `library_kernels`), and its honest twin, which names its own
kernel exactly like the library's and launches it, must pass: attribution goes by what the candidate's code
launched or built, never by name (verify/attribution.py).

On the CPU (Triton's interpreter) the Triton fixtures run here; the GPU half (`gpu` marker: the profiler's kernel
names, cuBLAS's GEMM, a load_inline extension) runs where torch sees a CUDA device.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.result import Result
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig
from kernelcraft.backends import declared_kernels
from kernelcraft.verify.attribution import is_custom

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
RELU, MATMUL = "level1/relu", "level1/matmul"
SQUATTED = {"no_custom_kernel", "library_kernels"}

# (problem, fixture stem, accepted statuses, accepted reasons; empty: must be ok with no reasons)
CPU_CASES = [
    (RELU, "c29_name_squatting_cheat", {"rejected"}, SQUATTED),
    (RELU, "c29_name_squatting_honest", {"ok"}, set()),
    (MATMUL, "c29b_gemm_squatting_cheat", {"rejected"}, SQUATTED),
    (MATMUL, "c29b_gemm_squatting_honest", {"ok"}, set()),
]
GPU_CASES = CPU_CASES + [
    (RELU, "c29c_inline_squatting_cheat", {"rejected"}, SQUATTED),
    (RELU, "c29c_inline_squatting_honest", {"ok"}, set()),
]
# What must have made the honest twins' kernels their own, on a GPU
GPU_EVIDENCE = {"c29_name_squatting_honest": "triton_launch", "c29b_gemm_squatting_honest": "triton_launch",
                "c29c_inline_squatting_honest": "extension_symbol"}


def _evaluate(device: str, config: VerifyConfig, cases) -> dict[str, Result]:
    problems = {p: load_problem(p) for p in {c[0] for c in cases}}
    with Verifier(device, config) as verifier:
        jobs = [Job(problems[problem], Candidate.from_file(FIXTURES / f"{stem}.py")) for problem, stem, _, _ in cases]
        return {case[1]: r for case, r in zip(cases, verifier.evaluate_many(jobs))}


def _seen(result: Result) -> str:
    return f"status={result.status} reasons={result.reasons} message={result.message[:600]!r} kernels={result.kernels}"


def _check(result: Result, statuses: set, reasons: set) -> None:
    json.dumps(result.to_dict())
    assert result.status in statuses, _seen(result)
    if reasons:
        assert reasons & set(result.reasons), _seen(result)
        assert not result.correct and result.speedup_eager is None, _seen(result)
        assert result.trials == 6, _seen(result)  # right on every trial: only attribution can catch it
    else:
        assert result.correct and result.reasons == [], _seen(result)
        assert result.speedup_eager is not None and result.custom_kernel_fraction > 0, _seen(result)


@pytest.fixture(scope="module")
def cpu_verdicts(tmp_path_factory) -> dict[str, Result]:
    config = VerifyConfig(allow_library=False, small=True, compile_baseline=False, trials=6,
                          timing=TimingConfig(budget_s=0.3, min_samples=5),
                          cache_dir=tmp_path_factory.mktemp("kc-attribution-hacks"))
    return _evaluate("cpu", config, CPU_CASES)


@pytest.mark.parametrize("problem, stem, statuses, reasons", [pytest.param(*c, id=c[1]) for c in CPU_CASES])
def test_cpu_name_squatting_verdict(cpu_verdicts, problem, stem, statuses, reasons):
    result = cpu_verdicts[stem]
    _check(result, statuses, reasons)
    if reasons:  # declared, never launched: the interpreter saw no launch at all
        assert result.kernels == [] and result.custom_kernel_fraction == 0.0, _seen(result)
    else:
        assert {(k["custom"], k.get("evidence")) for k in result.kernels} == {(True, "triton_launch")}, _seen(result)


def test_fixtures_are_labelled_and_declare_the_names_they_squat():
    for path in sorted(FIXTURES.glob("c29*.py")):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# Hack class 29 (name squatting) - "), path.name
        assert ("CHEAT" in first) == path.stem.endswith("_cheat"), path.name
    assert {p.stem for p in FIXTURES.glob("c29*.py")} == {c[1] for c in GPU_CASES}
    # the relu squatters declare a name that ATen's relu kernel carries as a whole identifier (the old rule's match)
    aten_relu = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
                 "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::"
                 "ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
                 "{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::"
                 "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::"
                 "ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
                 "{lambda(float)#1}, std::array<char*, 2ul>)")
    for stem in ("c29_name_squatting_cheat", "c29c_inline_squatting_cheat"):
        assert is_custom(aten_relu, declared_kernels((FIXTURES / f"{stem}.py").read_text())), stem
    gemm = declared_kernels((FIXTURES / "c29b_gemm_squatting_cheat.py").read_text())
    assert is_custom("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align4>"
                     "(cutlass_80_simt_sgemm_128x128_8x4_nn_align4::Params)", gemm)
    assert is_custom("ampere_sgemm_128x64_nn", gemm)


# -- on a GPU ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_verdicts(tmp_path_factory) -> dict[str, Result]:
    config = VerifyConfig(allow_library=False, small=True, compile_baseline=False, trials=6,
                          timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path_factory.mktemp("kc-attribution-gpu"))
    return _evaluate("cuda:0", config, GPU_CASES)


@pytest.mark.gpu
@pytest.mark.parametrize("problem, stem, statuses, reasons", [pytest.param(*c, id=c[1]) for c in GPU_CASES])
def test_gpu_name_squatting_verdict(gpu_verdicts, problem, stem, statuses, reasons):
    result = gpu_verdicts[stem]
    _check(result, statuses, reasons)
    assert result.device != "cpu"
    if reasons:
        assert not any(k["custom"] for k in result.kernels), _seen(result)
    else:  # every kernel its own (no library kernel may run here), by the evidence its backend gives
        assert result.kernels and all(k["custom"] and k.get("evidence") == GPU_EVIDENCE[stem]
                                      for k in result.kernels), _seen(result)


@pytest.mark.gpu
@pytest.mark.parametrize("stem", ["c29_name_squatting_cheat", "c29c_inline_squatting_cheat"])
def test_gpu_atens_relu_kernel_carries_the_squatted_name_and_is_refused_for_it(gpu_verdicts, stem):
    """The squat is real on this GPU: ATen's relu kernel carries the declared name (the old rule credited it), and
    the verdict says why the name did not count."""
    result = gpu_verdicts[stem]
    declared = declared_kernels((FIXTURES / f"{stem}.py").read_text())
    named = [k for k in result.kernels if is_custom(k["name"], declared)]
    assert named and all(not k["custom"] and k.get("evidence") == "name_only" for k in named), _seen(result)
    assert "carries the name of a kernel the candidate declares" in result.message, _seen(result)


@pytest.mark.gpu
def test_gpu_gemm_squatter_names_the_gemm_that_ran(gpu_verdicts):
    """Whether the GEMM cheat squats on the kernel cuBLAS picked on this GPU (its fp32 kernels' names differ by
    architecture and size); if not, the fixture needs that kernel's name, and the verdict test above proves less."""
    result = gpu_verdicts["c29b_gemm_squatting_cheat"]
    declared = declared_kernels((FIXTURES / "c29b_gemm_squatting_cheat.py").read_text())
    if not any(is_custom(k["name"], declared) for k in result.kernels):
        pytest.skip(f"cuBLAS ran {[k['name'][:160] for k in result.kernels]}, named like none of the fixture's "
                    "kernels: add its name to c29b_gemm_squatting_cheat.py")
    assert all(not k["custom"] for k in result.kernels), _seen(result)
