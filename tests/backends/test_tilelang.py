"""The tilelang backend (backends/kinds/tilelang.py): its kernels read from the source (a prim func `f` compiles
to the CUDA kernel `f_kernel`), its runtime's calls recorded by the kernels of their generated source, and on a GPU
the bundled TileLang examples judged by the verifier: the honest ones `ok`, their wrong twins `incorrect`. TileLang
runs on NVIDIA GPUs only here, so nothing of it is built on the CPU."""

from __future__ import annotations

import pytest

from kernelcraft import backends
from kernelcraft.backends import detect_backend, get_backend
from kernelcraft.candidate import EXAMPLES, Candidate
from kernelcraft.verify import TimingConfig, VerifyConfig
from kernelcraft.verify.attribution import Launches, Ran, attribute
from tests.helpers import assert_examples_judged

TILELANG = get_backend("tilelang")
tilelang_here = pytest.mark.skipif(TILELANG.unavailable("cuda") is not None, reason="tilelang is not installed here")
KERNELS = {"softmax_tilelang": "softmax_rows_kernel", "matmul_tilelang": "matmul_tiles_kernel"}


def test_the_examples_are_tilelang_and_declare_the_cuda_kernels_tilelang_makes():
    for stem, kernel in KERNELS.items():
        for path in (EXAMPLES / f"{stem}.py", EXAMPLES / f"{stem}_wrong.py"):
            source = path.read_text()
            assert detect_backend(source) == "tilelang" and Candidate.from_file(path).backend == "tilelang"
            # the @tilelang.jit function that builds it is read as one too (an eager-mode kernel would be)
            assert kernel in TILELANG.declared_kernels(source)
    eager = "import tilelang\n@tilelang.jit\ndef add(A, B):\n    pass\n\n@T.prim_func(private=True)\ndef main(A):\n"
    assert TILELANG.declared_kernels(eager) == {"add_kernel", "main_kernel"}


def test_a_kernel_name_is_its_prim_funcs_or_a_later_kernel_of_it():
    declared = {"main_kernel"}
    assert TILELANG.carries("main_kernel", declared) and TILELANG.carries("main_kernel_1", declared)
    assert not TILELANG.carries("main_kernel_fused", declared) and not TILELANG.carries("gemm_kernel", declared)


def test_the_workers_load_nothing_another_candidate_built():
    env = backends.worker_env("cuda")
    assert env["TILELANG_DISABLE_CACHE"] == "1" and env["TILELANG_AUTO_TUNING_DISABLE_CACHE"] == "1"


def test_launches_recorded_are_exact_counts():
    """TileLang launches each kernel of a call once, so more calls of a name than were recorded disqualify it."""
    launches = Launches(recorded={"tilelang": {"main_kernel": 1}})
    found = attribute([Ran("main_kernel", 7, 5.0), Ran("main_kernel", 7, 5.0)], launches, {"main_kernel"}, 7)
    assert not found.custom_ran and found.kernels[0].evidence == "calls_exceed_launches"
    once = attribute([Ran("main_kernel", 7, 5.0)], launches, {"main_kernel"}, 7)
    assert once.custom_fraction == 1.0 and once.kernels[0].evidence == "tilelang_launch"


def test_a_candidate_needs_a_gpu_and_tilelang():
    assert TILELANG.unavailable("cpu")[0] == "backend_needs_cuda"
    found = TILELANG.unavailable("cuda")
    assert found is None or found == ("backend_unavailable", "a tilelang candidate needs tilelang, not installed here "
                                                             "(pip install 'kernelcraft[tilelang]')")


@pytest.mark.gpu
@tilelang_here
def test_the_examples_are_judged_on_a_gpu(tmp_path):
    """On a GPU their kernels are recorded as TileLang's adapter launched them, and counted as the candidate's."""
    config = VerifyConfig(trials=3, compile_baseline=False, timing=TimingConfig(budget_s=0.5), cache_dir=tmp_path)
    assert_examples_judged("cuda:0", [("level1/softmax", "softmax_tilelang", "ok"),
                                      ("level1/softmax", "softmax_tilelang_wrong", "incorrect"),
                                      ("level1/matmul", "matmul_tilelang", "ok"),
                                      ("level1/matmul", "matmul_tilelang_wrong", "incorrect")], config)


def test_a_library_kernel_named_like_a_recorded_tilelang_one_is_not_the_candidates():
    """Name squatting through the runtime: a prim func named `vectorized_elementwise` compiles to the kernel
    `vectorized_elementwise_kernel`, as ATen's is called; ATen's launched inside an aten op, or more often than the
    candidate's runtime launched it, is the library's."""
    declared = {"vectorized_elementwise_kernel"}
    launches = Launches(recorded={"tilelang": {"vectorized_elementwise_kernel": 1}})
    inside = attribute([Ran("vectorized_elementwise_kernel", 7, 5.0, "aten::relu")], launches, declared, 7)
    assert not inside.custom_ran and inside.kernels[0].evidence == "inside_library_op"
    templated = attribute([Ran("void at::native::vectorized_elementwise_kernel<4>(int)", 7, 5.0)], launches,
                          declared, 7)
    assert not templated.custom_ran  # not the exact name the runtime recorded
