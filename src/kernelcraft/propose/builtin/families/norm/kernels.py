"""The norm family's kernels: `row` (whole rows in registers), and for longer rows `STATS` (per-chunk statistics)
then `apply` (the row's chunk statistics merged, the chunk normalized); an rmsnorm over a dim that is not the last
(`torch.mean(x ** 2, dim=1, keepdim=True)`) takes `columns`. The pointwise steps after the norm run on its fp32
output before each store (the `$epilogue` slots)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.chunk_stats import stats_kernel
from kernelcraft.propose.builtin.codegen import num
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_on

_ROW = Template('''
rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
cols = tl.arange(0, BLOCK_N)
mask = (rows < M)[:, None] & (cols < N)[None, :]
offs = rows[:, None] * N + cols[None, :]
x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
if not RMS:
    x = tl.where(mask, x - (tl.sum(x, 1) / N)[:, None], 0.0)
y = x * tl.rsqrt(tl.sum(x * x, 1) / N + eps)[:, None]
if HAS_W:
    y = y * tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
if HAS_B:
    y = y + tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
${epilogue}tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
''')

STATS = stats_kernel(Names())  # the same for every op (chunk_stats.py): a chain emits it once

_APPLY = Template('''
# program (row, split): merge the row's chunk statistics (Chan et al.), then normalize this chunk
row = tl.program_id(0).to(tl.int64)
s = tl.arange(0, BLOCK_S)
m2 = tl.load(m2_ptr + row * splits + s, mask=s < splits, other=0.0)
if RMS:
    var = tl.sum(m2, 0) / N
else:
    cnt = tl.where(s < splits, tl.minimum(chunk, N - s.to(tl.int64) * chunk).to(tl.float32), 0.0)
    means = tl.load(mean_ptr + row * splits + s, mask=s < splits, other=0.0)
    mu = tl.sum(cnt * means, 0) / N
    var = (tl.sum(m2, 0) + tl.sum(cnt * (means - mu) * (means - mu), 0)) / N
rstd = tl.rsqrt(var + eps)
lo = tl.program_id(1).to(tl.int64) * chunk
hi = tl.minimum(lo + chunk, N)
full = (hi - lo) // BLOCK_N
cols = tl.arange(0, BLOCK_N)
for i in range(0, full + 1):  # whole tiles unmasked, then the partial one (if any) masked
    o = lo + i * BLOCK_N + cols
    if i < full:
        x = tl.load(x_ptr + row * N + o).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * N + o, mask=o < hi, other=0.0).to(tl.float32)
    if RMS:
        y = x * rstd
    else:
        y = (x - mu) * rstd
    if HAS_W:
        y = y * tl.load(w_ptr + o, mask=o < hi, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + o, mask=o < hi, other=0.0).to(tl.float32)
${epilogue}    if i < full:
        tl.store(y_ptr + row * N + o, y.to(y_ptr.dtype.element_ty))
    else:
        tl.store(y_ptr + row * N + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
''')

_COLUMNS = Template('''
# x viewed as [outer, R, inner], normalized over R: program (outer index o, BLOCK_C adjacent inner columns), each
# column's R elements inner apart. SINGLE: the whole column in registers (one read, one write); else the sum of
# squares over BLOCK_R-row tiles, then the tiles read again and normalized
pid = tl.program_id(0)
o = (pid // n_cb).to(tl.int64)
col = (pid % n_cb) * BLOCK_C + tl.arange(0, BLOCK_C)
cmask = col < inner
base = o * R * inner + col
r = tl.arange(0, BLOCK_R)
if SINGLE:
    mask = (r < R)[:, None] & cmask[None, :]
    offs = base[None, :] + r.to(tl.int64)[:, None] * inner
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, 0) / R + eps)[None, :]
${epilogue}    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
else:
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for k in range(0, tl.cdiv(R, BLOCK_R)):
        rr = k * BLOCK_R + r
        mask = (rr < R)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base[None, :] + rr.to(tl.int64)[:, None] * inner, mask=mask, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, 0) / R + eps)
    for k in range(0, tl.cdiv(R, BLOCK_R)):
        rr = k * BLOCK_R + r
        mask = (rr < R)[:, None] & cmask[None, :]
        offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd[None, :]
${epilogue_loop}        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
''')

# A module-level setting, the same for every op: tests state a small L2 to force several row groups.
_L2 = "KC_L2_BYTES = None  # L2 bytes to plan row groups for; None: the device's own"


def _epilogue(steps: list, depth: int) -> str:
    """The statements applying `steps` to the fp32 result y (as x, as steps.py's lines read it), each line indented
    `depth` and ending in a newline; none without steps."""
    return epilogue_on("y", steps, None, depth) + "\n" if steps else ""


def render(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    rms = op.kind == "rmsnorm"
    ndim = 1 if rms else int(d["ndim"])
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    weight = attr(d["weight"]) if d.get("weight") else "None"
    bias = attr(d["bias"]) if d.get("bias") and not rms else "None"
    row_max, tile, block_n, warps = int(p.ROW_MAX), int(p.TILE), int(p.BLOCK_N), int(p.num_warps)
    steps = d.get("steps") or []
    s = Scalars.of(op)  # the numbers the steps read from the module: the row and apply kernels' first parameters
    row = TritonKernel(names("kc_norm_row_kernel"), ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "M", "N", "eps"),
                       ("BLOCK_M", "BLOCK_N", "RMS", "HAS_W", "HAS_B"), _ROW.substitute(epilogue=_epilogue(steps, 0)),
                       s)
    apply = TritonKernel(names("kc_norm_apply_kernel"),
                         ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "mean_ptr", "m2_ptr", "N", "chunk", "splits", "eps"),
                         ("BLOCK_N", "BLOCK_S", "RMS", "HAS_W", "HAS_B"), _APPLY.substitute(epilogue=_epilogue(steps, 4)),
                         s)
    flags = {"RMS": rms, "HAS_W": "w is not None", "HAS_B": "b is not None"}
    columns = _columns(d, p, names, steps, s) if rms and d.get("dim", -1) != -1 else None  # (kernel, host lines)
    row_launch = row.launch("(triton.cdiv(M, bm),)", ["x", "y", "w_arg", "b_arg", "M", "N", "eps"],
                            {"BLOCK_M": "bm", "BLOCK_N": "bn", **flags}, num_warps="warps")
    stats_launch = STATS.launch("(rows, splits)", ["xs", "mean", "m2", "N", "chunk", "splits"],
                                {"BLOCK_N": block_n, "RMS": rms, "WELFORD": bool(p.welford)}, num_warps=warps)
    apply_launch = apply.launch("(rows, splits)", ["xs", "ys", "w_arg", "b_arg", "mean", "m2", "N", "chunk", "splits",
                                                   "eps"], {"BLOCK_N": block_n, "BLOCK_S": "np2(splits)", **flags},
                                num_warps=warps)
    return Rendered((row, STATS, apply, _L2, *([columns[0]] if columns else [])), f'''
y = torch.empty_like(x)
{columns[1] if columns else ""}N = math.prod(x.shape[max(x.dim() - {ndim}, 0):])
if x.numel() == 0:
    return y
M = x.numel() // N
w, b, eps = {weight}, {bias}, float({eps})
w_arg = x if w is None else w.reshape(-1)
b_arg = x if b is None else b.reshape(-1)
np2 = triton.next_power_of_2
if np2(N) <= {row_max}:  # whole rows in registers
    bn = np2(N)
    bm = min(np2(M), max(1, {tile} // bn))
    warps = min(16, {warps} * max(1, bm * bn // {tile}))
    {row_launch}
    return y
group = M
l2 = KC_L2_BYTES or (torch.cuda.get_device_properties(x.device).L2_cache_size if x.is_cuda else 0)
if {bool(p.l2_groups)} and l2:  # rows a few at a time, so the writing pass re-reads them from L2
    group = max(1, l2 // 3 // (N * x.element_size()))
splits = max(1, min(triton.cdiv({int(p.split_target)}, min(group, M)), triton.cdiv(N, {block_n}), 1024))
chunk = triton.cdiv(triton.cdiv(N, splits), {block_n}) * {block_n}
splits = triton.cdiv(N, chunk)
mean = torch.empty((min(group, M), splits), dtype=torch.float32, device=x.device)
m2 = torch.empty((min(group, M), splits), dtype=torch.float32, device=x.device)
x2, y2 = x.reshape(M, N), y.reshape(M, N)
for r0 in range(0, M, group):
    xs, ys = x2[r0:r0 + group], y2[r0:r0 + group]  # views: row-major rows stay contiguous
    rows = xs.shape[0]
    {stats_launch}
    {apply_launch}
return y''')


def _columns(d: dict, p, names: Names, steps: list, s: Scalars) -> tuple[TritonKernel, str]:
    """The columns kernel and the host lines that take it where the rmsnorm's dim is not x's last (they return y);
    the dim is the module's attribute where forward reads it from one."""
    kernel = TritonKernel(names("kc_norm_columns_kernel"), ("x_ptr", "y_ptr", "R", "inner", "n_cb", "eps"),
                          ("BLOCK_R", "BLOCK_C", "SINGLE"),
                          _COLUMNS.substitute(epilogue=_epilogue(steps, 4), epilogue_loop=_epilogue(steps, 8)), s)
    dim = attr(d["dim_attr"]) if d.get("dim_attr") else int(d["dim"])
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    launch = kernel.launch("(outer * n_cb,)", ["x", "y", "R", "inner", "n_cb", "float(" + eps + ")"],
                           {"BLOCK_R": "br", "BLOCK_C": "bc", "SINGLE": "single"}, num_warps=int(p.num_warps))
    row_max, tile = int(p.ROW_MAX), int(p.TILE)
    return kernel, f'''dim = ({dim}) % max(x.dim(), 1)
if dim != x.dim() - 1:  # over a dim that is not the last: columns of R elements, inner apart
    if x.numel() == 0:
        return y
    outer, R, inner = math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1:])
    np2 = triton.next_power_of_2
    single = np2(R) * min(np2(inner), 16) <= {row_max}  # the whole column in registers, 16 columns at least
    bc = min(np2(inner), max(16, {tile} // np2(R))) if single else min(np2(inner), 64)
    br = np2(R) if single else max(1, {tile} // bc)
    n_cb = triton.cdiv(inner, bc)
    {launch}
    return y
'''
