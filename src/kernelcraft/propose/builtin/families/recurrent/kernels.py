"""The recurrent family's kernels and host code.

Per layer and direction, two kernels:
  - `projection`: the input projection of every time step at once, G = x_t @ W_ih^T + b_ih for all t, one GEMM
    whose rows are the (t, b) pairs of the layer's input read through its strides (batch-first or time-major, or
    the previous layer's output), into an fp32 buffer (T, B, gates * H);
  - `step`: one launch per time step (reversed for the backward direction): each program takes BLOCK_B batch rows
    x BLOCK_H hidden units, computes h_prev @ W_hh^T for each gate's rows in BLOCK_K-wide steps (fp32, exact),
    adds G_t and b_hh, applies the gates and the cell update in registers and writes h_t into the layer's output
    sequence (its direction's half), h_t and c_t into h_n and c_n. h_prev is the output the step before wrote (or
    the initial state, or zeros), so no program reads what another writes in the same launch; c is updated in
    place in c_n, each element by the program that owns it.
The host code (ModelNew.forward's body) reads the module's hyper-parameters and weights at run time, allocates the
buffers (the last layer's output in the layout the result needs, two ping-pong buffers for the layers between) and
launches the kernels. torch's formulas and gate orders:
  LSTM  i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of (G + h W_hh^T + b_hh); c = f c_prev + i g; h = o tanh(c)
  GRU   r, z = sigmoid(G_rz + h W_hz^T + b_hz); n = tanh(G_n + r (h W_hn^T + b_hn)); h = (1 - z) n + z h_prev
"""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op, states
from kernelcraft.propose.builtin.steps import step_lines

GATES = {"lstm": 4, "gru": 3}
# the step kernel's parameters that change from one time step (or layer) to the next: one compilation serves them all
STEP_OFFSETS = ("t", "hp_off", "out_off", "n_off", "cp_off")
PROJECTION_TILE = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}

_PROJECTION = '''
# rows r = t * B + b of the layer's input, read through its (t, b, k) strides; G (T * B, N) contiguous, fp32
rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
rn = (tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
rk = tl.arange(0, BLOCK_K).to(tl.int64)
rows = x_ptr + (rm // B) * s_xt + (rm % B) * s_xb
acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
for k0 in range(0, K, BLOCK_K):
    kk = k0 + rk
    a = tl.load(rows[:, None] + kk[None, :] * s_xk, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
    w = tl.load(w_ptr + rn[None, :] * s_wn + kk[:, None] * s_wk, mask=(kk[:, None] < K) & (rn[None, :] < N),
                other=0.0)
    acc = tl.dot(a.to(tl.float32), w.to(tl.float32), acc, input_precision=PREC)
if HAS_BIAS:
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
tl.store(g_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''

_STEP = Template('''
# a BLOCK_B x BLOCK_H tile of (batch row, hidden unit) at time step t; gate q's rows of W_hh are q * H + j
rb = (tl.program_id(1) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
rj = (tl.program_id(0) * BLOCK_H + tl.arange(0, BLOCK_H)).to(tl.int64)
rk = tl.arange(0, BLOCK_K).to(tl.int64)
mb = rb < B
mj = rj < H
tile = mb[:, None] & mj[None, :]
$zeros
if not ZERO:  # h_prev @ W_hh^T, gate by gate (a first step from zero states has none)
    for k0 in range(0, H, BLOCK_K):
        kk = k0 + rk
        h = tl.load(hp_ptr + hp_off + rb[:, None] * s_hpb + kk[None, :] * s_hpk, mask=mb[:, None] & (kk[None, :] < H),
                    other=0.0).to(tl.float32)
        wmask = (kk[:, None] < H) & mj[None, :]
$products
g_row = g_ptr + (t * B + rb[:, None]) * (GATES * H) + rj[None, :]
$preacts
$cell
out = h_new.to(out_ptr.dtype.element_ty)
tl.store(out_ptr + out_off + rb[:, None] * s_ob + rj[None, :] * s_ok, out, mask=tile)
tl.store(hn_ptr + n_off + rb[:, None] * H + rj[None, :], out, mask=tile)
''')

_LSTM_CELL = Template('''if ZERO:
    c_prev = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
else:
    c_prev = tl.load(cp_ptr + cp_off + rb[:, None] * s_cpb + rj[None, :] * s_cpk, mask=tile, other=0.0).to(tl.float32)
$tanh_g
c = ${sig_f} * c_prev + ${sig_i} * tg
$tanh_c
h_new = ${sig_o} * tc
tl.store(cn_ptr + n_off + rb[:, None] * H + rj[None, :], c.to(cn_ptr.dtype.element_ty), mask=tile)''')

_GRU_CELL = Template('''if ZERO:
    h_prev = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)
else:
    h_prev = tl.load(hp_ptr + hp_off + rb[:, None] * s_hpb + rj[None, :] * s_hpk, mask=tile, other=0.0).to(tl.float32)
r = ${sig_r}
z = ${sig_z}
$tanh_n
h_new = (1.0 - z) * n + z * h_prev''')


def _sigmoid(u: str) -> str:
    return f"(1.0 / (1.0 + tl.exp(-{u})))"


def _tanh(var: str, u: str) -> str:
    """`var = tanh(u)` as the steps' tanh (small arguments keep their digits, large ones saturate)."""
    return "\n".join([f"x = {u}", *step_lines([["tanh"]]), f"{var} = x"])


def _preacts(kind: str, acc: list[str]) -> str:
    """Each gate's pre-activation: its projection G_t, its h_prev product and b_hh. A GRU's candidate gate keeps
    G_n (gn) apart: r scales only h_prev W_hn^T + b_hn."""
    lines = []
    for q, a in enumerate(acc):
        g = f"tl.load(g_row + {q} * H, mask=tile, other=0.0)"
        lines.append(f"gn = {g}" if kind == "gru" and q == 2 else f"{a} += {g}")
        lines.append(f"if HAS_BIAS:\n    {a} += tl.load(b_ptr + {q} * H + rj, mask=mj, other=0.0).to(tl.float32)"
                     "[None, :]")
    return "\n".join(lines)


def _cell(kind: str) -> str:
    if kind == "lstm":
        return _LSTM_CELL.substitute(tanh_g=_tanh("tg", "a2"), tanh_c=_tanh("tc", "c"), sig_i=_sigmoid("a0"),
                                     sig_f=_sigmoid("a1"), sig_o=_sigmoid("a3"))
    return _GRU_CELL.substitute(sig_r=_sigmoid("a0"), sig_z=_sigmoid("a1"), tanh_n=_tanh("n", "gn + r * a2"))


def step(op: Op, names: Names) -> TritonKernel:
    """The fused step kernel of an lstm or gru op (module docstring)."""
    kind, gates = op.kind, GATES[op.kind]
    acc = [f"a{q}" for q in range(gates)]
    zeros = "\n".join(f"{a} = tl.zeros([BLOCK_B, BLOCK_H], dtype=tl.float32)" for a in acc)
    products = "\n".join(
        f"        w = tl.load(w_ptr + ({q} * H + rj[None, :]) * s_wn + kk[:, None] * s_wk, mask=wmask, other=0.0)\n"
        f"        {a} = tl.dot(h, w.to(tl.float32), {a}, input_precision=\"ieee\")" for q, a in enumerate(acc))
    body = _STEP.substitute(zeros=zeros, products=products, preacts=_preacts(kind, acc), cell=_cell(kind))
    lstm = kind == "lstm"
    params = ["g_ptr", "w_ptr", "b_ptr", "hp_ptr", "out_ptr", "hn_ptr", *(["cp_ptr", "cn_ptr"] if lstm else []),
              "t", "B", "H", "s_wn", "s_wk", "hp_off", "s_hpb", "s_hpk", "out_off", "s_ob", "s_ok", "n_off",
              *(["cp_off", "s_cpb", "s_cpk"] if lstm else [])]
    return TritonKernel(names(f"kc_{kind}_step_kernel"), tuple(params),
                        ("GATES", "ZERO", "HAS_BIAS", "BLOCK_B", "BLOCK_H", "BLOCK_K"), body,
                        comment=f"one {kind.upper()} time step of one layer and direction, gates and cell fused",
                        unspecialized=STEP_OFFSETS[:5 if lstm else 4])


def projection(names: Names) -> TritonKernel:
    """The input projection GEMM of one layer and direction (module docstring)."""
    return TritonKernel(names("kc_rnn_projection_kernel"),
                        ("x_ptr", "w_ptr", "b_ptr", "g_ptr", "M", "N", "K", "B", "s_xt", "s_xb", "s_xk", "s_wn",
                         "s_wk"),
                        ("HAS_BIAS", "PREC", "BLOCK_M", "BLOCK_N", "BLOCK_K"), _PROJECTION,
                        comment="the input projection x_t @ W_ih^T + b_ih of every time step at once (fp32)")


_HOST = Template('''
m = $module
if m.proj_size > 0:
    raise ValueError("an LSTM with proj_size (its hidden state projected) is not covered")
if m.training and m.dropout > 0 and m.num_layers > 1:
    raise ValueError("dropout between layers in training mode is not covered (in eval mode it is the identity)")
L, D, H = m.num_layers, 2 if m.bidirectional else 1, m.hidden_size
if x.dim() not in (2, 3):
    raise ValueError(f"$kind: expected a 2-D (unbatched) or 3-D input, got {x.dim()}-D")
batched = x.dim() == 3
seq = x if batched else x.unsqueeze(1)  # unbatched: one batch row, batch_first ignored (as torch does)
tdim = 1 if batched and m.batch_first else 0
T, B = seq.shape[tdim], seq.shape[1 - tdim]
if T == 0:
    raise ValueError("Expected sequence length to be larger than 0 in RNN")
${states_in}weights = m.all_weights  # per layer and direction: w_ih, w_hh[, b_ih, b_hh]
hn = torch.empty((L * D, B, H), dtype=x.dtype, device=x.device)
${cn_alloc}# the last layer's output in the result's layout; the layers before it take turns in two time-major buffers
major = $major
y = torch.empty((B, T, D * H) if major else (T, B, D * H), dtype=x.dtype, device=x.device)
s_yt, s_yb = (y.stride(1), y.stride(0)) if major else (y.stride(0), y.stride(1))
between = [torch.empty((T, B, D * H), dtype=x.dtype, device=x.device) for _ in range(min(L - 1, 2))]
g = torch.empty((T, B, $gates * H), dtype=torch.float32, device=x.device)
src, s_it, s_ib, s_ik = seq, seq.stride(tdim), seq.stride(1 - tdim), seq.stride(2)
if B > 0:
    for layer in range(L):
        out = y if layer == L - 1 else between[layer % 2]
        s_ot, s_ob, s_ok = (s_yt, s_yb, y.stride(2)) if layer == L - 1 else out.stride()
        K = src.shape[-1]
        for d in range(D):
            k = layer * D + d
            w_ih, w_hh = weights[k][0], weights[k][1]
            b_ih, b_hh = (weights[k][2], weights[k][3]) if m.bias else (w_ih, w_hh)
            M, N = T * B, $gates * H
            $projection
            for s in range(T):
                t = T - 1 - s if d else s
                if s == 0:  # the initial state (or zeros: the kernel reads nothing)
                    $first
                else:  # h_prev: what the step before wrote into this direction's half of the output
                    tp = t + 1 if d else t - 1
                    hp, hp_off, s_hpb, s_hpk = out, tp * s_ot + d * H * s_ok, s_ob, s_ok
                    $later
                $step
        src, s_it, s_ib, s_ik = out, s_ot, s_ob, s_ok
$result''')


def _host_states(kind: str) -> str:
    """The initial states' checks (batched like the input), or none."""
    names = "h0, c0" if kind == "lstm" else "h0"
    return (f"{names}, = [s if batched else s.unsqueeze(1) for s in states]\n"
            f"for s in ({names},):\n"
            "    if tuple(s.shape) != (L * D, B, H):\n"
            f"        raise ValueError(f\"{kind}: expected an initial state of shape {{(L * D, B, H)}}, got "
            "{tuple(s.shape)}\")")


def _first(kind: str, given: bool) -> str:
    """The first step's previous state: the initial state's slice for this layer and direction, or none."""
    lines = []
    if given:
        lines.append("hp, hp_off, s_hpb, s_hpk = h0, k * h0.stride(0), h0.stride(1), h0.stride(2)")
        if kind == "lstm":
            lines.append("cp, cp_off, s_cpb, s_cpk = c0, k * c0.stride(0), c0.stride(1), c0.stride(2)")
    else:
        lines.append("hp, hp_off, s_hpb, s_hpk = hn, 0, 0, 0")
        if kind == "lstm":
            lines.append("cp, cp_off, s_cpb, s_cpk = cn, 0, 0, 0")
    return "\n".join(lines)


def _result(op: Op) -> str:
    """The op's result from y, hn, cn (the unbatched ones without their batch dim); `index` picks one entry."""
    d = op.detail
    full = {"output": "y", "h_n": "hn", "c_n": "cn"}[d["result"]]
    lines = [f"r = {full}"]
    if d.get("index") is not None:  # y is time-major then: r[index] is one time step, contiguous
        if d["result"] == "output":
            lines.append("if not batched and m.batch_first:\n"
                         "    raise ValueError(\"a subscript of an unbatched output that is no time step\")")
        lines.append(f"r = r[{int(d['index'])}]")
        lines.append("return r if batched else r.reshape(r.shape[1:])")
    else:
        lines.append("return r if batched else r.reshape((r.shape[0], r.shape[2]))")
    return "\n".join(lines)


def render(op: Op, p, names: Names) -> Rendered:
    """ModelNew.forward's body for the op, and its two kernels."""
    kind, gates, given = op.kind, GATES[op.kind], bool(states(op))
    proj, stp = projection(names), step(op, names)
    tile = PROJECTION_TILE
    proj_launch = proj.launch(
        f"(triton.cdiv(M, {tile['BLOCK_M']}), triton.cdiv(N, {tile['BLOCK_N']}))",
        ["src", "w_ih", "b_ih", "g", "M", "N", "K", "B", "s_it", "s_ib", "s_ik", "w_ih.stride(0)", "w_ih.stride(1)"],
        {"HAS_BIAS": "m.bias", "PREC": repr(p.precision), **tile}, num_warps=4)
    args = ["g", "w_hh", "b_hh", "hp", "out", "hn", *(["cp", "cn"] if kind == "lstm" else []),
            "t", "B", "H", "w_hh.stride(0)", "w_hh.stride(1)", "hp_off", "s_hpb", "s_hpk", "t * s_ot + d * H * s_ok",
            "s_ob", "s_ok", "k * B * H", *(["cp_off", "s_cpb", "s_cpk"] if kind == "lstm" else [])]
    zero = "False" if given else "s == 0"
    step_launch = stp.launch(f"(triton.cdiv(H, {int(p.BLOCK_H)}), triton.cdiv(B, {int(p.BLOCK_B)}))", args,
                             {"GATES": gates, "ZERO": zero, "HAS_BIAS": "m.bias", "BLOCK_B": int(p.BLOCK_B),
                              "BLOCK_H": int(p.BLOCK_H), "BLOCK_K": int(p.BLOCK_K)}, num_warps=int(p.num_warps))
    d = op.detail
    body = _HOST.substitute(
        module=attr(d["module"]), kind=kind, gates=gates,
        states_in=_host_states(kind) + "\n" if given else "",
        cn_alloc="cn = torch.empty((L * D, B, H), dtype=x.dtype, device=x.device)\n" if kind == "lstm" else "",
        major=("tdim == 1  # batch-first, as the output is returned" if d["result"] == "output" and d["index"] is None
               else "False  # time-major: one time step of it is contiguous"),
        projection=proj_launch, first=indent(_first(kind, given), 20).lstrip(),
        later=("cp, cp_off, s_cpb, s_cpk = cn, k * B * H, H, 1" if kind == "lstm" else "pass"),
        step=step_launch, result=_result(op))
    return Rendered((proj, stp), body)
