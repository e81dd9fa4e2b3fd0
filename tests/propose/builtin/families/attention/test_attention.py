"""The attention family: every move against torch on ragged shapes (L != S, E not a power of two, Ev != E, 2-D to
4-D inputs), causal or not, fp32 and fp16; the level-1 attention problems end to end; and the precision rules of
its moves."""

import json

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import CATEGORIES, Request
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from kernelcraft.propose.parse import parse_kernel
from tests.propose.builtin.kernel_check import ident, moves, needs_relaxed, render
from tests.propose.builtin.kernel_check import DEVICE, HEAD, assert_no_torch_compute, load

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# (q, k, v) shapes: L != S both ways, E and Ev odd and unequal, one key tile and several, 2-D to 4-D
SHAPES = [((2, 37, 24), (2, 45, 24), (2, 45, 13)), ((1, 2, 70, 33), (1, 2, 19, 33), (1, 2, 19, 8)),
          ((5, 3), (4, 3), (4, 17))]
LONG = ((1, 150, 20), (1, 140, 20), (1, 140, 5))  # several query tiles and key tiles: causal tiles skipped


def attn_op(causal=False, scale=None, scale_attr=None) -> Op:
    return Op("attention", {"causal": causal, "scale": scale, "scale_attr": scale_attr})


def sdpa_reference(scale_arg: str = "") -> str:
    return (HEAD + "class Model(nn.Module):\n    def __init__(self, causal=False, scale=None):\n"
            "        super().__init__()\n        self.causal = causal\n        self.scale = scale\n\n"
            "    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:\n"
            f"        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal{scale_arg})\n")


def tolerance(dtype) -> dict:
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-2, "atol": 2e-3}


def check_attention(op: Op, params, shapes: list, tmp_path, dtype=torch.float32, init=(), ref_src=None):
    """Render op's candidate; on each (q, k, v) shape compare ModelNew with sdpa computed in fp32."""
    source = render(op, ref_src or sdpa_reference(), params)
    assert_no_torch_compute(source)
    module = load(source, tmp_path)
    scale = op.detail["scale"] if op.detail["scale_attr"] is None else init[1]
    for qs, ks, vs in shapes:
        torch.manual_seed(0)
        q, k, v = (torch.randn(s, device=DEVICE).to(dtype) for s in (qs, ks, vs))
        got = module.ModelNew(*init)(q, k, v)
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=op.detail["causal"],
                                              scale=scale).to(dtype)
        assert got.shape == want.shape and got.dtype == dtype, (qs, ks, vs, got.shape)
        tol = tolerance(dtype)
        if params.precision == "tf32" and dtype == torch.float32 and DEVICE == "cuda":
            tol = {"rtol": 1e-2, "atol": 5e-3}  # TF32 products (the interpreter computes them in fp32)
        torch.testing.assert_close(got, want, **tol, msg=lambda m: f"{params} {qs} {ks} {vs}: {m}")


def test_moves_are_distinct_categorized_json_and_exact_first():
    for causal in (False, True):
        ms = moves(attn_op(causal))
        assert 3 <= len(ms) <= 8
        assert len({m.text for m in ms}) == len(ms)
        assert len({json.dumps(m.params.to_json(), sort_keys=True) for m in ms}) == len(ms)
        assert all(m.category in CATEGORIES for m in ms)
        assert [json.loads(json.dumps(m.params.to_json())) for m in ms] == [m.params.to_json() for m in ms]
        relaxed = [needs_relaxed(m) for m in ms]
        assert relaxed == sorted(relaxed) and relaxed.count(True) == 1  # the one TF32 move, last
        for m in ms:
            assert ("tolerance policy that admits TF32" in m.text) == needs_relaxed(m)
            assert m.params.BLOCK_M % m.params.BLOCK_N == 0
        assert any(m.params.precision == "tf32x3" for m in ms) and any(m.params.fold_q for m in ms)
        assert all(("causal" in m.text) == causal for m in ms)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("params", [m.params for m in moves(attn_op())], ids=ident)
def test_attention_moves(params, causal, tmp_path):
    check_attention(attn_op(causal), params, SHAPES, tmp_path, init=(causal,))
    check_attention(attn_op(causal), params, SHAPES, tmp_path, dtype=torch.float16, init=(causal,))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("index", [0, 1, 5])  # 128x64, 64x64 and 64x32 tiles
def test_many_query_and_key_tiles(index, causal, tmp_path):
    params = moves(attn_op())[index].params
    wide = ((2, 45, 70), (2, 50, 70), (2, 50, 66))  # fp32 rows of 128 padded: the smaller tiles
    check_attention(attn_op(causal), params, [LONG, ((37, 20), (100, 20), (100, 5)), wide], tmp_path, init=(causal,))


def test_a_given_scale_read_from_the_module_and_a_literal_one(tmp_path):
    params = moves(attn_op())[4].params  # the scale folded into q
    check_attention(attn_op(True, 0.3, "scale"), params, SHAPES[:2], tmp_path, init=(True, 0.3),
                    ref_src=sdpa_reference(", scale=self.scale"))
    source = render(attn_op(False, 0.3), sdpa_reference(", scale=0.3"), params)
    assert "qk_scale = 0.3 *" in source


@pytest.mark.parametrize("scale", [-0.7, 0.0])
@pytest.mark.parametrize("params", [m.params for m in moves(attn_op()) if not needs_relaxed(m)], ids=ident)
def test_a_negative_and_a_zero_scale(params, scale, tmp_path):
    """The kernels take the scale's size and its sign apart (the max of the raw scores, negated for a negative
    scale); a zero scale weighs every key alike, with no NaN from the masked keys or the first tile's rescale."""
    check_attention(attn_op(True, scale), params, SHAPES[:2] + [LONG], tmp_path, init=(True,),
                    ref_src=sdpa_reference(f", scale={scale}"))


def one_hot_error(module, shapes, scales, causal=False) -> tuple[float, float]:
    """The candidate's and torch's fp32 mean error, relative to the output's rms, against float64 attention on
    inputs 30x to 1000x their natural size (the verifier's large_scale trial): nearly every row's softmax picks one
    key, so float64's output is that key's value row. Torch's error is the larger of its default kernel's and its
    math path's (scores, softmax, product: on an H200 the kernels here match the math path's error exactly, 4x to
    30x the fused default's at the few rows whose top scores nearly tie). The scale's rounding met in an FMA put up
    to 0.5% on each weight on an H200 (mean error 2e-3, 500x either); the interpreter never fuses, so on a CPU
    this holds either way."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.rand(s, generator=g) * c for s, c in zip(shapes, scales))
    q, k, v = (t.to(DEVICE) for t in (q, k, v))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    rms = want.pow(2).mean().sqrt()
    got = module.ModelNew(causal)(q, k, v).double()
    own = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()
    with sdpa_kernel(SDPBackend.MATH):
        math_path = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()
    errors = [((x - want).abs().mean() / rms).item() for x in (got, own, math_path)]
    return errors[0], max(errors[1:])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_large_scores_weigh_the_top_key_exactly(causal, tmp_path):
    module = load(render(attn_op(causal), sdpa_reference(), {}), tmp_path)
    err, own = one_hot_error(module, ((2, 3, 96, 64), (2, 3, 80, 64), (2, 3, 80, 64)), (541.0, 32.0, 55.0), causal)
    assert err < 4 * own + 1e-7, (err, own)


def test_no_keys_give_zeros_and_strided_inputs_are_read_as_given(tmp_path):
    module = load(render(attn_op(), sdpa_reference(), {}), tmp_path)
    q, k, v = torch.randn(3, 8, device=DEVICE), torch.randn(0, 8, device=DEVICE), torch.randn(0, 4, device=DEVICE)
    torch.testing.assert_close(module.ModelNew()(q, k, v), torch.zeros(3, 4, device=DEVICE))
    q, k, v = (torch.randn(2, n, 3, 16, device=DEVICE).transpose(1, 2) for n in (9, 11, 11))  # (B, H, L, E) views
    torch.testing.assert_close(module.ModelNew()(q, k, v), F.scaled_dot_product_attention(q, k, v), rtol=1e-4,
                               atol=1e-5)
    with pytest.raises(ValueError, match="equal leading dims"):
        module.ModelNew()(torch.randn(2, 3, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8))


def test_heads_cut_from_a_fused_projection_are_read_in_place_and_the_output_is_laid_out_as_q(tmp_path):
    """q, k, v as a model hands them over (gapped, transposed views of one (B, L, 3·H·E) projection) give
    sdpa's values, and o comes back in q's layout, so its heads merge back into (B, L, H·E) with no copy; more
    than two leading dims are taken too."""
    module = load(render(attn_op(), sdpa_reference(), {}), tmp_path)
    torch.manual_seed(0)
    fused = torch.randn(2, 19, 3 * 3 * 16, device=DEVICE)
    q, k, v = (t.view(2, 19, 3, 16).transpose(1, 2) for t in fused.split(48, dim=-1))
    o = module.ModelNew()(q, k, v)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), rtol=1e-4, atol=1e-5)
    assert o.transpose(1, 2).is_contiguous()  # (B, L, H, E): .reshape(B, L, H·E) is a view
    q5, k5, v5 = (torch.randn(2, 2, 3, n, 16, device=DEVICE) for n in (9, 11, 11))
    torch.testing.assert_close(module.ModelNew()(q5, k5, v5), F.scaled_dot_product_attention(q5, k5, v5),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(DEVICE != "cuda", reason="Triton's interpreter computes bf16 tl.dot wrongly (numpy has no bf16)")
def test_attention_bf16(tmp_path):
    for params in (m.params for m in moves(attn_op())[:2]):
        check_attention(attn_op(True), params, SHAPES, tmp_path, dtype=torch.bfloat16, init=(True,))


def test_fp32_precision_per_move():
    """fp32 inputs: exact (ieee) or 3xTF32 unless the move is the relaxed TF32 one; half inputs always "ieee"."""
    for m in moves(attn_op()):
        source = render(attn_op(), sdpa_reference(), m.params)
        assert f'prec = "{m.params.precision}" if q.dtype == torch.float32 else "ieee"' in source
    strict, relaxed = BuiltinProposer("cuda"), BuiltinProposer("cuda", precision_moves=True)
    assert not any(needs_relaxed(m) for m in strict.moves(attn_op(), "triton"))
    assert any(needs_relaxed(m) for m in relaxed.moves(attn_op(), "triton"))
    # a CPU runs the kernels in Triton's interpreter, which computes 3xTF32 and TF32 as exact fp32: not offered
    on_cpu = BuiltinProposer("cpu", precision_moves=True).moves(attn_op(), "triton")
    assert on_cpu and all(m.params.precision == "ieee" for m in on_cpu)


@pytest.mark.parametrize("name, causal, dtype", [("attention", False, torch.float32),
                                                 ("sdpa_causal_fp16", True, torch.float16)])
def test_suite_attention_problems(name, causal, dtype, tmp_path):
    """Covered by the engineer; its first move's candidate matches Model on the problem's small sizes."""
    problem = load_problem(f"level1/{name}")
    op = BuiltinProposer("cpu").coverage(problem, "triton").single
    assert op == attn_op(causal)
    module = load(render(op, problem.source, moves(op)[0].params), tmp_path)
    small = problem.load(small=True)
    torch.manual_seed(0)
    q, k, v = (t.to(DEVICE) for t in small.get_inputs())
    assert q.dtype == dtype and q.shape == (2, 3, 37, 24)
    want = small.Model()(q.float(), k.float(), v.float()).to(dtype)
    got = module.ModelNew()(q, k, v)
    assert got.dtype == dtype
    torch.testing.assert_close(got, want, **tolerance(dtype))
    torch.testing.assert_close(got, small.Model()(q, k, v), **tolerance(dtype))  # and in the problem's own dtype


def test_a_forward_with_other_names_reads_its_first_three_inputs_as_q_k_v(tmp_path):
    ref = sdpa_reference().replace("forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor)",
                                   "forward(self, query, key, value)").replace("(q, k, v,", "(query, key, value,")
    source = render(attn_op(), ref, {})
    assert "q, k, v = query, key, value\n" in source
    module = load(source, tmp_path)
    q, k, v = (torch.randn(2, n, 8, device=DEVICE) for n in (5, 6, 6))
    torch.testing.assert_close(module.ModelNew()(q, k, v), module.Model()(q, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_large_scores_keep_the_folded_scale_exact_enough(dtype, tmp_path):
    """The move that folds the scale into the query tile, on inputs whose every element has its own scale (0.01x to
    100x, the verifier's mixed-scale trial): scores reach the thousands, and a 16-bit tile rounded after scaling
    put 1e-3 relative on every score, so the softmax picked other keys (sdpa_causal_fp16 on the H100: 51.25
    against 2.54). 16-bit inputs scale the scores instead."""
    params = next(m.params for m in moves(attn_op()) if m.params.fold_q)
    module = load(render(attn_op(True), sdpa_reference(), params), tmp_path)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(s, generator=g) * 10 ** (torch.rand(s, generator=g) * 4 - 2)
               for s in ((2, 128, 64), (2, 128, 64), (2, 128, 64)))
    q, k, v = (t.to(DEVICE, dtype) for t in (q, k, v))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    got = module.ModelNew(True)(q, k, v).double()
    err = ((got - want).abs() / (want.abs() + want.pow(2).mean().sqrt())).max().item()
    assert err < (1e-4 if dtype == torch.float32 else 1e-2), err


def kt_reference() -> str:
    """A reference over (q, k^T, v) for the candidate file to carry (the check compares with causal SDPA itself:
    the mask minGPT holds as a buffer has the shape of the inputs, which vary here)."""
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "    def forward(self, q, k_t, v):\n"
            "        return torch.softmax(q @ k_t * 0.25, dim=-1) @ v\n")


KT_OP = Op("attention", {"causal": True, "scale": 0.25, "scale_attr": None, "k_t": True})


@pytest.mark.parametrize("move", moves(KT_OP), ids=lambda m: ident(m.params))
def test_every_move_with_k_passed_transposed(move, tmp_path):
    """k handed over as k^T (..., E, S), a strided view of it read as k: every move, causal, on ragged shapes."""
    params = move.params
    if needs_relaxed(move):
        pytest.skip("a relaxed-policy move (TF32): checked at its own tolerance elsewhere")
    module = load(render(KT_OP, kt_reference(), params), tmp_path)
    for qs, ks, vs in SHAPES[:2] + [LONG]:
        torch.manual_seed(0)
        q, k, v = (torch.randn(s, device=DEVICE) for s in (qs, ks, vs))
        k_t = k.transpose(-2, -1).contiguous()
        got = module.ModelNew()(q, k_t, v)
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25),
                                   **tolerance(torch.float32))


def masked_reference(mask: str) -> str:
    """sdpa with a mask the module holds as a buffer (as `apply` holds a mask a model computes from its sizes)."""
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.register_buffer('mask', {mask})\n\n"
            "    def forward(self, q, k, v):\n"
            "        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, scale=0.3)\n\n\n"
            "def get_inputs():\n    return [torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 8)]\n\n\n"
            "def get_init_inputs():\n    return []\n")


CAUSAL_BOOL = "torch.ones(12, 12, dtype=torch.bool).tril()"


@pytest.mark.parametrize("mask, causal", [
    (CAUSAL_BOOL, True), (f"{CAUSAL_BOOL}[None, None].expand(2, 1, 12, 12)", True),
    ("torch.zeros(12, 12).masked_fill(~" + CAUSAL_BOOL + ", float('-inf'))", True),
    ("torch.zeros(12, 12).masked_fill(~" + CAUSAL_BOOL + ", torch.finfo(torch.float32).min)", True),
    ("torch.ones(1, 12, dtype=torch.bool)", False), ("torch.zeros(12, 12)", False),
])
def test_a_held_mask_that_is_none_or_the_causal_one(mask, causal, tmp_path):
    """The mask's values decide: the kernel is specialised to them (all kept, or key j kept for query i iff j <= i)."""
    path = tmp_path / "masked.py"
    path.write_text(masked_reference(mask))
    problem, engineer = load_problem(path), BuiltinProposer(DEVICE)
    op = engineer.coverage(problem, "triton").single
    assert op is not None and op.kind == "attention" and op.detail["causal"] is causal
    module = load(parse_kernel(engineer.ask(Request("implement", problem, "triton")).text).source, tmp_path)
    q, k, v = (x.to(DEVICE) for x in module.get_inputs())
    torch.testing.assert_close(module.ModelNew()(q, k, v), module.Model().to(DEVICE)(q, k, v),
                               **tolerance(torch.float32))


def biased_reference(bias: str, scale: str = "0.3") -> str:
    """sdpa with a float bias the module holds (T5's position bias, as `apply` holds it), 70 keys: two key tiles,
    the second ragged."""
    return (HEAD + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.register_buffer('bias', {bias})\n\n"
            "    def forward(self, q, k, v):\n"
            f"        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, scale={scale})\n\n\n"
            "def get_inputs():\n    return [torch.randn(2, 3, 12, 16), torch.randn(2, 3, 70, 16), torch.randn(2, 3, 70, 8)]\n\n\n"
            "def get_init_inputs():\n    return []\n")


BIASES = ["torch.randn(12, 70) * 4", "torch.randn(3, 12, 70)", "torch.randn(2, 1, 12, 70)",
          "torch.randn(1, 70) - 30.0"]


@pytest.mark.parametrize("bias", BIASES)
def test_a_held_bias_is_read_at_run_time_by_every_move(bias, tmp_path):
    """A finite float mask is a bias added to the scaled scores, read through its strides (broadcast over batch,
    heads or queries as torch broadcasts it), whatever values it holds when the kernel runs: every move, and new
    values put into the buffer after the kernel was written."""
    path = tmp_path / "biased.py"
    path.write_text(biased_reference(bias))
    problem, engineer = load_problem(path), BuiltinProposer(DEVICE)
    op = engineer.coverage(problem, "triton").single
    assert op is not None and op.kind == "attention" and op.detail["bias"] == "bias" and not op.detail["causal"]
    for move in moves(op):
        if needs_relaxed(move):
            continue
        module = load(render(op, biased_reference(bias), move.params), tmp_path)
        torch.manual_seed(0)
        model, new = module.Model().to(DEVICE), module.ModelNew().to(DEVICE)
        new.load_state_dict(model.state_dict())  # the buffer's values as the verifier hands them over
        q, k, v = (x.to(DEVICE) for x in module.get_inputs())
        torch.testing.assert_close(new(q, k, v), model(q, k, v), **tolerance(torch.float32),
                                   msg=lambda m: f"{move.params}: {m}")
        with torch.no_grad():
            model.bias.copy_(torch.randn_like(model.bias) * 8)
            new.bias.copy_(model.bias)
        torch.testing.assert_close(new(q, k, v), model(q, k, v), **tolerance(torch.float32))


@pytest.mark.parametrize("mask", ["torch.rand(12, 12) < 0.5", "torch.randn(12, 12).masked_fill(torch.rand(12, 12) "
                                  "< 0.5, float('-inf'))", "torch.ones(12, 12, dtype=torch.bool).triu()"])
def test_any_other_held_mask_is_refused(mask, tmp_path):
    path = tmp_path / "masked.py"
    path.write_text(masked_reference(mask))
    with pytest.raises(CoverageError, match="attn_mask"):
        BuiltinProposer(DEVICE).coverage(load_problem(path), "triton")
