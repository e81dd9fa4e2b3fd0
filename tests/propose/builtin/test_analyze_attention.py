"""What analyze() reads as attention: F.scaled_dot_product_attention and softmax(q @ k^T * scale) @ v by hand over
the first three inputs, what each detail means (checked against the reference), and what it declines, saying why."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.test_analyze import write

QKV = "[torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)]"


def attention_of(tmp_path, forward: str, init: str = "", inputs: str = QKV):
    """The analysis of a q, k, v reference, and (when it is one attention) a check that the detail means what the
    reference computes."""
    problem = write(tmp_path, "import math\n" + forward, init, inputs=inputs, args="q, k, v")
    analysis = analyze(problem)
    if analysis.single is not None and analysis.single.kind == "attention":
        d = analysis.single.detail
        module = problem.load(small=True)
        model = module.Model()
        q, k, v = module.get_inputs()
        scale = getattr(model, d["scale_attr"]) if d["scale_attr"] else d["scale"]
        want = F.scaled_dot_product_attention(q, k, v, is_causal=d["causal"], scale=scale)
        torch.testing.assert_close(model(q, k, v), want)
        assert analysis.n_inputs == 3
    return analysis


@pytest.mark.parametrize("name, causal", [("attention", False), ("sdpa_causal_fp16", True)])
def test_suite_attention_problems(name, causal):
    analysis = analyze(load_problem(f"level1/{name}"))
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == ("attention", {"causal": causal, "scale": None,
                                                                           "scale_attr": None})
    assert analysis.n_inputs == 3


@pytest.mark.parametrize("forward, init, detail", [
    ("return F.scaled_dot_product_attention(q, k, v)", "", (False, None, None)),
    ("return F.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=0.3)", "", (True, 0.3, None)),
    ("return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, scale=self.scale)",
     "self.causal = True\nself.scale = 0.25", (True, 0.25, "scale")),
    ("return torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1)), -1), v)", "",
     (False, None, None)),
    ("return (q @ k.mT * q.shape[-1] ** -0.5).softmax(dim=-1) @ v", "", (False, None, None)),
    ("return F.softmax((q / math.sqrt(q.shape[3])) @ k.transpose(2, 3), dim=3).matmul(v)", "", (False, None, None)),
    ("return torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.size()[-1])), dim=-1) @ v", "",
     (False, None, None)),
    ("return torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1) @ v", "self.scale = 0.125",
     (False, 0.125, "scale")),
    ("return torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1) @ v", "", (False, 0.25, None)),
    ("return self.sm(q @ k.transpose(-2, -1)) @ v", "self.sm = nn.Softmax(dim=-1)", (False, 1.0, None)),
])
def test_attention_spellings(tmp_path, forward, init, detail):
    analysis = attention_of(tmp_path, forward, init)
    assert analysis.single is not None and analysis.single.kind == "attention", analysis
    assert analysis.single.detail == dict(zip(("causal", "scale", "scale_attr"), detail))


def test_three_dim_inputs_and_a_plain_batched_product_still_a_matmul(tmp_path):
    qkv3 = "[torch.randn(3, 5, 8), torch.randn(3, 7, 8), torch.randn(3, 7, 4)]"
    analysis = attention_of(tmp_path, "return torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.5, -1), v)",
                            inputs=qkv3)
    assert analysis.single.detail == {"causal": False, "scale": 0.5, "scale_attr": None}
    analysis = attention_of(tmp_path, "return torch.bmm(q, k.transpose(1, 2))", inputs=qkv3)
    assert (analysis.single.kind, analysis.single.detail) == ("matmul", {"trans_a": False, "trans_b": True,
                                                                         "dtype": "float32"})


@pytest.mark.parametrize("forward, missing", [
    ("return F.scaled_dot_product_attention(q, k, v, attn_mask=q[..., :1] > 0)",
     "scaled_dot_product_attention (attn_mask)"),
    ("return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)", "scaled_dot_product_attention (dropout_p)"),
    ("return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)", "scaled_dot_product_attention (enable_gqa)"),
    ("return F.scaled_dot_product_attention(k, q, v)", "scaled_dot_product_attention (q, k, v other than the first "
                                                         "three inputs as passed)"),
    ("return F.scaled_dot_product_attention(q, k, v[:1])", "scaled_dot_product_attention (q, k, v other than the first "
                                                             "three inputs as passed)"),
    ("return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) * 2.0, dim=-1) @ v",
     "attention scale (neither a number nor 1/sqrt of the head size)"),
    ("return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), dim=-1) @ v", "div"),
    ("return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v", "matmul"),
    ("return torch.softmax(q @ k.transpose(-2, -1) + 1.0, dim=-1) @ v", "add"),
    ("return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ k", "matmul"),
])
def test_what_is_not_one_attention_says_why(tmp_path, forward, missing):
    analysis = attention_of(tmp_path, forward)
    assert analysis.single is None and analysis.error is None
    assert missing in analysis.unsupported, analysis.unsupported


def test_broadcast_batch_dims_are_declined(tmp_path):
    inputs = "[torch.randn(2, 3, 5, 8), torch.randn(1, 3, 7, 8), torch.randn(1, 3, 7, 4)]"
    analysis = attention_of(tmp_path, "return F.scaled_dot_product_attention(q, k, v)", inputs=inputs)
    assert analysis.single is None
    assert analysis.unsupported == ["scaled_dot_product_attention (shapes: broadcast or mismatched q, k, v)"]


def test_a_size_used_for_anything_else_is_still_declined(tmp_path):
    analysis = analyze(write(tmp_path, "return x.sum(-1) / x.shape[-1]"))
    assert analysis.single is None and "div" in analysis.unsupported
    analysis = analyze(write(tmp_path, "return x.view(x.size(0) // 2, -1)"))
    assert analysis.single is None and "view" in analysis.unsupported
    analysis = analyze(write(tmp_path, "return x.view(x.size(0), -1)"))  # a size read at run time: a view
    assert [(op.kind, op.detail) for op in analysis.chain] == [("view", {"shape": [["size", "x", 0], -1]})]


def test_torch_aligns_causal_masks_top_left():
    """is_causal with L != S: key j is seen by query i iff j <= i (the mask the kernel applies)."""
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 6, 4), torch.randn(1, 6, 2)
    for q_ in (q, torch.randn(1, 9, 4)):
        L, S = q_.shape[1], k.shape[1]
        scores = (q_ @ k.mT) / math.sqrt(4)
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), -float("inf"))
        torch.testing.assert_close(F.scaled_dot_product_attention(q_, k, v, is_causal=True),
                                   torch.softmax(scores, -1) @ v)


# A causal mask held as a boolean buffer (True past each query's diagonal), filling the scores with -inf before the
# softmax, as minGPT writes it; k passed transposed (k^T, as a model cut into regions hands it over) or not.
CAUSAL_MASK = "self.register_buffer('mask', torch.ones({L}, {S}, dtype=torch.bool).triu({d})[None, None])"
KT = "[torch.randn(2, 3, 5, 8), torch.randn(2, 3, 8, 7), torch.randn(2, 3, 7, 4)]"


@pytest.mark.parametrize("forward, inputs, k_t", [
    ("return torch.softmax((q @ k * 0.5).masked_fill(self.mask, float('-inf')), -1) @ v", KT, True),
    ("return torch.matmul(torch.softmax(torch.masked_fill(q @ k.transpose(-2, -1) * 0.5, self.mask, -math.inf), "
     "dim=-1), v)", QKV, False),
])
def test_a_causal_mask_held_as_a_buffer(tmp_path, forward, inputs, k_t):
    problem = write(tmp_path, "import math\n" + forward, CAUSAL_MASK.format(L=5, S=7, d=1), inputs=inputs,
                    args="q, k, v")
    analysis = analyze(problem)
    assert analysis.single is not None and analysis.single.kind == "attention", analysis
    assert analysis.single.detail == {"causal": True, "scale": 0.5, "scale_attr": None, **({"k_t": True} if k_t else {})}
    module = problem.load()
    q, k, v = module.get_inputs()
    want = F.scaled_dot_product_attention(q, k.transpose(-2, -1) if k_t else k, v, is_causal=True, scale=0.5)
    torch.testing.assert_close(module.Model()(q, k, v), want)  # what the detail says is what the reference does


@pytest.mark.parametrize("mask, fill, missing", [
    (CAUSAL_MASK.format(L=5, S=7, d=2), "float('-inf')", "masked_fill (a mask that is not causal)"),
    (CAUSAL_MASK.format(L=5, S=7, d=1).replace("[None, None]", "[None, None].expand(2, 3, 5, 7)"), "float('-inf')",
     "masked_fill (a mask that is not causal)"),
    (CAUSAL_MASK.format(L=5, S=7, d=1), "-1e9", "masked_fill"),
])
def test_other_masks_are_declined(tmp_path, mask, fill, missing):
    forward = f"return torch.softmax((q @ k.transpose(-2, -1)).masked_fill(self.mask, {fill}), -1) @ v"
    analysis = analyze(write(tmp_path, forward, mask, inputs=QKV, args="q, k, v"))
    assert analysis.single is None and missing in analysis.unsupported, analysis.unsupported
