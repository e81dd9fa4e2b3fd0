"""Loss family over the forward's first two inputs: pointwise losses (mse, l1, smooth_l1, huber) over flat tiles;
cross-entropy (logits, class targets) and KL divergence of two logit tensors over rows seen as [outer, R, inner]
(rows.py's column tiles: inner == 1 is plain rows, several short rows per program), each row read once
(log-sum-exp in registers, or online in tiles for long rows). A reduced loss is deterministic: each program writes
one fp32 partial (and, for cross-entropy, its count of targets not ignored), and a second one-program launch
adds them in a fixed order and divides for the mean."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.codegen import attr, num
from kernelcraft.propose.builtin.families.rows.columns import COLUMNS, TILES


def _loss_moves(op: Op) -> list[tuple]:
    reduced = op.detail["reduction"] != "none"
    tail = (", fp32 sums per lane, one partial per program added by a one-program second launch in a fixed order "
            "(deterministic)" if reduced else ", the loss terms written in the input dtype")
    flat = "Flat grid, one program per {b}-element tile of both inputs ({w} warps), loss in fp32 registers" + tail
    return [
        (flat.format(b=4096, w=8), "parallelism", {"BLOCK": 4096, "num_warps": 8}),
        (flat.format(b=1024, w=4), "parallelism", {"BLOCK": 1024, "num_warps": 4}),
        (flat.format(b=2048, w=4), "parallelism", {"BLOCK": 2048, "num_warps": 4}),
        ("Persistent grid: 4 programs per SM loop over 4096-element tiles, so launch and tail costs are paid once"
         + (" and the second launch adds only a few hundred partials" if reduced else ""), "control",
         {"BLOCK": 4096, "num_warps": 8, "per_sm": 4}),
        ("Streaming cache hints: 4096-element tiles of both inputs loaded with evict_first, each byte is read once",
         "memory", {"BLOCK": 4096, "num_warps": 8, "evict_first": True}),
    ]


def _kl_moves(op: Op) -> list[tuple]:
    row = ("Both rows whole in registers (up to {m} elements, short rows packed {t} per program, {w} warps): "
           "log-softmax of each from one read, then sum q * (log q - log p) as torch does; one fp32 partial per "
           "program, combined by a one-program second launch")
    online = ("One online pass in {b}-element tiles ({w} warps): running max and sum of both rows, and the "
              "q-weighted sum of (b - a) rescaled with them; KL = E_q[b - a] - lse(b) + lse(a), registers bounded")

    def p(variant, m, b, t, w):
        return {"variant": variant, "ROW_MAX": m, "BLOCK_R": b, "TILE": t, "num_warps": w}

    return [(row.format(m=8192, t=4096, w=4), "memory", p("row", 8192, 4096, 4096, 4)),
            (row.format(m=8192, t=8192, w=8), "memory", p("row", 8192, 4096, 8192, 8)),
            (online.format(b=1024, w=4), "control", p("online", 0, 1024, 2048, 4)),
            (online.format(b=2048, w=8), "control", p("online", 0, 2048, 4096, 8))]


def _ce_moves(op: Op) -> list[tuple]:
    row = ("Whole rows in registers (up to {m} classes, short rows packed {t} elements per program, {w} warps): max, "
           "exp-sum and the target logit from one read of the row")
    online = ("Online log-sum-exp in {b}-class tiles (a running max and rescaled sum, {w} warps): one pass over "
              "rows of any length, registers bounded")
    tail = (", per-program fp32 partial loss and count combined by a one-program second launch"
            if op.detail["reduction"] != "none" else "")

    def p(variant, m, b, t, w):
        return {"variant": variant, "ROW_MAX": m, "BLOCK_R": b, "TILE": t, "num_warps": w}

    return [(row.format(m=16384, t=4096, w=4) + tail, "memory", p("row", 16384, 4096, 4096, 4)),
            (row.format(m=16384, t=8192, w=8) + tail, "memory", p("row", 16384, 4096, 8192, 8)),
            (row.format(m=16384, t=2048, w=4) + tail + "; twice the programs of 4096-element packing",
             "parallelism", p("row", 16384, 4096, 2048, 4)),
            (online.format(b=1024, w=4) + tail, "control", p("online", 0, 1024, 2048, 4)),
            (online.format(b=4096, w=8) + tail, "control", p("online", 0, 4096, 4096, 8))]


_FINISH = '''
@triton.jit
def kc_loss_finish_kernel(part_ptr, cnt_ptr, y_ptr, n_part, div, HAS_CNT: tl.constexpr, BLOCK: tl.constexpr):
    # one program: the fp32 partials added in a fixed order, divided by div (mean) or by the summed counts
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    cnt = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_part, BLOCK):
        o = start + offs
        acc += tl.load(part_ptr + o, mask=o < n_part, other=0.0)
        if HAS_CNT:
            cnt += tl.load(cnt_ptr + o, mask=o < n_part, other=0.0)
    if HAS_CNT:
        total = tl.sum(acc, 0) / tl.sum(cnt, 0)
    else:
        total = tl.sum(acc, 0) / div
    tl.store(y_ptr, total.to(y_ptr.dtype.element_ty))
'''

_TERMS = {"mse": ["l = d * d"], "l1": ["l = tl.abs(d)"],
          "smooth_l1": ["ad = tl.abs(d)", "l = tl.where(ad < param, 0.5 * d * d / param, ad - 0.5 * param)"],
          "huber": ["ad = tl.abs(d)", "l = tl.where(ad < param, 0.5 * d * d, param * (ad - 0.5 * param))"]}

_POINTWISE = Template('''
@triton.jit
def kc_${fn}_loss_kernel(a_ptr, b_ptr, y_ptr, n, n_tiles, param, REDUCE: tl.constexpr, BLOCK: tl.constexpr):
    # tiles pid, pid + programs, ...: loss terms stored (REDUCE=False) or summed per lane into one fp32 partial
    acc = tl.zeros([BLOCK], tl.float32)
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        d = (tl.load(a_ptr + offs, mask=mask, other=0.0$hint).to(tl.float32)
             - tl.load(b_ptr + offs, mask=mask, other=0.0$hint).to(tl.float32))
        $terms
        if REDUCE:
            acc += tl.where(mask, l, 0.0)
        else:
            tl.store(y_ptr + offs, l.to(y_ptr.dtype.element_ty), mask=mask)
    if REDUCE:
        tl.store(y_ptr + tl.program_id(0), tl.sum(acc, 0))
''')

_CE = Template('''
@triton.jit
def kc_cross_entropy_kernel(x_ptr, t_ptr, y_ptr, cnt_ptr, R, inner, C, ignore, BLOCK_R: tl.constexpr,
                            BLOCK_C: tl.constexpr, SINGLE: tl.constexpr, REDUCE: tl.constexpr):
    # a tile of BLOCK_C columns (logit rows of R classes, `inner` apart); target of column c at t_ptr + c
$columns
    if SINGLE:  # all R classes in one tile
        x = tl.load(x_ptr + base[None, :] + r.to(tl.int64)[:, None] * inner, mask=(r < R)[:, None] & cmask[None, :],
                    other=-float("inf")).to(tl.float32)
        m = tl.max(x, 0)
        m_safe = tl.where(m == -float("inf"), 0.0, m)
        lse = m_safe + tl.log(tl.sum(tl.exp(x - m_safe[None, :]), 0))
    else:  # online: running max and a sum rescaled whenever the max grows
        m_run = tl.full([BLOCK_C], -float("inf"), tl.float32)
        s_run = tl.zeros([BLOCK_C], tl.float32)
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            x = tl.load(x_ptr + offs, mask=(rr < R)[:, None] & cmask[None, :], other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_run, tl.max(x, 0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe[None, :]), 0)
            m_run = m_new
        lse = tl.where(m_run == -float("inf"), 0.0, m_run) + tl.log(s_run)
    t = tl.load(t_ptr + c, mask=cmask, other=0).to(tl.int64)
    keep = cmask & (t != ignore)
    valid = keep & (t >= 0) & (t < R)  # a target out of range (torch raises) gives NaN, and no stray read
    xt = tl.load(x_ptr + base + t * inner, mask=valid, other=float("nan")).to(tl.float32)
    loss = tl.where(keep, lse - xt, 0.0)
    if REDUCE:
        tl.store(y_ptr + tl.program_id(0), tl.sum(loss, 0))
        tl.store(cnt_ptr + tl.program_id(0), tl.sum(keep.to(tl.float32), 0))
    else:
        tl.store(y_ptr + c, loss.to(y_ptr.dtype.element_ty), mask=cmask)
''')


_KL = Template('''
@triton.jit
def kc_kl_div_logits_kernel(a_ptr, b_ptr, y_ptr, R, inner, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                            SINGLE: tl.constexpr):
    # a tile of BLOCK_C rows (R elements `inner` apart): sum of q * (log q - log p), p = softmax(a), q = softmax(b),
    # over the rows of the tile, stored as one fp32 partial
$columns
    if SINGLE:  # both rows whole: log-probabilities first, as torch computes them
        offs = base[None, :] + r.to(tl.int64)[:, None] * inner
        mask = (r < R)[:, None] & cmask[None, :]
        a = tl.load(a_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        m_a = tl.max(a, 0)
        m_a = tl.where(m_a == -float("inf"), 0.0, m_a)
        m_b = tl.max(b, 0)
        m_b = tl.where(m_b == -float("inf"), 0.0, m_b)
        lp = a - (m_a + tl.log(tl.sum(tl.exp(a - m_a[None, :]), 0)))[None, :]
        lq = b - (m_b + tl.log(tl.sum(tl.exp(b - m_b[None, :]), 0)))[None, :]
        kl = tl.sum(tl.where(mask, tl.exp(lq) * (lq - lp), 0.0), 0)
    else:  # online: running max and sum of a and of b, and w = sum exp(b - max) * (b - a), rescaled with b's sum
        m_a = tl.full([BLOCK_C], -float("inf"), tl.float32)
        m_b = tl.full([BLOCK_C], -float("inf"), tl.float32)
        s_a = tl.zeros([BLOCK_C], tl.float32)
        s_b = tl.zeros([BLOCK_C], tl.float32)
        w = tl.zeros([BLOCK_C], tl.float32)
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            mask = (rr < R)[:, None] & cmask[None, :]
            a = tl.load(a_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
            b = tl.load(b_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
            new_a = tl.maximum(m_a, tl.max(a, 0))
            safe_a = tl.where(new_a == -float("inf"), 0.0, new_a)
            s_a = s_a * tl.exp(m_a - safe_a) + tl.sum(tl.exp(a - safe_a[None, :]), 0)
            m_a = new_a
            new_b = tl.maximum(m_b, tl.max(b, 0))
            safe_b = tl.where(new_b == -float("inf"), 0.0, new_b)
            scale = tl.exp(m_b - safe_b)
            e = tl.exp(b - safe_b[None, :])
            s_b = s_b * scale + tl.sum(e, 0)
            w = w * scale + tl.sum(tl.where(mask, e * (b - a), 0.0), 0)
            m_b = new_b
        lse_a = tl.where(m_a == -float("inf"), 0.0, m_a) + tl.log(s_a)
        lse_b = tl.where(m_b == -float("inf"), 0.0, m_b) + tl.log(s_b)
        kl = w / s_b - lse_b + lse_a
    tl.store(y_ptr + tl.program_id(0), tl.sum(tl.where(cmask, kl, 0.0), 0))
''')


def _finish(part: str, cnt: str, programs: str, div: str, has_cnt: bool) -> str:
    return (f"kc_loss_finish_kernel[(1,)]({part}, {cnt}, y, {programs}, {div}, HAS_CNT={has_cnt}, BLOCK=1024, "
            "num_warps=4)")


def _render_loss(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    fn, reduction = d["fn"], d["reduction"]
    if fn not in _TERMS or reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown loss {fn!r} / reduction {reduction!r}")
    hint = ', eviction_policy="evict_first"' if p.get("evict_first") else ""
    kernel = _POINTWISE.substitute(fn=fn, terms="\n        ".join(_TERMS[fn]), hint=hint)
    param = attr(d["param_attr"]) if d.get("param_attr") else num(d["param"] if d.get("param") is not None else 0.0)
    block, warps = int(p["BLOCK"]), int(p["num_warps"])
    programs = "n_tiles"
    if p.get("per_sm"):
        programs = (f"min(n_tiles, {int(p['per_sm'])} * (torch.cuda.get_device_properties(a.device)"
                    ".multi_processor_count if a.is_cuda else 4))")
    launch = f"kc_{fn}_loss_kernel[(programs,)](a, b, {{out}}, n, n_tiles, float({param}), REDUCE={{red}}, " \
             f"BLOCK={block}, num_warps={warps})"
    head = f"a, b = a.contiguous(), b.contiguous()\nn = a.numel()\nn_tiles = triton.cdiv(n, {block})\n"
    if reduction == "none":
        body = head + f'''y = torch.empty_like(a)
if n == 0:
    return y
programs = {programs}
{launch.format(out="y", red=False)}
return y'''
    else:
        div = "float(n)" if reduction == "mean" else "1.0"
        body = head + f'''y = torch.empty((), dtype=a.dtype, device=a.device)
programs = max(1, {programs})  # n == 0: one program writes a zero partial (mean: 0 / 0 = NaN, like torch)
part = torch.empty((programs,), dtype=torch.float32, device=a.device)
{launch.format(out="part", red=True)}
{_finish("part", "part", "programs", div, False)}
return y'''
    return [kernel, _FINISH], body


def _render_ce(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    reduction = d["reduction"]
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}")
    ignore = attr(d["ignore_index_attr"]) if d.get("ignore_index_attr") else repr(int(d["ignore_index"]))
    row_max = int(p["ROW_MAX"]) if p["variant"] == "row" else 0
    block_r, tile, warps = int(p["BLOCK_R"]), int(p["TILE"]), int(p["num_warps"])
    body = f'''
x, t = a.contiguous(), b.contiguous()
d = 1 if x.dim() > 1 else 0  # the class dim
R, inner, cols = x.shape[d], math.prod(x.shape[d + 1:]), t.numel()
br, bc, single = kc_tiles(max(R, 1), max(cols, 1), inner, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
programs = triton.cdiv(cols, bc)
'''
    launch = ("kc_cross_entropy_kernel[(programs,)](x, t, {out}, {cnt}, R, inner, cols, int({ignore}), BLOCK_R=br, "
              "BLOCK_C=bc, SINGLE=single, REDUCE={red}, num_warps=warps)")
    if reduction == "none":
        body += f'''y = torch.empty(t.shape, dtype=x.dtype, device=x.device)
if cols:
    {launch.format(out="y", cnt="y", ignore=ignore, red=False)}
return y'''
    else:
        body += f'''y = torch.empty((), dtype=x.dtype, device=x.device)
part = torch.empty((programs,), dtype=torch.float32, device=x.device)
cnt = torch.empty((programs,), dtype=torch.float32, device=x.device)
if cols:
    {launch.format(out="part", cnt="cnt", ignore=ignore, red=True)}
{_finish("part", "cnt", "programs", "1.0", reduction == "mean")}
return y'''
    kernel = _CE.substitute(columns=COLUMNS)
    return [TILES, kernel, _FINISH], body


def _render_kl(op: Op, p: dict) -> tuple[list[str], str]:
    div = {"batchmean": "float(a.shape[0] if a.dim() else 1)", "sum": "1.0", "mean": "float(a.numel())"}
    reduction = op.detail["reduction"]
    if reduction not in div:
        raise ValueError(f"unknown kl_div reduction {reduction!r}")
    row_max = int(p["ROW_MAX"]) if p["variant"] == "row" else 0
    block_r, tile, warps = int(p["BLOCK_R"]), int(p["TILE"]), int(p["num_warps"])
    body = f'''
a, b = a.contiguous(), b.contiguous()
y = torch.empty((), dtype=a.dtype, device=a.device)
d = {int(op.detail["dim"])} % max(a.dim(), 1)
R, inner = (a.shape[d] if a.dim() else 1), math.prod(a.shape[d + 1:])
C = a.numel() // R if R else 0  # rows
br, bc, single = kc_tiles(max(R, 1), max(C, 1), inner, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
programs = triton.cdiv(C, bc)
part = torch.empty((programs,), dtype=torch.float32, device=a.device)
if C:
    kc_kl_div_logits_kernel[(programs,)](a, b, part, R, inner, C, BLOCK_R=br, BLOCK_C=bc, SINGLE=single,
                                         num_warps=warps)
{_finish("part", "part", "programs", div[reduction], False)}
return y'''
    return [TILES, _KL.substitute(columns=COLUMNS), _FINISH], body


KINDS = {"loss": (_loss_moves, _render_loss), "cross_entropy": (_ce_moves, _render_ce),
         "kl_div_logits": (_kl_moves, _render_kl)}
INPUTS = {kind: ("a", "b") for kind in ("loss", "cross_entropy", "kl_div_logits")}  # read as a, b
