"""The CUDA (NVRTC) cluster softmax family: compiled for sm_90a anywhere (NVRTC needs no GPU), run on a GPU against
torch on awkward shapes: odd and short rows, rows longer than a cluster holds, a reduced dim that is not the
last, a storage offset that rules out float4, NaN and -inf rows."""

import re

import pytest
import torch

from kernelcraft.backends.nvrtc import load_kernels
from kernelcraft.propose.base import CATEGORIES
from kernelcraft.propose.builtin import registry
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import load, reference

KINDS = [("softmax", torch.softmax), ("log_softmax", torch.log_softmax)]


def source(kind: str, dim: int, params) -> str:
    return kernel_check.render(Op(kind, {"dim": dim}), reference(f"torch.{kind}(x, dim={dim})"), params, "cuda_nvrtc")


@pytest.mark.parametrize("kind", [k for k, _ in KINDS])
def test_moves_and_the_source_compiles_for_hopper(kind):
    ms = kernel_check.moves(Op(kind, {"dim": -1}), "cuda_nvrtc")
    assert len({m.text for m in ms}) == len(ms) >= 3 and all(m.category in CATEGORIES for m in ms)
    assert all(m.backend == "cuda_nvrtc" for m in ms)
    text = source(kind, -1, ms[0].params)
    assert "class ModelNew(Model)" in text and "from kernelcraft.backends.nvrtc import load_kernels" in text
    module = load_kernels(re.search(r"KC_SOURCE = r'''(.*?)'''", text, re.S).group(1), arch="sm_90a")
    assert {"kc_softmax_rows", "kc_softmax_columns", "kc_softmax_v8_w4", "kc_softmax_v1_w1",
            "kc_softmax_staged_w4", "kc_softmax_staged_w1"} <= set(module.signatures)
    spills = re.findall(r"(\d+) bytes spill stores", module.log)
    assert spills and set(spills) == {"0"}, module.log  # no kernel spills


def test_kinds_without_a_cuda_family_have_no_moves():
    assert kernel_check.moves(Op("rmsnorm", {}), "cuda_nvrtc") == []
    assert registry.kinds("cuda_nvrtc") == {"softmax", "log_softmax", "layernorm"}


SHAPES = [((64, 65536), -1), ((5, 1000), 1), ((3, 7), -1), ((2, 300001), -1), ((4, 9, 6), 1), ((33, 4100), 0),
          ((1, 1), -1), ((8, 262147), 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("kind, fn", KINDS)
@pytest.mark.parametrize("params", [m.params for m in kernel_check.moves(Op("softmax", {"dim": -1}), "cuda_nvrtc")],
                         ids=lambda p: f"c{p.cluster}t{p.threads}{'s' if p.stream else ''}"
                         + (f"k{p.staged}" if p.staged else ""))
def test_moves_match_torch_on_the_gpu(kind, fn, params, tmp_path):
    for shape, dim in SHAPES:
        model = load(source(kind, dim, params), tmp_path).ModelNew().cuda()
        x = torch.randn(shape, device="cuda") * 4
        torch.testing.assert_close(model(x), fn(x, dim), rtol=1e-5, atol=1e-6, msg=lambda m: f"{shape} {dim}: {m}")


@pytest.mark.gpu
@pytest.mark.parametrize("kind, fn", KINDS)
@pytest.mark.parametrize("staged", [0, 64], ids=["registers", "staged"])
def test_offset_storage_and_special_rows(kind, fn, staged, tmp_path):
    params = {"cluster": 4, "threads": 512, "stream": True, "staged": staged}
    model = load(source(kind, -1, params), tmp_path).ModelNew().cuda()
    x = torch.randn(6 * 4096 + 1, device="cuda")[1:].view(6, 4096)  # 4-byte aligned only: no float4
    assert x.data_ptr() % 16 != 0
    torch.testing.assert_close(model(x), fn(x, -1), rtol=1e-5, atol=1e-6)
    x = torch.randn(4, 65536, device="cuda")
    x[1, 7], x[2], x[3, :40000] = float("nan"), -float("inf"), -float("inf")  # NaN, all -inf, a CTA of -inf
    torch.testing.assert_close(model(x), fn(x, -1), rtol=1e-5, atol=1e-6, equal_nan=True)
    with pytest.raises(TypeError, match="float32"):
        model(x.half())
