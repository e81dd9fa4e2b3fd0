"""Attention's error at the verifier's large_scale trial (inputs 30x to 1000x), the built-in engineer's exact move
against float64 beside torch's own: its default SDPA kernel and its math path (scores, softmax, product). Mean
error relative to the output's rms, the share of elements equal to float64 (a row whose softmax picks one key is
exactly that key's value row), the worst error. The fused kernel on 64-wide heads (full and causal, at 1x too), the
wide heads' path (1024) with fp32 and fp64 products. It renders through the family tests' helpers, so run it from
the checkout's root:

    PYTHONPATH=src:. python benchmarks/attention_large_scale.py
    TRITON_DEFAULT_FP_FUSION=0 PYTHONPATH=src:. python benchmarks/attention_large_scale.py   # no FMA contraction

Record: `benchmarks/results/attention-large-scale-h200-2026-11-29.log` (its output on an H200)."""
import pathlib
import sys
import tempfile

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
from tests.propose.builtin.families.attention.test_attention import attn_op, sdpa_reference  # noqa: E402
from tests.propose.builtin.kernel_check import load, render  # noqa: E402

from kernelcraft.verify.policy import set_exact_fp32  # noqa: E402

set_exact_fp32(True)
tmp = pathlib.Path(tempfile.mkdtemp())


def run(module, shapes, scales, causal, fp64=None):
    if fp64 is not None:
        module.kc_fp64_gpu = lambda t: fp64
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.rand(s, generator=g) * c for s, c in zip(shapes, scales))
    q, k, v = (t.cuda() for t in (q, k, v))
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    rms = want.pow(2).mean().sqrt()
    got = module.ModelNew(causal)(q, k, v).double()
    own = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        math_ = F.scaled_dot_product_attention(q, k, v, is_causal=causal).double()

    def e(x):
        return (f"{((x - want).abs().mean() / rms).item():.3g} exact {(x == want).double().mean().item():.3f} "
                f"max {((x - want).abs().max() / rms).item():.3g}")
    print(f"  cand {e(got)} | torch {e(own)} | math {e(math_)}", flush=True)


if __name__ == "__main__":
    for causal in (False, True):
        m = load(render(attn_op(causal), sdpa_reference(), {}), tmp)
        print("fused causal" if causal else "fused full")
        run(m, ((2, 3, 96, 64), (2, 3, 80, 64), (2, 3, 80, 64)), (541.0, 32.0, 55.0), causal)
        run(m, ((2, 3, 96, 64), (2, 3, 80, 64), (2, 3, 80, 64)), (1.0, 1.0, 1.0), causal)
    m = load(render(attn_op(), sdpa_reference(), {}), tmp)
    for fp64 in (False, True):
        print("wide fp64" if fp64 else "wide fp32")
        run(m, ((2, 2, 64, 1024), (2, 2, 96, 1024), (2, 2, 96, 1024)), (541.0, 32.0, 55.0), False, fp64)
        run(m, ((2, 2, 64, 1024), (2, 2, 96, 1024), (2, 2, 96, 1024)), (115.0, 336.0, 55.0), False, fp64)
