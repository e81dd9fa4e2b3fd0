"""The CUDA (NVRTC) exchange LayerNorm family: compiled for sm_90a anywhere (NVRTC needs no GPU), run on a GPU against
torch on awkward shapes: short and odd rows (one block each), rows over a group of blocks, a row over the
whole GPU, rows longer than the GPU's registers hold, storage that rules out float4, no affine, weight only."""

import re

import pytest
import torch

from kernelcraft.backends.nvrtc import load_kernels
from kernelcraft.propose.base import CATEGORIES
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.plan import Op
from tests.propose.builtin.kernel_check import assert_no_torch_compute, load, reference


def op(ndim: int, weight=True, bias=True) -> Op:
    return Op("layernorm", {"ndim": ndim, "eps": 1e-5, "weight": "ln.weight" if weight else None,
                            "bias": "ln.bias" if bias else None})


def source(shape: tuple, params, weight=True, bias=True) -> str:
    affine = "True" if weight else "False"
    extra = ", bias=False" if weight and not bias else ""
    body = f"self.ln = nn.LayerNorm({shape}, elementwise_affine={affine}{extra})"
    if weight:  # weights and bias that are not ones and zeros
        body += "\ntorch.nn.init.normal_(self.ln.weight)" + ("\ntorch.nn.init.normal_(self.ln.bias)" if bias else "")
    return kernel_check.render(op(len(shape), weight, bias), reference("self.ln(x)", "self", body), params, "cuda_nvrtc")


def test_moves_and_the_source_compiles_for_hopper():
    ms = kernel_check.moves(op(3), "cuda_nvrtc")
    assert len({m.text for m in ms}) == len(ms) >= 3 and all(m.category in CATEGORIES for m in ms)
    assert all(m.backend == "cuda_nvrtc" for m in ms)
    text = source((4, 5, 6), ms[0].params)
    assert "class ModelNew(Model)" in text and "from kernelcraft.backends.nvrtc import load_kernels" in text
    module = load_kernels(re.search(r"KC_SOURCE = r'''(.*?)'''", text, re.S).group(1), arch="sm_90a")
    assert {"kc_layernorm_rows", "kc_layernorm_v8_w4", "kc_layernorm_v32_w1"} <= set(
        module.signatures)
    for name in ("kc_layernorm_v8_w4", "kc_layernorm_v4_w4", "kc_layernorm_v8_w1"):  # the long-row workhorses
        props = re.search(rf"Function properties for {name}\n.*?(\d+) bytes spill stores", module.log)
        assert props and int(props.group(1)) <= 32, module.log  # at most a few loop-invariant values spilled


def test_an_epilogue_is_left_to_triton():
    assert kernel_check.moves(Op("layernorm", {"ndim": 1, "eps": 1e-5, "weight": None, "bias": None,
                                               "steps": [["gelu"]]}), "cuda_nvrtc") == []


# (input shape, normalized dims): one block per row; odd rows; rows over a group of blocks (float4 and not); a
# row over more blocks than the GPU has SMs; a row longer than the GPU's registers hold (three-pass kernel)
SHAPES = [((64, 1024), 1), ((3, 5, 7), 2), ((6, 40000), 1), ((4, 300001), 1), ((2, 64, 64, 64), 3),
          ((3, 1, 4194308), 2), ((2, 9000001), 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("params", [m.params for m in kernel_check.moves(op(1), "cuda_nvrtc")],
                         ids=lambda p: f"t{p.threads}{'s' if p.stream else ''}p{p.prefetch}{'a' if p.affine_smem else ''}")
def test_moves_match_torch_on_the_gpu(params, tmp_path):
    for shape, ndim in SHAPES:
        model = load(source(shape[-ndim:], params), tmp_path).ModelNew().cuda()
        x = torch.randn(shape, device="cuda") * 3 + 2
        ref = torch.nn.functional.layer_norm(x, shape[-ndim:], model.ln.weight, model.ln.bias)
        torch.testing.assert_close(model(x), ref, rtol=1e-4, atol=1e-4, msg=lambda m: f"{shape}: {m}")
        assert_no_torch_compute(source(shape[-ndim:], params))


@pytest.mark.gpu
def test_no_affine_weight_only_offset_storage_and_special_rows(tmp_path):
    params = kernel_check.moves(op(1), "cuda_nvrtc")[0].params
    for weight, bias in ((False, False), (True, False)):
        model = load(source((50000,), params, weight, bias), tmp_path).ModelNew().cuda()
        x = torch.randn(3, 50000, device="cuda")
        ref = torch.nn.functional.layer_norm(x, (50000,), model.ln.weight, model.ln.bias)
        torch.testing.assert_close(model(x), ref, rtol=1e-4, atol=1e-4)
    model = load(source((4096,), params), tmp_path).ModelNew().cuda()
    x = torch.randn(6 * 4096 + 1, device="cuda")[1:].view(6, 4096)  # 4-byte aligned only: no float4
    assert x.data_ptr() % 16 != 0
    ref = torch.nn.functional.layer_norm(x, (4096,), model.ln.weight, model.ln.bias)
    torch.testing.assert_close(model(x), ref, rtol=1e-4, atol=1e-4)
    x = torch.randn(3, 70000, device="cuda") + 1000.0  # a large mean: the variance must not cancel
    model = load(source((70000,), params), tmp_path).ModelNew().cuda()
    ref = torch.nn.functional.layer_norm(x, (70000,), model.ln.weight, model.ln.bias)
    torch.testing.assert_close(model(x), ref, rtol=1e-3, atol=1e-3)
    x[1, 7] = float("nan")
    assert model(x)[1].isnan().all() and not model(x)[0].isnan().any()
    with pytest.raises(TypeError, match="float32"):
        model(x.half())



@pytest.mark.gpu
def test_calls_reuse_the_exchange_buffer_without_clearing_it(tmp_path):
    """Each call's flags count on from the last call's: the buffer is never cleared, on any shape order, on another
    stream, and when the count is about to wrap (a fresh buffer then)."""
    params = kernel_check.moves(op(1), "cuda_nvrtc")[0].params
    module = load(source((300001,), params), tmp_path)
    model = module.ModelNew().cuda()
    xs = [torch.randn(rows, 300001, device="cuda") for rows in (4, 7, 1)]
    refs = [torch.nn.functional.layer_norm(x, (300001,), model.ln.weight, model.ln.bias) for x in xs]
    for _ in range(3):
        for x, ref in zip(xs, refs):
            torch.testing.assert_close(model(x), ref, rtol=1e-4, atol=1e-4)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = model(xs[1])
    side.synchronize()
    torch.testing.assert_close(out, refs[1], rtol=1e-4, atol=1e-4)
    assert len({key[1] for key in module.KC_EXCHANGE}) == 2  # one buffer per stream
    for held in module.KC_EXCHANGE.values():
        held[1] = (1 << 31) - 2
    torch.testing.assert_close(model(xs[0]), refs[0], rtol=1e-4, atol=1e-4)
    assert min(held[1] for held in module.KC_EXCHANGE.values()) < 1 << 20
