"""Norm family (layernorm, rmsnorm) over rows of N: rows in registers (one read, one write) when N fits;
longer rows are split over programs: per-chunk statistics (Welford or two-pass), merged per row by the
writer (benchmarks/moves_probe.py times each move and kernel)."""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import attr, indent, num
from kernelcraft.propose.builtin.steps import step_lines


def _norm_moves(op: Op) -> list[tuple]:
    row = ("Rows up to {m} elements held in registers: statistics and normalization from one read, one write "
           "(short rows packed {t} elements per program, {w} warps)")
    base = {"ROW_MAX": 16384, "TILE": 4096, "BLOCK_N": 2048, "num_warps": 8, "split_target": 2048, "welford": True}
    out = [(row.format(m=16384, t=4096, w=8), "memory", base),
           (row.format(m=16384, t=4096, w=4), "memory", {**base, "num_warps": 4}),
           (row.format(m=8192, t=8192, w=8), "memory", {**base, "ROW_MAX": 8192, "TILE": 8192}),
           ("Long rows split finer (aim: 4096 programs, 1024-element tiles) so few rows still fill the GPU; per-chunk "
            "statistics merged per row by the writing pass", "parallelism",
            {**base, "split_target": 4096, "BLOCK_N": 1024}),
           ("Long rows handled by one program each, looping over 2048-element tiles (no split, no partials)",
            "control", {**base, "split_target": 0}),
           ("Long rows normalized a group at a time (as many rows as fit in a third of L2): the statistics pass "
            "leaves the group in L2, so the writing pass re-reads it from there, not from DRAM", "memory",
            {**base, "split_target": 4096, "BLOCK_N": 1024, "l2_groups": True})]
    if op.kind == "layernorm":
        out.append(("Two-pass statistics per chunk of a long row: the sum for the mean, then the squared deviations "
                    "(exact, the chunk re-read from L2) instead of one-pass Welford", "precision",
                    {**base, "welford": False}))
    return out

_NORM = '''
@triton.jit
def kc_norm_row_kernel(${scalars}x_ptr, y_ptr, w_ptr, b_ptr, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
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
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
'''

# Chunk statistics of rows (also the group/instance norms' in channel_norm.py). The chunk's whole tiles are read
# without a mask (16-byte loads whatever N is); its last, partial tile is masked.
STATS = '''
@triton.jit
def kc_norm_stats_kernel(x_ptr, mean_ptr, m2_ptr, N, chunk, splits, BLOCK_N: tl.constexpr, RMS: tl.constexpr,
                         WELFORD: tl.constexpr):
    # program (row, split): mean and sum of squared deviations (RMS: sum of squares) of one chunk of the row
    row = tl.program_id(0).to(tl.int64)
    lo = tl.program_id(1).to(tl.int64) * chunk
    hi = tl.minimum(lo + chunk, N)
    full = (hi - lo) // BLOCK_N  # whole tiles
    tail = lo + full * BLOCK_N
    base = x_ptr + row * N
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], tl.float32)
    if RMS or not WELFORD:
        for i in range(0, full):
            x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
            acc += x * x if RMS else x
        x = tl.load(base + tail + cols, mask=tail + cols < hi, other=0.0).to(tl.float32)
        acc += x * x if RMS else x
    if RMS:
        m2 = tl.sum(acc, 0)
    elif WELFORD:  # one pass: a running mean and M2 per lane (every lane counts alike over whole tiles)
        mean = tl.zeros([BLOCK_N], tl.float32)
        for i in range(0, full):
            x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
            delta = x - mean
            mean += delta * (1.0 / (i + 1.0))
            acc += delta * (x - mean)
        m = tail + cols < hi
        cnt = full.to(tl.float32) + m.to(tl.float32)
        x = tl.load(base + tail + cols, mask=m, other=0.0).to(tl.float32)
        delta = x - mean
        mean += tl.where(m, delta / tl.maximum(cnt, 1.0), 0.0)
        acc += tl.where(m, delta * (x - mean), 0.0)
        mu = tl.sum(cnt * mean, 0) / tl.sum(cnt, 0)
        m2 = tl.sum(acc, 0) + tl.sum(cnt * (mean - mu) * (mean - mu), 0)
    else:  # two passes over the chunk: the mean, then squared deviations from it
        mu = tl.sum(acc, 0) / (hi - lo).to(tl.float32)
        acc = tl.zeros([BLOCK_N], tl.float32)
        for i in range(0, full):
            x = tl.load(base + lo + i * BLOCK_N + cols).to(tl.float32)
            acc += (x - mu) * (x - mu)
        x = tl.load(base + tail + cols, mask=tail + cols < hi, other=0.0).to(tl.float32)
        acc += tl.where(tail + cols < hi, (x - mu) * (x - mu), 0.0)
        m2 = tl.sum(acc, 0)
    if not RMS:
        tl.store(mean_ptr + row * splits + tl.program_id(1), mu)
    tl.store(m2_ptr + row * splits + tl.program_id(1), m2)
'''

_APPLY = '''
@triton.jit
def kc_norm_apply_kernel(${scalars}x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, m2_ptr, N, chunk, splits, eps,
                         BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, RMS: tl.constexpr, HAS_W: tl.constexpr,
                         HAS_B: tl.constexpr):
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
        if i < full:
            tl.store(y_ptr + row * N + o, y.to(y_ptr.dtype.element_ty))
        else:
            tl.store(y_ptr + row * N + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
'''


def _render_norm(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    rms = op.kind == "rmsnorm"
    ndim = 1 if rms else int(d["ndim"])
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    weight = attr(d["weight"]) if d.get("weight") else "None"
    bias = attr(d["bias"]) if d.get("bias") and not rms else "None"
    row_max, tile, block_n, warps = int(p["ROW_MAX"]), int(p["TILE"]), int(p["BLOCK_N"]), int(p["num_warps"])
    flags = f"RMS={rms}, HAS_W=w is not None, HAS_B=b is not None"
    s = Scalars.of(op)  # the numbers the steps read from the module: the row and apply kernels' first parameters
    body = f'''
y = torch.empty_like(x)
N = math.prod(x.shape[max(x.dim() - {ndim}, 0):])
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
    kc_norm_row_kernel[(triton.cdiv(M, bm),)]({s.params}x, y, w_arg, b_arg, M, N, eps, BLOCK_M=bm, BLOCK_N=bn, {flags},
                                              num_warps=warps)
    return y
group = M
l2 = KC_L2_BYTES or (torch.cuda.get_device_properties(x.device).L2_cache_size if x.is_cuda else 0)
if {bool(p.get("l2_groups"))} and l2:  # rows a few at a time, so the writing pass re-reads them from L2
    group = max(1, l2 // 3 // (N * x.element_size()))
splits = max(1, min(triton.cdiv({int(p["split_target"])}, min(group, M)), triton.cdiv(N, {block_n}), 1024))
chunk = triton.cdiv(triton.cdiv(N, splits), {block_n}) * {block_n}
splits = triton.cdiv(N, chunk)
mean = torch.empty((min(group, M), splits), dtype=torch.float32, device=x.device)
m2 = torch.empty((min(group, M), splits), dtype=torch.float32, device=x.device)
x2, y2 = x.reshape(M, N), y.reshape(M, N)
for r0 in range(0, M, group):
    xs, ys = x2[r0:r0 + group], y2[r0:r0 + group]  # views: row-major rows stay contiguous
    rows = xs.shape[0]
    kc_norm_stats_kernel[(rows, splits)](xs, mean, m2, N, chunk, splits, BLOCK_N={block_n}, RMS={rms},
                                         WELFORD={bool(p.get("welford", True))}, num_warps={warps})
    kc_norm_apply_kernel[(rows, splits)]({s.params}xs, ys, w_arg, b_arg, mean, m2, N, chunk, splits, eps, BLOCK_N={block_n},
                                         BLOCK_S=np2(splits), {flags}, num_warps={warps})
return y'''
    kernels = s.fill(_NORM + STATS + _APPLY)
    steps = step_lines(d.get("steps") or [])
    for store in ("    tl.store(y_ptr + offs, y.to(", "        if i < full:\n            tl.store(y_ptr + row"):
        pad = store[:len(store) - len(store.lstrip())]  # the pointwise ops after the norm, on its fp32 output
        if steps:
            kernels = kernels.replace(store, indent("\n".join(["x = y", *steps, "y = x"]), len(pad)) + "\n" + store, 1)
    return [kernels, "KC_L2_BYTES = None  # L2 bytes to plan row groups for; None: the device's own"], body


KINDS = {"layernorm": (_norm_moves, _render_norm), "rmsnorm": (_norm_moves, _render_norm)}
