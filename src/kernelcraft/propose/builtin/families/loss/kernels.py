"""The loss family's kernels and launches: pointwise losses over flat tiles, cross-entropy and KL over column tiles,
and the one-program launch that adds a reduced loss's per-program partials in a fixed order."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent, num
from kernelcraft.propose.builtin.columns import COLUMNS, ONLINE_MAX_SUM, TILES
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

_FINISH = '''
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


def _finish_kernel(names: Names) -> TritonKernel:
    return TritonKernel(names("kc_loss_finish_kernel"), ("part_ptr", "cnt_ptr", "y_ptr", "n_part", "div"),
                        ("HAS_CNT", "BLOCK"), _FINISH)


def _finish(kernel: TritonKernel, part: str, cnt: str, programs: str, div: str, has_cnt: bool) -> str:
    return kernel.launch("(1,)", [part, cnt, "y", programs, div], {"HAS_CNT": has_cnt, "BLOCK": 1024}, num_warps=4)


_TERMS = {"mse": ["l = d * d"], "l1": ["l = tl.abs(d)"],
          "smooth_l1": ["ad = tl.abs(d)", "l = tl.where(ad < param, 0.5 * d * d / param, ad - 0.5 * param)"],
          "huber": ["ad = tl.abs(d)", "l = tl.where(ad < param, 0.5 * d * d, param * (ad - 0.5 * param))"]}


def _kl_terms(d: dict) -> list[str]:
    """F.kl_div's pointwise terms (torch's formulas): input x (log-probabilities: a, or log(a) when the kernel takes
    the log itself), target b; log_target: exp(b) * (b - x), else xlogy(b, b) - b * x, a target 0 adding 0 (unless x
    is -inf: 0 * inf is NaN, as in torch)."""
    x = ["x = tl.log(a)"] if d["log_input"] else ["x = a"]
    if d["log_target"]:
        return x + ["l = tl.exp(b) * (b - x)"]
    return x + ["l = tl.where(b == 0.0, 0.0, b * tl.log(b)) - b * x"]

_POINTWISE = Template('''
# tiles pid, pid + programs, ...: loss terms stored (REDUCE=False) or summed per lane into one fp32 partial
acc = tl.zeros([BLOCK], tl.float32)
for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0$hint).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0$hint).to(tl.float32)
$terms
    if REDUCE:
        acc += tl.where(mask, l, 0.0)
    else:
        tl.store(y_ptr + offs, l.to(y_ptr.dtype.element_ty), mask=mask)
if REDUCE:
    tl.store(y_ptr + tl.program_id(0), tl.sum(acc, 0))
''')


_DIVISORS = {"mean": "float(n)", "sum": "1.0", "batchmean": "float(a.shape[0] if a.dim() else 1)"}


def pointwise_loss(op: Op, p, names: Names) -> Rendered:
    """A loss of two same-shaped inputs whose terms are pointwise: the `loss` kind's, and F.kl_div's (`kl_div`)."""
    d = op.detail
    fn, reduction = ("kl_div" if op.kind == "kl_div" else d["fn"]), d["reduction"]
    if (fn not in _TERMS and op.kind != "kl_div") or (reduction not in _DIVISORS and reduction != "none") \
            or (reduction == "batchmean" and op.kind != "kl_div"):
        raise ValueError(f"unknown loss {fn!r} / reduction {reduction!r}")
    terms = _kl_terms(d) if op.kind == "kl_div" else ["d = a - b", *_TERMS[fn]]
    hint = ', eviction_policy="evict_first"' if p.evict_first else ""
    kernel = TritonKernel(names(f"kc_{fn}_loss_kernel"), ("a_ptr", "b_ptr", "y_ptr", "n", "n_tiles", "param"),
                          ("REDUCE", "BLOCK"),
                          _POINTWISE.substitute(terms=indent("\n".join(terms), 4), hint=hint))
    finish = _finish_kernel(names)
    param = attr(d["param_attr"]) if d.get("param_attr") else num(d["param"] if d.get("param") is not None else 0.0)
    block, warps = int(p.BLOCK), int(p.num_warps)
    programs = "n_tiles"
    if p.per_sm:
        programs = (f"min(n_tiles, {int(p.per_sm)} * (torch.cuda.get_device_properties(a.device)"
                    ".multi_processor_count if a.is_cuda else 4))")

    def launch(out: str, reduce: bool) -> str:
        return kernel.launch("(programs,)", ["a", "b", out, "n", "n_tiles", f"float({param})"],
                             {"REDUCE": reduce, "BLOCK": block}, num_warps=warps)

    head = f"a, b = a.contiguous(), b.contiguous()\nn = a.numel()\nn_tiles = triton.cdiv(n, {block})\n"
    if reduction == "none":
        return Rendered((kernel, finish), head + f'''y = torch.empty_like(a)
if n == 0:
    return y
programs = {programs}
{launch("y", False)}
return y''')
    div = _DIVISORS[reduction]
    return Rendered((kernel, finish), head + f'''y = torch.empty((), dtype=a.dtype, device=a.device)
programs = max(1, {programs})  # n == 0: one program writes a zero partial (mean: 0 / 0 = NaN, like torch)
part = torch.empty((programs,), dtype=torch.float32, device=a.device)
{launch("part", True)}
{_finish(finish, "part", "part", "programs", div, False)}
return y''')


_CE = Template('''
# a tile of BLOCK_C columns (logit rows of R classes, `inner` apart); target of column c at t_ptr + c
$columns
if SINGLE:  # all R classes in one tile
    x = tl.load(x_ptr + base[None, :] + r.to(tl.int64)[:, None] * inner, mask=(r < R)[:, None] & cmask[None, :],
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    lse = m_safe + tl.log(tl.sum(tl.exp(x - m_safe[None, :]), 0))
else:  # online: running max and a sum rescaled whenever the max grows
$online_stats
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


def cross_entropy(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    reduction = d["reduction"]
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}")
    kernel = TritonKernel(names("kc_cross_entropy_kernel"),
                          ("x_ptr", "t_ptr", "y_ptr", "cnt_ptr", "R", "inner", "C", "ignore"),
                          ("BLOCK_R", "BLOCK_C", "SINGLE", "REDUCE"), _CE.substitute(columns=COLUMNS, online_stats=ONLINE_MAX_SUM))
    finish = _finish_kernel(names)
    ignore = attr(d["ignore_index_attr"]) if d.get("ignore_index_attr") else repr(int(d["ignore_index"]))
    row_max = int(p.ROW_MAX) if p.variant == "row" else 0
    block_r, tile, warps = int(p.BLOCK_R), int(p.TILE), int(p.num_warps)

    def launch(out: str, cnt: str, reduce: bool) -> str:
        return kernel.launch("(programs,)", ["x", "t", out, cnt, "R", "inner", "cols", f"int({ignore})"],
                             {"BLOCK_R": "br", "BLOCK_C": "bc", "SINGLE": "single", "REDUCE": reduce},
                             num_warps="warps")

    body = f'''
x, t = a.contiguous(), b.contiguous()
d = 1 if x.dim() > 1 else 0  # the class dim
R, inner, cols = x.shape[d], math.prod(x.shape[d + 1:]), t.numel()
br, bc, single = kc_tiles(max(R, 1), max(cols, 1), inner, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
programs = triton.cdiv(cols, bc)
'''
    if reduction == "none":
        body += f'''y = torch.empty(t.shape, dtype=x.dtype, device=x.device)
if cols:
    {launch("y", "y", False)}
return y'''
    else:
        body += f'''y = torch.empty((), dtype=x.dtype, device=x.device)
part = torch.empty((programs,), dtype=torch.float32, device=x.device)
cnt = torch.empty((programs,), dtype=torch.float32, device=x.device)
if cols:
    {launch("part", "cnt", True)}
{_finish(finish, "part", "cnt", "programs", "1.0", reduction == "mean")}
return y'''
    return Rendered((TILES, kernel, finish), body)


_KL = Template('''
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


def kl_div_logits(op: Op, p, names: Names) -> Rendered:
    div = {"batchmean": "float(a.shape[0] if a.dim() else 1)", "sum": "1.0", "mean": "float(a.numel())"}
    reduction = op.detail["reduction"]
    if reduction not in div:
        raise ValueError(f"unknown kl_div reduction {reduction!r}")
    kernel = TritonKernel(names("kc_kl_div_logits_kernel"), ("a_ptr", "b_ptr", "y_ptr", "R", "inner", "C"),
                          ("BLOCK_R", "BLOCK_C", "SINGLE"), _KL.substitute(columns=COLUMNS))
    finish = _finish_kernel(names)
    row_max = int(p.ROW_MAX) if p.variant == "row" else 0
    block_r, tile, warps = int(p.BLOCK_R), int(p.TILE), int(p.num_warps)
    launch = kernel.launch("(programs,)", ["a", "b", "part", "R", "inner", "C"],
                           {"BLOCK_R": "br", "BLOCK_C": "bc", "SINGLE": "single"}, num_warps="warps")
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
    {launch}
{_finish(finish, "part", "part", "programs", div[reduction], False)}
return y'''
    return Rendered((TILES, kernel, finish), body)


_TRIPLET = Template('''
# a tile of BLOCK_C rows (R elements each, contiguous): sums of squares of a - p + eps and a - n + eps (and, with
# SWAP, p - n + eps) over each row in BLOCK_R-element steps; loss = max(margin + d(a, p) - d(a, n), 0)
$columns
s_pos = tl.zeros([BLOCK_C], tl.float32)
s_neg = tl.zeros([BLOCK_C], tl.float32)
s_swap = tl.zeros([BLOCK_C], tl.float32)
for start in range(0, R, BLOCK_R):
    rr = start + r
    offs = base[None, :] + rr.to(tl.int64)[:, None]
    mask = (rr < R)[:, None] & cmask[None, :]
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    p = tl.load(p_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    n = tl.load(n_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    d = tl.where(mask, a - p + eps, 0.0)
    s_pos += tl.sum(d * d, 0)
    d = tl.where(mask, a - n + eps, 0.0)
    s_neg += tl.sum(d * d, 0)
    if SWAP:
        d = tl.where(mask, p - n + eps, 0.0)
        s_swap += tl.sum(d * d, 0)
d_pos = tl.sqrt(s_pos)
d_neg = tl.sqrt(s_neg)
if SWAP:  # torch.min: NaN on either side gives NaN
    d_swap = tl.sqrt(s_swap)
    d_neg = tl.where((d_neg != d_neg) | (d_swap != d_swap), d_neg + d_swap, tl.where(d_swap < d_neg, d_swap, d_neg))
loss = margin + d_pos - d_neg
loss = tl.where(loss < 0.0, 0.0, loss)  # clamp_min(0): NaN passes through
if REDUCE:
    tl.store(y_ptr + tl.program_id(0), tl.sum(tl.where(cmask, loss, 0.0), 0))
else:
    tl.store(y_ptr + c, loss.to(y_ptr.dtype.element_ty), mask=cmask)
''')


def triplet_margin(op: Op, p, names: Names) -> Rendered:
    """F.triplet_margin_loss (p = 2) of the first three inputs as passed, rows along the last dim."""
    d = op.detail
    reduction = d["reduction"]
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}")
    kernel = TritonKernel(names("kc_triplet_margin_kernel"),
                          ("a_ptr", "p_ptr", "n_ptr", "y_ptr", "R", "inner", "C", "margin", "eps"),
                          ("BLOCK_R", "BLOCK_C", "SWAP", "REDUCE"), _TRIPLET.substitute(columns=COLUMNS))
    finish = _finish_kernel(names)
    margin = attr(d["margin_attr"]) if d.get("margin_attr") else num(d["margin"])
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    row_max = int(p.ROW_MAX)
    block_r, tile, warps = int(p.BLOCK_R), int(p.TILE), int(p.num_warps)

    def launch(out: str, reduce: bool) -> str:
        return kernel.launch("(programs,)", ["a", "p", "n", out, "R", "1", "C", f"float({margin})", f"float({eps})"],
                             {"BLOCK_R": "br", "BLOCK_C": "bc", "SWAP": bool(d["swap"]), "REDUCE": reduce},
                             num_warps="warps")

    body = f'''
a, p, n = a.contiguous(), p.contiguous(), n.contiguous()
if a.shape != p.shape or a.shape != n.shape or a.dim() == 0:
    raise ValueError("triplet_margin_loss takes anchors, positives and negatives of one shape")
R = a.shape[-1]
C = a.numel() // R if R else math.prod(a.shape[:-1])  # rows
br, bc, _ = kc_tiles(max(R, 1), max(C, 1), 1, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
programs = triton.cdiv(C, bc)
'''
    if reduction == "none":
        body += f'''y = torch.empty(a.shape[:-1], dtype=a.dtype, device=a.device)
if C:
    {launch("y", False)}
return y'''
    else:
        div = "float(C)" if reduction == "mean" else "1.0"
        body += f'''y = torch.empty((), dtype=a.dtype, device=a.device)
part = torch.empty((programs,), dtype=torch.float32, device=a.device)
if C:
    {launch("part", True)}
{_finish(finish, "part", "part", "programs", div, False)}
return y'''
    return Rendered((TILES, kernel, finish), body)
