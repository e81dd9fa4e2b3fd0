"""The attention family's kernels (the package docstring says what they compute): `kc_attention_keys`, a
@triton.jit function the kernel calls for the key tiles below a query tile's diagonal (unmasked) and on it
(masked), and `kc_attention_kernel`, one program per (batch·head, query tile); and ModelNew.forward's body, which
sends heads too wide for their registers to unfused.py's kernels."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent, num
from kernelcraft.propose.builtin.families.attention import unfused
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

LOG2E = 1.4426950408889634

_KEYS = '''
# key tiles [lo, hi): the running max m_i and sum l_i updated, acc rescaled and += p @ v. Unless SCALED_Q (the
# scores come scaled, in base 2, from the scaled query tile) the max is of the raw scores (negated when the scale
# is negative: NEG) and the scale applied to each score's difference from it, exp2((s - m) * qk_scale): the row's
# largest score weighs exactly 1 and a near-tie's weight carries the rounding of its difference only. Scaling
# each score first leaves exp2(s * c - m) to the compiler, which fuses it into one FMA whose unrounded product no
# longer meets m: at scores of 1e5 that alone put up to 0.5% on every weight.
# MASKED tiles drop keys past S and, when CAUSAL, keys past each query (top-left: key j is seen by query i iff
# j <= i); the others lie wholly inside both bounds and take no mask on the scores. BIAS: a finite bias the module
# holds (T5's position bias), read through its strides (0 where it broadcasts), added to each scaled score
re = tl.arange(0, E_PAD)
rv = tl.arange(0, EV_PAD)
for n0 in range(lo, hi, BLOCK_N):
    rn = n0 + tl.arange(0, BLOCK_N)
    kt = tl.load(k_base + rn.to(tl.int64)[None, :] * s_kn + re[:, None] * s_ke,
                 mask=(rn < S)[None, :] & (re < E)[:, None], other=0.0)
    s = tl.dot(q, kt, input_precision=PREC)
    if NEG and not SCALED_Q:
        s = -s
    if BIAS:  # a held bias added to the scaled scores: in base 2 from here on, as a scaled query's scores are
        bt = tl.load(b_base + rm.to(tl.int64)[:, None] * s_bm + rn.to(tl.int64)[None, :] * s_bn,
                     mask=(rm < L)[:, None] & (rn < S)[None, :], other=0.0).to(tl.float32) * 1.4426950408889634
        if SCALED_Q:
            s = s + bt
        else:
            s = s * qk_scale + bt
    if MASKED:
        keep = (rn < S)[None, :]
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, -float("inf"))
    # every row sees key 0 in the first tile it visits, so m_new is finite and no -inf - -inf arises
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if SCALED_Q or BIAS:
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
    else:  # a zero scale weighs every key alike: -inf * 0 would be NaN, so the masked and the first max go by where
        p = tl.exp2((s - m_new[:, None]) * qk_scale)
        if MASKED:
            p = tl.where(keep, p, 0.0)
        alpha = tl.where(m_i == -float("inf"), 0.0, tl.exp2((m_i - m_new) * qk_scale))
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_base + rn.to(tl.int64)[:, None] * s_vn + rv[None, :] * s_ve,
                mask=(rn < S)[:, None] & (rv < EV)[None, :], other=0.0)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PREC)
    m_i = m_new
return acc, l_i, m_i
'''

_ATTENTION = Template('''
# program -> (batch·head, query tile), the tiles of one batch·head side by side so that they share its keys and
# values in L2 (a 1-D grid: no limit on the batch). Causal: the costliest tiles (most keys) are launched first
tiles_m = tl.cdiv(L, BLOCK_M)
pid = tl.program_id(0)
bid = (pid // tiles_m).to(tl.int64)
b, h = bid // H, bid % H  # each tensor read through its own batch and head strides: a head split is no copy
if CAUSAL:
    pid_m = tiles_m - 1 - pid % tiles_m
else:
    pid_m = pid % tiles_m
rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
re = tl.arange(0, E_PAD)
rv = tl.arange(0, EV_PAD)
q = tl.load(q_ptr + b * s_qb + h * s_qh + rm.to(tl.int64)[:, None] * s_qm + re[None, :] * s_qe,
            mask=(rm < L)[:, None] & (re < E)[None, :], other=0.0)
if SCALED_Q:  # scale * log2 e applied once to the tile, not to every score
    if NEG:
        q = (q.to(tl.float32) * -qk_scale).to(q.dtype)
    else:
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
k_base = k_ptr + b * s_kb + h * s_kh
v_base = v_ptr + b * s_vb + h * s_vh
$bias_base
acc, l_i, m_i = $keys(acc, l_i, m_i, q, k_base, v_base, b_base, rm, 0, mid, L, S, E, EV, s_kn, s_ke, s_vn,
                                  s_ve, s_bm, s_bn, qk_scale, BLOCK_N, E_PAD, EV_PAD, False, CAUSAL, SCALED_Q, NEG,
                                  BIAS, PREC)
acc, l_i, m_i = $keys(acc, l_i, m_i, q, k_base, v_base, b_base, rm, mid, hi, L, S, E, EV, s_kn, s_ke, s_vn,
                                  s_ve, s_bm, s_bn, qk_scale, BLOCK_N, E_PAD, EV_PAD, True, CAUSAL, SCALED_Q, NEG,
                                  BIAS, PREC)
out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # S == 0: no keys, zeros (softmax of nothing @ v)
tl.store(o_ptr + b * s_ob + h * s_oh + rm.to(tl.int64)[:, None] * s_om + rv[None, :] * s_oe,
         out.to(o_ptr.dtype.element_ty), mask=(rm < L)[:, None] & (rv < EV)[None, :])
''')

_BODY = Template('''$k_view
L, E, S, EV = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
if k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2] or k.shape[-1] != E or v.shape[-2] != S:
    raise ValueError("attention kernel: q (..., L, E), k (..., S, E), v (..., S, Ev) with equal leading dims")
batch = math.prod(q.shape[:-2])  # the leading dims as one
# Ev padded to at least 32 (16-bit inputs, E padded to 32 and Ev to 16, came out wrong on an H100 with Triton 3.6)
e_pad, ev_pad = max(16, triton.next_power_of_2(E)), max(32, triton.next_power_of_2(EV))
prec = "$prec" if q.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
qk_scale = $scale * $log2e  # softmax in base 2; the kernels take its size and, as NEG, its sign
neg = qk_scale < 0
qk_scale = -qk_scale if neg else qk_scale
if $wide:  # rows too wide for the fused kernel's registers (unfused.py): (batch, rows, cols) operands$wide_bias
    o = torch.empty((*q.shape[:-2], L, EV), dtype=q.dtype, device=q.device)
    if o.numel() == 0:
        return o
    q3, k3, v3, o3 = (t.reshape(batch, t.shape[-2], t.shape[-1]) for t in (q, k, v, o))
$unfused
# The fused kernel reads q, k and v through their strides as they come (a head split of a projection's output is
# a transposed view: no copy), as (batch, heads, rows, cols), and writes o laid out as q is (heads split from a
# (batch, L, heads·E) projection: o's heads merge back into it with no copy either)
o = torch.empty_like(q) if EV == E and q.dim() <= 4 else torch.empty((*q.shape[:-2], L, EV), dtype=q.dtype,
                                                                      device=q.device)
if o.numel() == 0:
    return o
q4, k4, v4, o4 = (t[(None,) * (4 - t.dim())] if t.dim() < 4 else t.reshape(-1, *t.shape[-3:]) for t in (q, k, v, o))$bias_view
bm, bn, warps = $bm, $bn, $warps
if max(e_pad, ev_pad) * q.element_size() > 256:  # wide rows: smaller tiles keep the stages in shared memory
    bm, bn = min(bm, 64), min(bn, 32)
if q.dtype != torch.float32:  # 16-bit inputs: 128-query tiles came out wrong on an H100 (Triton 3.6) for some
    bm, bn, warps = min(bm, 64), min(bn, 32), 4  # ragged head sizes; 64 x 32 tiles, 4 warps were right on all
grid = (triton.cdiv(L, bm) * batch,)
$launch
return o''')

# a held bias: its pointer and its strides over (batch, head, query, key), 0 where it broadcasts
BIAS_PARAMS = ("b_ptr", "s_bb", "s_bh", "s_bm", "s_bn")
_BIAS_BASE = "b_base = b_ptr + b * s_bb + h * s_bh"
_NO_BIAS = "b_base, s_bm, s_bn = q_ptr, 0, 0  # no bias: never read"
_BIAS_VIEW = """
# the held bias as the scores see it: broadcast to (..., L, S) (a view, stride 0 where it broadcasts), as 4 dims
b4 = {bias}.expand(*q.shape[:-2], L, S)
b4 = b4[(None,) * (4 - b4.dim())] if b4.dim() < 4 else b4.reshape(-1, *b4.shape[-3:])"""
_WIDE_BIAS = """
    raise ValueError("attention kernel: heads this wide take the unfused path, which adds no bias")"""

# each tensor's strides: its batch (b) and head (h) dims, then its rows (queries m, keys n) and its last dim (e)
STRIDES = ("s_qb", "s_qh", "s_qm", "s_qe", "s_kb", "s_kh", "s_kn", "s_ke", "s_vb", "s_vh", "s_vn", "s_ve",
           "s_ob", "s_oh", "s_om", "s_oe")


def flash(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    if p.precision not in ("ieee", "tf32x3", "tf32"):
        raise ValueError(f"unknown attention precision {p.precision!r}")
    if d.get("scale_attr"):
        scale = f"float({attr(d['scale_attr'])})"
    elif d.get("scale") is not None:
        scale = num(d["scale"])
    else:
        scale = "1.0 / E ** 0.5"
    bias = d.get("bias")  # a held bias's attribute path (recognize.py)
    keys = TritonKernel(names("kc_attention_keys"),
                        ("acc", "l_i", "m_i", "q", "k_base", "v_base", "b_base", "rm", "lo", "hi", "L", "S", "E",
                         "EV", "s_kn", "s_ke", "s_vn", "s_ve", "s_bm", "s_bn", "qk_scale"),
                        ("BLOCK_N", "E_PAD", "EV_PAD", "MASKED", "CAUSAL", "SCALED_Q", "NEG", "BIAS", "PREC"), _KEYS)
    kernel = TritonKernel(names("kc_attention_kernel"),
                          ("q_ptr", "k_ptr", "v_ptr", "o_ptr", *(BIAS_PARAMS if bias else ()), "H", "L", "S", "E",
                           "EV", "qk_scale", *STRIDES),
                          ("BLOCK_M", "BLOCK_N", "E_PAD", "EV_PAD", "CAUSAL", "SCALED_Q", "NEG", "BIAS", "PREC"),
                          _ATTENTION.substitute(keys=keys.name, bias_base=_BIAS_BASE if bias else _NO_BIAS))
    fold = "q.dtype == torch.float32" if p.fold_q else "False"  # 16-bit tiles scale the scores instead
    bias_args = ["b4", *(f"b4.stride({i})" for i in range(4))] if bias else []
    launch = kernel.launch("grid", ["q4", "k4", "v4", "o4", *bias_args, "q4.shape[1]", "L", "S", "E", "EV",
                                    "qk_scale", *(f"{t}4.stride({i})" for t in "qkvo" for i in range(4))],
                           {"BLOCK_M": "bm", "BLOCK_N": "bn", "E_PAD": "e_pad", "EV_PAD": "ev_pad",
                            "CAUSAL": bool(d.get("causal")), "SCALED_Q": fold, "NEG": "neg", "BIAS": bool(bias),
                            "PREC": "prec"},
                           num_warps="warps", num_stages=int(p.num_stages))
    k_view = "\nk = k.transpose(-2, -1)  # passed as k^T (..., E, S): its strides read as k's" if d.get("k_t") else ""
    wide_kernels, wide = unfused.body(bool(d.get("causal")), p, names)
    body = _BODY.substitute(bm=int(p.BLOCK_M), bn=int(p.BLOCK_N), warps=int(p.num_warps), prec=p.precision,
                            scale=scale, log2e=repr(LOG2E), launch=launch, k_view=k_view, wide=unfused.WIDE,
                            unfused=indent(wide, 4), wide_bias=_WIDE_BIAS if bias else "",
                            bias_view=_BIAS_VIEW.format(bias=attr(bias)) if bias else "")
    return Rendered((keys, kernel, *wide_kernels), body)
