"""Attention family: softmax(q @ k^T * scale [+ causal mask]) @ v over the forward's first three inputs, q (..., L, E),
k (..., S, E) and v (..., S, Ev), as one FlashAttention-style kernel (the L x S scores never reach memory).

A program owns a BLOCK_M tile of queries of one batch·head (the leading dims flattened; a 1-D grid) and walks the
keys in BLOCK_N tiles: scores by tl.dot, an online softmax (running max and sum in fp32, base-2 exponentials with log2 e
folded into the scale), the output tile accumulated in fp32 and rescaled whenever the running max grows, divided by
the sum once at the end. Causal attention is torch's top-left alignment (key j is seen by query i iff j <= i, for
any L and S): key tiles wholly past a query tile's diagonal are never visited, those on it are masked, the rest run
unmasked. Ragged L, S, E and Ev are masks (E and Ev padded to powers of two, at least 16 and 32, as constexprs); every size
and the scale (1/sqrt(E) unless the reference gives one) are read at run time.

Precision: fp16/bf16 inputs take the tensor cores with fp32 accumulation (the probabilities are rounded to the
input dtype before the product with v, as torch's own fused kernels do). For fp32 inputs "ieee" is exact fp32,
"tf32x3" keeps fp32-grade accuracy on the tensor cores (three TF32 products per tile), "tf32" rounds the inputs to
TF32 and is offered only under a tolerance policy that admits it (params["precision"] == "tf32", see
triton_kernels.needs_relaxed).
"""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.codegen import attr, num


def _moves(op: Op) -> list[tuple]:
    flash = ("FlashAttention forward: a program per (batch·head, {m}-query tile) walks the keys in {n}-wide tiles "
             "with an online softmax (running max and sum in fp32, exp2), so the L x S scores never reach memory{c}; "
             "{prec}; {w} warps, {s} stages")
    causal = ", key tiles past the causal diagonal skipped" if op.detail.get("causal") else ""
    exact = "fp32 inputs exact (ieee products), fp16/bf16 on tensor cores with fp32 accumulation"
    split = ("fp32 inputs as 3xTF32 on tensor cores (each operand a TF32 part plus a TF32 remainder, ~1e-6 "
             "relative), fp16/bf16 on tensor cores with fp32 accumulation")
    fold = ("the softmax scale (times log2 e) folded into the fp32 query tile once when it is loaded, so no score "
            "needs a multiply (fp16/bf16 inputs scale the scores: a 16-bit tile rounded after scaling would put "
            "an error of 1e-3 relative on every score)")
    tf32 = ("TF32 tensor cores for fp32 inputs (rounded to a 10-bit mantissa), so it needs a tolerance policy that "
            "admits TF32; fp16/bf16 inputs are unaffected")

    def p(m, n, w, s, prec, fold_q=False):
        return {"BLOCK_M": m, "BLOCK_N": n, "num_warps": w, "num_stages": s, "precision": prec, "fold_q": fold_q}

    def text(m, n, w, s, prec):
        return flash.format(m=m, n=n, c=causal, prec=prec, w=w, s=s)

    return [
        (text(128, 64, 8, 3, exact), "memory", p(128, 64, 8, 3, "ieee")),
        (text(64, 64, 4, 3, exact) + " (twice the programs of 128-query tiles: for few heads or short sequences)",
         "parallelism", p(64, 64, 4, 3, "ieee")),
        (text(128, 64, 8, 3, split), "compute", p(128, 64, 8, 3, "tf32x3")),
        (text(128, 128, 8, 2, exact) + " (wider key tiles: half the loop steps)", "control", p(128, 128, 8, 2, "ieee")),
        (text(128, 64, 4, 3, exact) + "; " + fold, "compute", p(128, 64, 4, 3, "ieee", True)),
        (text(64, 32, 4, 4, exact) + " (a deeper pipeline of narrow key tiles to hide load latency)", "async",
         p(64, 32, 4, 4, "ieee")),
        (text(128, 64, 8, 3, tf32), "precision", p(128, 64, 8, 3, "tf32")),
    ]


_KEYS = '''
@triton.jit
def kc_attention_keys(acc, l_i, m_i, q, k_base, v_base, rm, lo, hi, S, E, EV, s_kn, s_ke, s_vn, s_ve, qk_scale,
                      BLOCK_N: tl.constexpr, E_PAD: tl.constexpr, EV_PAD: tl.constexpr, MASKED: tl.constexpr,
                      CAUSAL: tl.constexpr, SCALED_Q: tl.constexpr, PREC: tl.constexpr):
    # key tiles [lo, hi): scores in base 2, the running max m_i and sum l_i updated, acc rescaled and += p @ v.
    # MASKED tiles drop keys past S and, when CAUSAL, keys past each query (top-left: key j is seen by query i iff
    # j <= i); the others lie wholly inside both bounds and take no mask on the scores
    re = tl.arange(0, E_PAD)
    rv = tl.arange(0, EV_PAD)
    for n0 in range(lo, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kt = tl.load(k_base + rn.to(tl.int64)[None, :] * s_kn + re[:, None] * s_ke,
                     mask=(rn < S)[None, :] & (re < E)[:, None], other=0.0)
        s = tl.dot(q, kt, input_precision=PREC)
        if not SCALED_Q:
            s = s * qk_scale
        if MASKED:
            keep = (rn < S)[None, :]
            if CAUSAL:
                keep = keep & (rn[None, :] <= rm[:, None])
            s = tl.where(keep, s, -float("inf"))
        # every row sees key 0 in the first tile it visits, so m_new is finite and no -inf - -inf arises
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + rn.to(tl.int64)[:, None] * s_vn + rv[None, :] * s_ve,
                    mask=(rn < S)[:, None] & (rv < EV)[None, :], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PREC)
        m_i = m_new
    return acc, l_i, m_i
'''

_ATTENTION = '''
@triton.jit
def kc_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, L, S, E, EV, qk_scale, s_qb, s_qm, s_qe, s_kb, s_kn, s_ke,
                        s_vb, s_vn, s_ve, s_ob, s_om, s_oe, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        E_PAD: tl.constexpr, EV_PAD: tl.constexpr, CAUSAL: tl.constexpr, SCALED_Q: tl.constexpr,
                        PREC: tl.constexpr):
    # program -> (batch·head, query tile), the tiles of one batch·head side by side so that they share its keys and
    # values in L2 (a 1-D grid: no limit on the batch). Causal: the costliest tiles (most keys) are launched first
    tiles_m = tl.cdiv(L, BLOCK_M)
    pid = tl.program_id(0)
    bid = (pid // tiles_m).to(tl.int64)
    if CAUSAL:
        pid_m = tiles_m - 1 - pid % tiles_m
    else:
        pid_m = pid % tiles_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    re = tl.arange(0, E_PAD)
    rv = tl.arange(0, EV_PAD)
    q = tl.load(q_ptr + bid * s_qb + rm.to(tl.int64)[:, None] * s_qm + re[None, :] * s_qe,
                mask=(rm < L)[:, None] & (re < E)[None, :], other=0.0)
    if SCALED_Q:  # scale * log2 e applied once to the tile, not to every score
        q = (q.to(tl.float32) * qk_scale).to(q.dtype)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, EV_PAD], tl.float32)
    full = S - S % BLOCK_N  # key tiles below `full` lie wholly inside S
    if CAUSAL:  # tiles below the first one that meets this query tile's diagonal need no mask; none past it is read
        mid = tl.minimum((pid_m * BLOCK_M) // BLOCK_N * BLOCK_N, full)
        hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    else:
        mid = full
        hi = S
    k_base = k_ptr + bid * s_kb
    v_base = v_ptr + bid * s_vb
    acc, l_i, m_i = kc_attention_keys(acc, l_i, m_i, q, k_base, v_base, rm, 0, mid, S, E, EV, s_kn, s_ke, s_vn,
                                      s_ve, qk_scale, BLOCK_N, E_PAD, EV_PAD, False, CAUSAL, SCALED_Q, PREC)
    acc, l_i, m_i = kc_attention_keys(acc, l_i, m_i, q, k_base, v_base, rm, mid, hi, S, E, EV, s_kn, s_ke, s_vn,
                                      s_ve, qk_scale, BLOCK_N, E_PAD, EV_PAD, True, CAUSAL, SCALED_Q, PREC)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # S == 0: no keys, zeros (softmax of nothing @ v)
    tl.store(o_ptr + bid * s_ob + rm.to(tl.int64)[:, None] * s_om + rv[None, :] * s_oe, out.to(o_ptr.dtype.element_ty),
             mask=(rm < L)[:, None] & (rv < EV)[None, :])
'''

LOG2E = 1.4426950408889634


def _render(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    bm, bn, warps, stages = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["num_warps"]), int(p["num_stages"])
    prec = str(p.get("precision", "ieee"))
    if prec not in ("ieee", "tf32x3", "tf32"):
        raise ValueError(f"unknown attention precision {prec!r}")
    if d.get("scale_attr"):
        scale = f"float({attr(d['scale_attr'])})"
    elif d.get("scale") is not None:
        scale = num(d["scale"])
    else:
        scale = "1.0 / E ** 0.5"
    fold = "q.dtype == torch.float32" if p.get("fold_q") else "False"  # 16-bit tiles scale the scores instead
    body = f'''
L, E, S, EV = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
if k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2] or k.shape[-1] != E or v.shape[-2] != S:
    raise ValueError("attention kernel: q (..., L, E), k (..., S, E), v (..., S, Ev) with equal leading dims")
o = torch.empty((*q.shape[:-2], L, EV), dtype=q.dtype, device=q.device)
if o.numel() == 0:
    return o
batch = math.prod(q.shape[:-2])  # the leading dims as one
q3, k3, v3, o3 = (t.reshape(batch, t.shape[-2], t.shape[-1]) for t in (q, k, v, o))
# Ev padded to at least 32 (16-bit inputs, E padded to 32 and Ev to 16, came out wrong on an H100 with Triton 3.6)
e_pad, ev_pad = max(16, triton.next_power_of_2(E)), max(32, triton.next_power_of_2(EV))
bm, bn, warps = {bm}, {bn}, {warps}
if max(e_pad, ev_pad) * q.element_size() > 256:  # wide rows: smaller tiles keep the stages in shared memory
    bm, bn = min(bm, 64), min(bn, 32)
if q.dtype != torch.float32:  # 16-bit inputs: 128-query tiles came out wrong on an H100 (Triton 3.6) for some
    bm, bn, warps = min(bm, 64), min(bn, 32), 4  # ragged head sizes; 64 x 32 tiles, 4 warps were right on all
prec = "{prec}" if q.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
qk_scale = {scale} * {LOG2E!r}  # softmax in base 2
grid = (triton.cdiv(L, bm) * batch,)
kc_attention_kernel[grid](q3, k3, v3, o3, L, S, E, EV, qk_scale, *q3.stride(), *k3.stride(), *v3.stride(),
                          *o3.stride(), BLOCK_M=bm, BLOCK_N=bn, E_PAD=e_pad, EV_PAD=ev_pad,
                          CAUSAL={bool(d.get("causal"))}, SCALED_Q={fold}, PREC=prec,
                          num_warps=warps, num_stages={stages})
return o'''
    return [_KEYS, _ATTENTION], body


KINDS = {"attention": (_moves, _render)}
INPUTS = {"attention": ("q", "k", "v")}  # the forward body reads the first three inputs as q, k, v
