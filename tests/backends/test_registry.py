"""The backends registry: each backend's behaviour, read from one place by the verifier, the proposers and the faces."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from kernelcraft import api, backends
from kernelcraft.backends import BACKENDS, NEEDS_DEVICE, NOT_INSTALLED, declared_kernels, get_backend
from kernelcraft.backends.base import Backend
from kernelcraft.propose.builtin import registry
from kernelcraft.verify.guards import static_findings

CUDA_AND_TRITON = '''
SRC = r"""extern "C" __global__ void __launch_bounds__(256) row_softmax(const float* x) {}"""
@triton.jit
def fused_gelu(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''


def test_every_backend_but_plain_torch_tells_a_model_how_to_write_it():
    for backend in BACKENDS.values():
        if backend.name == "torch":
            assert not backend.promptable
            with pytest.raises(ValueError, match="not asked for torch kernels"):
                backend.prompt()
        else:
            assert backend.promptable and len(backend.prompt()) > 100, backend
    assert backends.names(promptable=True) == ["cuda_nvrtc", "gluon", "helion", "cute", "tilelang", "triton",
                                               "cuda_inline", "cpp"]


def test_a_backend_says_where_it_cannot_run_and_why():
    assert get_backend("cuda_nvrtc").unavailable("cpu") == (NEEDS_DEVICE, "a cuda_nvrtc candidate needs a CUDA device")
    assert get_backend("cuda_nvrtc").unavailable("cuda") is None
    assert get_backend("cpp").unavailable("cpu") is None and get_backend("torch").unavailable("cpu") is None

    class Missing(Backend):
        name, summary, devices, packages = "missing", "", ("cpu",), ("kernelcraft_no_such_package",)

    assert Missing().unavailable("cpu") == (NOT_INSTALLED, "a missing candidate needs kernelcraft_no_such_package, "
                                                           "not installed here")
    Missing.extra = "missing"  # the extra that installs it, named in the one line
    assert Missing().unavailable("cpu")[1].endswith("not installed here (pip install 'kernelcraft[missing]')")
    assert get_backend("gluon").unavailable("cpu") == (NEEDS_DEVICE, "a gluon candidate needs a CUDA device")


def test_declared_kernels_are_each_backends_union():
    assert get_backend("cuda_nvrtc").declared_kernels(CUDA_AND_TRITON) == {"row_softmax"}
    assert get_backend("triton").declared_kernels(CUDA_AND_TRITON) == {"fused_gelu"}
    assert declared_kernels(CUDA_AND_TRITON) == {"row_softmax", "fused_gelu"}
    assert get_backend("torch").declared_kernels(CUDA_AND_TRITON) == set()


def test_a_build_of_its_own_counts_as_a_kernel_only_for_the_inline_backends():
    assert {n for n, b in BACKENDS.items() if b.build_is_kernel} == {"cuda_inline", "cpp"}
    assert {n for n, b in BACKENDS.items() if b.prebuild} == {"cuda_inline", "cpp"}


def test_an_import_is_set_up_once_per_distinct_hook(monkeypatch, tmp_path):
    """cpp and cuda_inline share the load_inline build cache: entered once, not once per backend."""
    entered = []

    @contextlib.contextmanager
    def hook(self, build_cache, records, source=""):
        entered.append((type(self).__name__, build_cache))
        yield

    from kernelcraft.backends.kinds.cuda_inline import InlineBuild

    monkeypatch.setattr(InlineBuild, "importing", hook)
    with backends.importing(tmp_path, []):
        pass
    assert entered == [("CudaInline", tmp_path)]


def test_the_candidates_may_import_only_the_backends_runtimes():
    allowed = "from kernelcraft.backends.nvrtc import load_kernels\nclass ModelNew: pass\n"
    assert not static_findings(allowed)
    refused = static_findings("from kernelcraft.backends.kinds import triton\nclass ModelNew: pass\n")
    assert [f.reason for f in refused] == ["static_introspection"]


def test_the_builtin_engineer_writes_only_backends_the_registry_knows():
    assert registry.backends() == ("triton", "cuda_nvrtc")
    assert set(registry.backends()) <= set(BACKENDS)


def test_the_api_lists_every_backend_with_where_it_runs():
    rows = api.backends(device="cpu")
    assert [r["name"] for r in rows] == list(BACKENDS)
    by_name = {r["name"]: r for r in rows}
    assert by_name["cuda_inline"]["unavailable"] == "a cuda_inline candidate needs a CUDA device"
    assert by_name["triton"]["unavailable"] is None and by_name["torch"]["promptable"] is False
    assert "unavailable" not in api.backends()[0]


def test_each_backend_is_one_module_of_kinds():
    kinds = Path(backends.__file__).parent / "kinds"
    modules = {p.stem for p in kinds.glob("*.py")} - {"__init__"}
    assert modules == set(BACKENDS)
    for backend in BACKENDS.values():
        assert sys.modules[type(backend).__module__].__file__.startswith(str(kinds))
