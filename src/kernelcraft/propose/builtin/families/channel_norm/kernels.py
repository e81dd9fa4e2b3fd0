"""The channel norms' kernels and launches. The pointwise steps after a norm (its epilogue, steps.py) apply to the
fp32 result y before each store: each kernel has an `$epilogue` slot there, filled from the op's steps (empty when
it has none). The kernels take the op's scalars first (the numbers the steps read from the module), and after their
own parameters the epilogue's parameter operands (conv/operands.py), indexed over the kernel dims (n, c, s): the
image, the channel, and the spatial dims taken flat; an operand per channel (O<k>_COLS) is read by the channel
the kernel already has."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.chunk_stats import stats_kernel
from kernelcraft.propose.builtin.codegen import num
from kernelcraft.propose.builtin.families.conv import operands
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_on

NDIM = 3  # the kernels' output dims for the operands: (n, c, s), s the spatial dims flat


def _epilogue(op: Op, depth: int, channel: tuple[str, str | None], every: tuple[dict, str]) -> str:
    """The op's steps on the fp32 result y, indented `depth`: an operand per channel read at `channel` (the kernel's
    channel index, shaped like y or a scalar, and its mask), any other at `every` ({kernel dim: index}, each shaped
    like y or broadcasting to it, and their mask)."""
    def load(k: int) -> str:
        return operands.flagged(k, operands.load(k, [({1: channel[0]}, "")], channel[1]),
                                operands.load(k, [(every[0], "")], every[1]))
    return epilogue_on("y", op.detail.get("steps") or [], load, depth)


_BATCHNORM = Template('''
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
$plane_epilogue
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
$flat_epilogue
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask$hint)
''')

_GROUP_ROW = Template('''
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
$epilogue
tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
''')

def _merge(parts: str, chunk: str, index: str, count: str = "cnt", hint: str = "") -> str:
    """Kernel lines merging slab `row`'s `parts` chunk statistics (Chan et al.: the chunks' means and centred sums of
    squares, chunks of `chunk` elements, the last one short) into its mean mu and rstd; `index` is the chunk number s
    as the chunk's offset multiplies it, `count` the name of the chunks' counts, `hint` the loads' extra arguments."""
    return f"""s = tl.arange(0, BLOCK_S)
{count} = tl.where(s < {parts}, tl.minimum({chunk}, L - {index} * {chunk}).to(tl.float32), 0.0)
means = tl.load(mean_ptr + row * {parts} + s, mask=s < {parts}, other=0.0{hint})
mu = tl.sum({count} * means, 0) / L
m2 = tl.load(m2_ptr + row * {parts} + s, mask=s < {parts}, other=0.0{hint})
rstd = tl.rsqrt((tl.sum(m2, 0) + tl.sum({count} * (means - mu) * (means - mu), 0)) / L + eps)"""


def _normalize(pad: str = "") -> str:
    """Kernel lines normalizing x (slab `row`, offsets o within it, valid below hi) into y with the channel's affine,
    each line indented by `pad`."""
    return "\n".join(pad + line for line in """y = (x - mu) * rstd
ch = (row % G) * CPG + o // inner
if HAS_W:
    y = y * tl.load(w_ptr + ch, mask=o < hi, other=0.0).to(tl.float32)
if HAS_B:
    y = y + tl.load(b_ptr + ch, mask=o < hi, other=0.0).to(tl.float32)""".splitlines())


_GROUP_APPLY = Template(f'''
# program (row, split): merge the slab's chunk statistics (Chan et al.), then normalize this chunk
row = tl.program_id(0).to(tl.int64)
{_merge("splits", "chunk", "s.to(tl.int64)")}
lo = tl.program_id(1).to(tl.int64) * chunk
hi = tl.minimum(lo + chunk, L)
cols = tl.arange(0, BLOCK_N)
for start in range(lo, hi, BLOCK_N):
    o = start + cols
    x = tl.load(x_ptr + row * L + o, mask=o < hi, other=0.0).to(tl.float32)
{_normalize("    ")}
$epilogue
    tl.store(y_ptr + row * L + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
''')


# Long slabs held in registers across co-resident programs (GroupRows.resident): a slab of L elements is split into
# P chunks of CHUNK, a program per chunk. A program takes its chunk by a ticket (an atomic counter, so every lower
# ticket's program has started: launch order is not relied on), loads the chunk once, writes the chunk's mean and
# centred sum of squares, counts itself in at the slab, and waits until all P parts have; then it merges the slab's
# statistics (Chan et al., as the writing pass of the split path) and normalizes the chunk it still holds: one read
# and one write of x, where the split path reads it twice. Waiting is safe where P programs fit on the GPU at once
# (the forward takes this path only where P is at most the SM count): the earliest slab not yet done then has all
# its tickets taken by started programs, which wait only for each other. Never in the interpreter (it runs programs
# one after another). The slab's sizes are constexprs (a build per shape): each element's channel, o // inner, a
# division by a constant.
_GROUP_RESIDENT = Template(f'''
t = tl.atomic_add(ticket_ptr, 1)  # this program's ticket: tickets are taken in the order programs start
row = (t // P).to(tl.int64)
part = t % P
o = part * CHUNK + tl.arange(0, CHUNK)  # offsets within the slab, 32-bit (the forward: L < 2**31)
hi = L
x = tl.load(x_ptr + row * L + o, mask=o < hi, other=0.0).to(tl.float32)
cnt = tl.minimum(CHUNK, L - part * CHUNK).to(tl.float32)
mean_c = tl.sum(x, 0) / cnt
dev = tl.where(o < hi, x - mean_c, 0.0)
tl.store(mean_ptr + row * P + part, mean_c)
tl.store(m2_ptr + row * P + part, tl.sum(dev * dev, 0))
tl.debug_barrier()  # the statistics stored before the count: released below, at the GPU's scope
tl.atomic_add(arrived_ptr + row, 1, sem="release")
$wait
tl.debug_barrier()
{_merge("P", "CHUNK", "s", "cnts", ', cache_modifier=".cg"')}
{_normalize()}
$epilogue
tl.store(y_ptr + row * L + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
''')
RESIDENT_CHUNK, RESIDENT_WARPS = 32768, 16  # a resident program's chunk (64 values a thread) and warps
# The most programs a slab takes on the resident path (and no more than the GPU's SMs: an H100's and an H200's 132).
# With 32-bit offsets and the sizes compiled in (a first version with 64-bit offsets and run-time sizes lost at every
# size) the resident path gained at 8 parts a slab or fewer and, with the limit lifted to the SMs, at 16 to 64 too
# (evidence.py).
RESIDENT_MAX_PARTS = 132
# How a resident program waits for its slab's other programs (GroupRows.resident_wait): "atomic" polls the slab's
# count with an acquiring atomic add of 0 (every waiting program a read-modify-write on one address); "load" polls it
# with volatile loads, then acquires once. The atomic polls were not what slowed the first version's 64-part slabs:
# they were no slower than the loads (evidence.py).
RESIDENT_WAITS = {
    "atomic": '''while tl.atomic_add(arrived_ptr + row, 0, sem="acquire") < P:  # every part of the slab counted in
    pass''',
    "load": '''while tl.load(arrived_ptr + row, volatile=True) < P:  # every part of the slab counted in
    pass
tl.atomic_add(arrived_ptr + row, 0, sem="acquire")  # then the count acquired once, with the parts' statistics'''}


def _affine(d: dict) -> tuple[str, str, str]:
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    return (eps, attr(d["weight"]) if d.get("weight") else "None", attr(d["bias"]) if d.get("bias") else "None")


_FLAGS = {"HAS_W": "w is not None", "HAS_B": "b is not None"}


def batchnorm(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    eps, weight, bias = _affine(d)
    block, warps = int(p.BLOCK), int(p.num_warps)
    hint = ', eviction_policy="evict_first"' if p.evict_first else ""
    plane = _epilogue(op, 8, ("ch", None), ({0: "plane // C", 1: "ch", 2: "o"}, "o < inner"))
    flat = _epilogue(op, 4, ("ch", "mask"), ({0: "offs // (inner * C)", 1: "ch", 2: "offs % inner"}, "mask"))
    body = _BATCHNORM.substitute(hint=hint, plane_epilogue=plane, flat_epilogue=flat)
    kernel = TritonKernel(names("kc_batchnorm_kernel"),
                          ("x_ptr", "y_ptr", "mean_ptr", "var_ptr", "w_ptr", "b_ptr", "n", "C", "inner", "eps",
                           *operands.params(op, NDIM)),
                          ("BLOCK", "PLANES", "HAS_W", "HAS_B", *operands.flags(op)), body, Scalars.of(op))
    launch = kernel.launch("grid", ["x", "y", "mean", "var", "w_arg", "b_arg", "x.numel()", "C", "inner",
                                    f"float({eps})", *operands.args(op, NDIM)],
                           {"BLOCK": block, "PLANES": "planes", **_FLAGS, **operands.flag_consts(op)}, num_warps=warps)
    planes = f"inner >= {block // 4}" if p.planes else "False"
    return Rendered(_with_helper(op, (kernel,)), f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
C, inner = x.shape[1], math.prod(x.shape[2:])
w, b, mean, var = {weight}, {bias}, {attr(d["running_mean"])}, {attr(d["running_var"])}
w_arg = x if w is None else w
b_arg = x if b is None else b
{_operand_lines(op, "1")}planes = {planes}  # a program per (n, c) plane, a few of them sharing a long plane; else flat tiles
grid = (x.numel() // inner, min(triton.cdiv(inner, {block}), 1024)) if planes else (triton.cdiv(x.numel(), {block}),)
{launch}
return y''')


def group(op: Op, p, names: Names) -> Rendered:
    """groupnorm, or instancenorm as a group per channel."""
    d = op.detail
    eps, weight, bias = _affine(d)
    if op.kind == "groupnorm":
        cdim, groups = "1", f"int({attr(d['groups_attr']) if d.get('groups_attr') else int(d['groups'])})"
    else:  # instance norm: a group per channel; an input of spatial + 1 dims is unbatched
        spatial = d.get("spatial")
        cdim, groups = (f"0 if x.dim() == {int(spatial) + 1} else 1" if spatial is not None else "1"), "C"
    row_max, tile, block_n, warps = int(p.ROW_MAX), int(p.TILE), int(p.BLOCK_N), int(p.num_warps)
    scalars, extra, flags = Scalars.of(op), operands.params(op, NDIM), operands.flags(op)
    row_epilogue = _epilogue(op, 0, ("ch", "mask"), ({0: "(rows // G)[:, None]", 1: "ch",
                                                      2: "(cols % inner)[None, :]"}, "mask"))
    apply_epilogue = _epilogue(op, 4, ("ch", "o < hi"), ({0: "row // G", 1: "ch", 2: "o % inner"}, "o < hi"))
    row = TritonKernel(names("kc_group_row_kernel"),
                       ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "M", "L", "G", "CPG", "inner", "eps", *extra),
                       ("BLOCK_M", "BLOCK_N", "HAS_W", "HAS_B", *flags), _GROUP_ROW.substitute(epilogue=row_epilogue),
                       scalars)
    apply = TritonKernel(names("kc_group_apply_kernel"),
                         ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "mean_ptr", "m2_ptr", "L", "G", "CPG", "inner", "chunk",
                          "splits", "eps", *extra),
                         ("BLOCK_N", "BLOCK_S", "HAS_W", "HAS_B", *flags),
                         _GROUP_APPLY.substitute(epilogue=apply_epilogue), scalars)
    resident = TritonKernel(names("kc_group_resident_kernel"),
                            ("x_ptr", "y_ptr", "w_ptr", "b_ptr", "mean_ptr", "m2_ptr", "ticket_ptr", "arrived_ptr",
                             "eps", *extra),
                            ("L", "G", "CPG", "inner", "P", "CHUNK", "BLOCK_S", "HAS_W", "HAS_B", *flags),
                            _GROUP_RESIDENT.substitute(
                                wait=RESIDENT_WAITS[p.resident_wait],
                                epilogue=_epilogue(op, 0, ("ch", "o < hi"),
                                                   ({0: "row // G", 1: "ch", 2: "o % inner"}, "o < hi"))), scalars)
    stats = stats_kernel(Names())  # chunk statistics as the layer norm's (RMS=False), one kernel for every op
    args, tail, consts = ["x", "y", "w_arg", "b_arg"], operands.args(op, NDIM), {**_FLAGS, **operands.flag_consts(op)}
    resident_lines = _resident_lines(resident, args, tail, consts, int(p.resident_parts)) if p.resident else ""
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
{_operand_lines(op, "cd")}np2 = triton.next_power_of_2
if np2(L) <= {row_max}:  # whole slabs in registers
    bn = np2(L)
    bm = min(np2(M), max(1, {tile} // bn))
    warps = min(16, {warps} * max(1, bm * bn // {tile}))
    {row.launch("(triton.cdiv(M, bm),)", [*args, "M", "L", "G", "CPG", "inner", "eps", *tail],
                {"BLOCK_M": "bm", "BLOCK_N": "bn", **consts}, num_warps="warps")}
    return y
{resident_lines}splits = max(1, min(triton.cdiv({int(p.split_target)}, M), triton.cdiv(L, {block_n}), 1024))
chunk = triton.cdiv(triton.cdiv(L, splits), {block_n}) * {block_n}
splits = triton.cdiv(L, chunk)
mean = torch.empty((M, splits), dtype=torch.float32, device=x.device)
m2 = torch.empty((M, splits), dtype=torch.float32, device=x.device)
{stats.launch("(M, splits)", ["x", "mean", "m2", "L", "chunk", "splits"],
              {"BLOCK_N": block_n, "RMS": False, "WELFORD": bool(p.welford)}, num_warps=warps)}
{apply.launch("(M, splits)", [*args, "mean", "m2", "L", "G", "CPG", "inner", "chunk", "splits", "eps", *tail],
              {"BLOCK_N": block_n, "BLOCK_S": "np2(splits)", **consts}, num_warps=warps)}
return y'''
    return Rendered(_with_helper(op, (row, *((resident,) if p.resident else ()), apply, stats)), body)


def _resident_lines(resident: TritonKernel, args: list, tail: list, consts: dict, parts: int) -> str:
    """The forward's lines running long slabs on co-resident programs (_GROUP_RESIDENT) where the GPU holds a slab's
    programs at once, each chunk in registers; they return y."""
    launch = resident.launch("(M * P,)", [*args, "mean", "m2", "sync[:1]", "sync[1:]", "eps", *tail],
                             {"L": "L", "G": "G", "CPG": "CPG", "inner": "inner", "P": "P", "CHUNK": RESIDENT_CHUNK,
                              "BLOCK_S": "np2(P)", **consts}, num_warps=RESIDENT_WARPS)
    return f'''P = triton.cdiv(L, {RESIDENT_CHUNK})  # a slab's programs, one chunk each
sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 0
if P <= min({parts}, sms) and L < 2 ** 31:  # the SMs hold a slab's P programs at once
    mean = torch.empty((M, P), dtype=torch.float32, device=x.device)
    m2 = torch.empty((M, P), dtype=torch.float32, device=x.device)
    sync = torch.zeros(M + 1, dtype=torch.int32, device=x.device)  # the ticket, then each slab's count
    {launch}
    return y
'''


def _operand_lines(op: Op, cdim: str) -> str:
    """The forward's lines binding the epilogue's operands over the kernel dims (n, c, s): the dims before the
    channel dim `cdim` (an expression) are n, those after it s."""
    return operands.lines(op, "tuple(x.shape)", f"[0] * {cdim} + [1] + [2] * (x.dim() - {cdim} - 1)", NDIM)


def _with_helper(op: Op, blocks: tuple) -> tuple:
    """The op's kernels, and the host helper binding operands when its epilogue reads any."""
    return (*blocks, operands.HELPER) if operands.count(op) else blocks
