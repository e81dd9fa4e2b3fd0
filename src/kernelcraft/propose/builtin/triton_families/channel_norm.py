"""Channel-norm family over (N, C, *spatial) inputs (inner = the spatial size).

batchnorm (eval): a per-channel affine map; flat tiles find each element's channel as (offset // inner) % C, or
a program takes one (n, c) plane and loads its channel's coefficients once.
groupnorm / instancenorm: a "row" is one (n, group) slab of (C / G) * inner contiguous elements (instance: G = C),
normalized like norm.py's rows: in registers when it fits (one read, one write), else split over programs whose
chunk statistics (Welford or two-pass) are merged per row by the writing pass; the affine is per channel,
channel = group * (C / G) + col // inner. All three take the pointwise steps after them ("steps") as an epilogue on
the fp32 result before its store."""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import attr, indent, num
from kernelcraft.propose.builtin.families.norm.kernels import STATS
from kernelcraft.propose.builtin.steps import step_lines


def _batchnorm_moves(op: Op) -> list[tuple]:
    flat = ("Flat grid, one program per {b}-element tile ({w} warps): each element's channel from its offset, "
            "running mean/var, weight and bias gathered per element (cache-resident), fp32 math")
    planes = ("One program per (n, c) plane and {b}-element tile stride ({w} warps): the channel's scale and shift "
              "loaded once as scalars, no per-element channel division (flat tiles when planes are shorter than "
              "a quarter tile)")
    base = {"BLOCK": 4096, "num_warps": 8}
    return [(flat.format(b=4096, w=8), "parallelism", base),
            (planes.format(b=4096, w=8), "control", {**base, "planes": True}),
            (flat.format(b=1024, w=4), "parallelism", {"BLOCK": 1024, "num_warps": 4}),
            (planes.format(b=1024, w=4), "parallelism", {"BLOCK": 1024, "num_warps": 4, "planes": True}),
            ("Streaming cache hints: flat 4096-element tiles with x loaded and y stored evict_first, touched once",
             "memory", {**base, "evict_first": True})]


def _group_moves(op: Op) -> list[tuple]:
    row = ("(n, group) slabs up to {m} elements held in registers: statistics and normalization from one read, one "
           "write (short slabs packed {t} elements per program, {w} warps); longer slabs split over programs with "
           "Welford chunk statistics merged by the writing pass")
    base = {"ROW_MAX": 16384, "TILE": 4096, "BLOCK_N": 2048, "num_warps": 8, "split_target": 2048, "welford": True}
    return [(row.format(m=16384, t=4096, w=8), "memory", base),
            (row.format(m=16384, t=4096, w=4), "memory", {**base, "num_warps": 4}),
            ("Long slabs split finer (aim: 4096 programs, 1024-element tiles) so few slabs still fill the GPU; "
             "per-chunk statistics merged per slab by the writing pass", "parallelism",
             {**base, "split_target": 4096, "BLOCK_N": 1024}),
            ("Long slabs handled by one program each, looping over 2048-element tiles (no split, no partials)",
             "control", {**base, "split_target": 0}),
            ("Two-pass statistics per chunk of a long slab: the sum for the mean, then the squared deviations "
             "(exact, the chunk re-read from L2) instead of one-pass Welford", "precision", {**base, "welford": False})]


_BATCHNORM = '''
@triton.jit
def kc_batchnorm_kernel(${scalars}x_ptr, y_ptr, mean_ptr, var_ptr, w_ptr, b_ptr, n, C, inner, eps, BLOCK: tl.constexpr,
                        PLANES: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    if PLANES:  # program (plane, j): plane n * C + c, its tiles j, j + programs(1), ...
        plane = tl.program_id(0).to(tl.int64)
        ch = plane % C
        mu = tl.load(mean_ptr + ch).to(tl.float32)
        scale = tl.rsqrt(tl.load(var_ptr + ch).to(tl.float32) + eps)
        if HAS_W:
            scale = scale * tl.load(w_ptr + ch).to(tl.float32)
        shift = 0.0
        if HAS_B:
            shift = tl.load(b_ptr + ch).to(tl.float32)
        for tile in range(tl.program_id(1).to(tl.int64), tl.cdiv(inner, BLOCK), tl.num_programs(1)):
            o = tile * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + plane * inner + o, mask=o < inner, other=0.0).to(tl.float32)
            y = (x - mu) * scale + shift
            tl.store(y_ptr + plane * inner + o, y.to(y_ptr.dtype.element_ty), mask=o < inner)
    else:  # flat tiles: the channel of each element from its offset
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        ch = (offs // inner) % C
        mu = tl.load(mean_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        scale = tl.rsqrt(tl.load(var_ptr + ch, mask=mask, other=1.0).to(tl.float32) + eps)
        if HAS_W:
            scale = scale * tl.load(w_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        shift = 0.0
        if HAS_B:
            shift = tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + offs, mask=mask, other=0.0$hint).to(tl.float32)
        y = (x - mu) * scale + shift
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask$hint)
'''

_GROUP = '''
@triton.jit
def kc_group_row_kernel(${scalars}x_ptr, y_ptr, w_ptr, b_ptr, M, L, G, CPG, inner, eps, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    # BLOCK_M whole slabs (rows of L) per program
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < L)[None, :]
    offs = rows[:, None] * L + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    x = tl.where(mask, x - (tl.sum(x, 1) / L)[:, None], 0.0)
    y = x * tl.rsqrt(tl.sum(x * x, 1) / L + eps)[:, None]
    ch = (rows % G)[:, None] * CPG + (cols // inner)[None, :]
    if HAS_W:
        y = y * tl.load(w_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def kc_group_apply_kernel(${scalars}x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, m2_ptr, L, G, CPG, inner, chunk, splits, eps,
                          BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    # program (row, split): merge the slab's chunk statistics (Chan et al.), then normalize this chunk
    row = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    cnt = tl.where(s < splits, tl.minimum(chunk, L - s.to(tl.int64) * chunk).to(tl.float32), 0.0)
    means = tl.load(mean_ptr + row * splits + s, mask=s < splits, other=0.0)
    mu = tl.sum(cnt * means, 0) / L
    m2 = tl.load(m2_ptr + row * splits + s, mask=s < splits, other=0.0)
    rstd = tl.rsqrt((tl.sum(m2, 0) + tl.sum(cnt * (means - mu) * (means - mu), 0)) / L + eps)
    lo = tl.program_id(1).to(tl.int64) * chunk
    hi = tl.minimum(lo + chunk, L)
    cols = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        o = start + cols
        x = tl.load(x_ptr + row * L + o, mask=o < hi, other=0.0).to(tl.float32)
        y = (x - mu) * rstd
        ch = (row % G) * CPG + o // inner
        if HAS_W:
            y = y * tl.load(w_ptr + ch, mask=o < hi, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + ch, mask=o < hi, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * L + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
'''


def _with_steps(kernel: str, steps: list | None) -> str:
    """The kernel with the pointwise steps after the norm (its epilogue) applied to the fp32 result y before each
    store."""
    lines = step_lines(steps or [])
    if not lines:
        return kernel
    out = []
    for line in kernel.split("\n"):
        if line.lstrip().startswith("tl.store(y_ptr"):
            out.append(indent("\n".join(["x = y", *lines, "y = x"]), len(line) - len(line.lstrip())))
        out.append(line)
    return "\n".join(out)


def _affine(d: dict) -> tuple[str, str, str]:
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    return (eps, attr(d["weight"]) if d.get("weight") else "None", attr(d["bias"]) if d.get("bias") else "None")


def _render_batchnorm(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    eps, weight, bias = _affine(d)
    block, warps = int(p["BLOCK"]), int(p["num_warps"])
    hint = ', eviction_policy="evict_first"' if p.get("evict_first") else ""
    planes = f"inner >= {block // 4}" if p.get("planes") else "False"
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    body = f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
C, inner = x.shape[1], math.prod(x.shape[2:])
w, b, mean, var = {weight}, {bias}, {attr(d["running_mean"])}, {attr(d["running_var"])}
w_arg = x if w is None else w
b_arg = x if b is None else b
planes = {planes}  # a program per (n, c) plane, a few of them sharing a long plane; else flat tiles
grid = (x.numel() // inner, min(triton.cdiv(inner, {block}), 1024)) if planes else (triton.cdiv(x.numel(), {block}),)
kc_batchnorm_kernel[grid]({s.params}x, y, mean, var, w_arg, b_arg, x.numel(), C, inner, float({eps}), BLOCK={block},
                          PLANES=planes, HAS_W=w is not None, HAS_B=b is not None, num_warps={warps})
return y'''
    return [s.fill(_with_steps(_BATCHNORM.replace("$hint", hint), d.get("steps")))], body


def _render_group(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    eps, weight, bias = _affine(d)
    if op.kind == "groupnorm":
        cdim, groups = "1", f"int({attr(d['groups_attr']) if d.get('groups_attr') else int(d['groups'])})"
    else:  # instance norm: a group per channel; an input of spatial + 1 dims is unbatched
        spatial = d.get("spatial")
        cdim, groups = (f"0 if x.dim() == {int(spatial) + 1} else 1" if spatial is not None else "1"), "C"
    row_max, tile, block_n, warps = int(p["ROW_MAX"]), int(p["TILE"]), int(p["BLOCK_N"]), int(p["num_warps"])
    flags = "HAS_W=w is not None, HAS_B=b is not None"
    s = Scalars.of(op)  # the numbers the steps read from the module: the row and apply kernels' first parameters
    body = f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
cd = {cdim}  # the channel dim
C, inner = x.shape[cd], math.prod(x.shape[cd + 1:])
G = {groups}
CPG = C // G
M, L = math.prod(x.shape[:cd]) * G, CPG * inner  # slabs (n, group) of L contiguous elements
w, b, eps = {weight}, {bias}, float({eps})
w_arg = x if w is None else w
b_arg = x if b is None else b
np2 = triton.next_power_of_2
if np2(L) <= {row_max}:  # whole slabs in registers
    bn = np2(L)
    bm = min(np2(M), max(1, {tile} // bn))
    warps = min(16, {warps} * max(1, bm * bn // {tile}))
    kc_group_row_kernel[(triton.cdiv(M, bm),)]({s.params}x, y, w_arg, b_arg, M, L, G, CPG, inner, eps, BLOCK_M=bm, BLOCK_N=bn,
                                               {flags}, num_warps=warps)
    return y
splits = max(1, min(triton.cdiv({int(p["split_target"])}, M), triton.cdiv(L, {block_n}), 1024))
chunk = triton.cdiv(triton.cdiv(L, splits), {block_n}) * {block_n}
splits = triton.cdiv(L, chunk)
mean = torch.empty((M, splits), dtype=torch.float32, device=x.device)
m2 = torch.empty((M, splits), dtype=torch.float32, device=x.device)
kc_norm_stats_kernel[(M, splits)](x, mean, m2, L, chunk, splits, BLOCK_N={block_n}, RMS=False,
                                  WELFORD={bool(p.get("welford", True))}, num_warps={warps})
kc_group_apply_kernel[(M, splits)]({s.params}x, y, w_arg, b_arg, mean, m2, L, G, CPG, inner, chunk, splits, eps,
                                   BLOCK_N={block_n}, BLOCK_S=np2(splits), {flags}, num_warps={warps})
return y'''
    return [s.fill(_with_steps(_GROUP, d.get("steps"))), STATS], body  # chunk statistics: the norm family's (RMS=False)


KINDS = {"batchnorm": (_batchnorm_moves, _render_batchnorm), "groupnorm": (_group_moves, _render_group),
         "instancenorm": (_group_moves, _render_group)}
