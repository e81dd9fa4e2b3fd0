"""The GEMM family's TMA host code: module-level helpers the same for every op (`TMA_OK`: whether a tensor is on a
Hopper GPU and whether TMA reads it as it lies; `TMA_DESC`: a tensor descriptor, 3-D for a batch), and a matmul's
per-op helper `kc_matmul_tma` (named through `names`) with the copy helper `kc_tma_rows` it calls, and the lines of
ModelNew.forward that take the TMA path.

Where a matmul's TMA path applies (Tiles.tma_copies): an fp32 move takes it on a Hopper GPU for any operands,
copying once those TMA cannot read as they lie, as B is already copied once to be K-major. The copies are the
family's own Triton kernel (kernels.rows_copy: 64 x 64 tiles, loaded along a transposed view's unit stride and
stored along the rows), faster than torch's .contiguous() on transposed views (evidence.py). A 16-bit move takes
it for 2-D operands as they lie (A untransposed), as before: its GEMM is several times faster, so copies weigh
more, and none was measured.

Under a move that splits once (Tiles.split_once), a product large enough (M N >= SPLIT_ONCE_MIN (M + N)) of fp32
operands takes `kc_matmul_split` instead: `kc_tf32_split` writes each operand's TF32 hi and lo parts into rows TMA
reads (A as (M, K), B K-major as (N, K), any layout or batch read through its strides, so no other copy), and the
persistent split kernel runs three TF32 products per K step (kernels._TMA_SPLIT)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.families.gemm import kernels
from kernelcraft.propose.builtin.families.gemm.tiles import SPLIT_CHUNK, SPLIT_ONCE_MIN, Tiles
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars

TMA_OK = '''
def kc_tma_gpu(t):  # on a Hopper or newer GPU: TMA there
    return t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9


def kc_tma_reads(t):  # TMA reads t (..., rows, cols) as it lies: unit last stride, other strides, base 16-byte aligned
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1]))


def kc_tma_ok(*ts):  # 2-D operands TMA reads as they lie, on a Hopper or newer GPU
    return all(kc_tma_gpu(t) and t.dim() == 2 and kc_tma_reads(t) for t in ts)
'''

TMA_DESC = '''
def kc_tma_desc(t, block, batched):
    """A tensor descriptor of t's (rows, cols) blocks and the step of its matrix index from one product of the batch
    to the next: batched, a 3-D one of (1, rows, cols) blocks (a 2-D operand the one matrix every product reads,
    step 0)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    if not batched:
        return TensorDescriptor.from_tensor(t, block), 0
    t = t if t.dim() == 3 else t.unsqueeze(0)
    return TensorDescriptor.from_tensor(t, [1, *block]), int(t.shape[0] > 1)
'''

_ROWS = Template('''
def $name(t):
    """t (..., rows, cols) as TMA reads it: itself where it can, else copied into row-major rows padded to 16 bytes
    ($kernel; a transposed view too: 2.9x faster than torch's .contiguous() on an H100), the copy's first cols
    columns returned (a descriptor's shape stops there and zero-fills past it, so the pad is never read)."""
    if kc_tma_reads(t):
        return t
    rows, cols = t.shape[-2], t.shape[-1]
    ld = triton.cdiv(cols * t.element_size(), 16) * 16 // t.element_size()
    dst = torch.empty((*t.shape[:-1], ld), dtype=t.dtype, device=t.device)
    batch, s_b = (t.shape[0], t.stride(0)) if t.dim() == 3 else (1, 0)
    $launch
    return dst[..., :cols]
''')

_MATMUL_TMA = Template('''
def $name(${scalars}a, b, c, prec$diag):
    """C = op(A) @ op(B) through TMA: c (M, N), or (batch, M, N) with a 2-D operand shared by every product; A read
    as (..., M, K) rows and B as $b_rows rows, each as it lies where TMA can, else copied once ($rows)."""
    a, b = $rows($a_view), $rows($b_view)
    batched = c.dim() == 3
    M, K, N = a.shape[-2], a.shape[-1], c.shape[-1]
    batch = c.shape[0] if batched else 1
    a_desc, a_step = kc_tma_desc(a, [$bm, $bk], batched)
    b_desc, b_step = kc_tma_desc(b, [$b_block], batched)
$programs
    $launch
''')

_SPLIT = Template('''
def $name(t):
    """(hi, lo): fp32 t (..., rows, cols) split into its TF32 parts ($kernel), each in row-major rows padded to 16
    bytes (TMA reads them), the views of their first cols columns returned."""
    rows, cols = t.shape[-2], t.shape[-1]
    ld = triton.cdiv(cols, 4) * 4
    hi = torch.empty((*t.shape[:-1], ld), dtype=t.dtype, device=t.device)
    lo = torch.empty_like(hi)
    batch, s_b = (t.shape[0], t.stride(0)) if t.dim() == 3 else (1, 0)
    $launch
    return hi[..., :cols], lo[..., :cols]
''')

_MATMUL_SPLIT = Template('''
def $name(${scalars}a, b, c$diag):
    """C = op(A) @ op(B) as 3xTF32 on operands split once ($split): A as (..., M, K) rows, B as (..., N, K) rows
    (K-major), c (M, N), or (batch, M, N) with a 2-D operand shared by every product."""
    (a_hi, a_lo), (b_hi, b_lo) = $split($a_view), $split($b_view)
    batched = c.dim() == 3
    M, K, N = a_hi.shape[-2], a_hi.shape[-1], c.shape[-1]
    batch = c.shape[0] if batched else 1
    ah_desc, a_step = kc_tma_desc(a_hi, [$bm, $bk], batched)
    al_desc, _ = kc_tma_desc(a_lo, [$bm, $bk], batched)
    bh_desc, b_step = kc_tma_desc(b_hi, [$bn, $bk], batched)
    bl_desc, _ = kc_tma_desc(b_lo, [$bn, $bk], batched)
$programs
    $launch
''')


def programs(p: Tiles, batch: str = "") -> str:
    """A persistent kernel's grid: one program per SM (4 off a GPU: the interpreter), fewer when there are fewer
    tiles (`batch`: the number of products, as source text, "" for one)."""
    tiles = f"{batch + ' * ' if batch else ''}triton.cdiv(M, {int(p.BLOCK_M)}) * triton.cdiv(N, {int(p.BLOCK_N)})"
    return (f"programs = min({tiles},\n"
            "               torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 4)")


def _rows_helper(names: Names) -> tuple[str, TritonKernel, str]:
    """(the helper's name, the copy kernel it launches, its source)."""
    kernel, name = kernels.rows_copy(names), names("kc_tma_rows")
    launch = kernel.launch("(triton.cdiv(rows, 64) * triton.cdiv(cols, 64), batch)",
                           ["t", "dst", "rows", "cols", "ld", "s_b", "t.stride(-2)", "t.stride(-1)"],
                           {"BLOCK_R": 64, "BLOCK_C": 64}, num_warps=4)
    return name, kernel, _ROWS.substitute(name=name, kernel=kernel.name, launch=launch)


def matmul(op: Op, p: Tiles, names: Names, tiles: dict, options: dict) -> tuple[list, str]:
    """(the module-level blocks, the forward's lines) of a matmul's TMA path under the TMA move `p` (tiles and
    options: its launch constants): A read as op(A) (M, K) rows (a transposed A copied), B K-major (N, K) (B (K, N)
    copied, or given (N, K) for A @ B.T and read as it lies) or, not `b_kmajor`, as it lies; the forward's lines
    take the path where it applies (module docstring) and return."""
    ta, tb = bool(op.detail.get("trans_a")), bool(op.detail.get("trans_b"))
    mask = kernels.mask(op) is not None
    kmajor = tb or bool(p.b_kmajor)
    helper, kernel, s = names("kc_matmul_tma"), kernels.tma(op, names), Scalars.of(op)
    rows, copy, rows_source = _rows_helper(names)
    bm, bn, bk = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
    launch = kernel.launch("(programs,)", ["a_desc", "b_desc", "c", "M", "N", "K", "batch", "a_step", "b_step",
                                           "c.stride(0) if batched else 0", *(["diag"] if mask else [])],
                           {**tiles, "PREC": "prec", "PROGRAMS": "programs", "B_KMAJOR": kmajor,
                            "BATCHED": "batched"}, **options)
    tail = ", diag" if mask else ""  # the helper passes the diagonal on
    source = _MATMUL_TMA.substitute(
        name=helper, scalars=s.params, diag=tail, rows=rows, a_view="a.mT" if ta else "a",
        b_view="b" if tb or not kmajor else "b.mT", b_rows="(..., N, K)" if kmajor else "(..., K, N)",
        b_block=f"{bn}, {bk}" if kmajor else f"{bk}, {bn}", bm=bm, bk=bk, programs=indent(programs(p, "batch"), 4),
        launch=launch)
    if p.tma_copies:
        guard = "if K > 0 and kc_tma_gpu(a):  # a Hopper GPU: TMA for any operands, copied where it cannot read them"
    else:
        guard = "if c.dim() == 2 and K > 0 and kc_tma_ok(a, b, c):  # 2-D operands TMA reads as they lie"
    call = f"{helper}({s.params}a, b, c, prec{tail})"
    blocks = [kernel, copy, TMA_OK, TMA_DESC, rows_source, source]
    if p.split_once:
        split_blocks, split_call = _split_once(op, p, names, tiles, options)
        blocks += split_blocks
        call = (f"if a.dtype == b.dtype == torch.float32 and M * N >= {SPLIT_ONCE_MIN} * (M + N):  # split once\n"
                f"        {split_call}\n    else:  # a product too small for the split pass to pay\n        {call}")
    return blocks, f"{guard}\n    {call}\n    return out\n"


def _split_once(op: Op, p: Tiles, names: Names, tiles: dict, options: dict) -> tuple[list, str]:
    """(the module-level blocks, the call) of a matmul's 3xTF32 on operands split once (kernels.tma_split): A read
    as op(A) (M, K), B as op(B).T (N, K), each split into rows TMA reads by kc_tf32_split."""
    ta, tb = bool(op.detail.get("trans_a")), bool(op.detail.get("trans_b"))
    mask = kernels.mask(op) is not None
    helper, kernel, s = names("kc_matmul_split"), kernels.tma_split(op, names), Scalars.of(op)
    part, split = kernels.tf32_split(names), names("kc_tf32_split")
    launch = part.launch("(triton.cdiv(rows, 64) * triton.cdiv(cols, 64), batch)",
                         ["t", "hi", "lo", "rows", "cols", "ld", "s_b", "t.stride(-2)", "t.stride(-1)"],
                         {"BLOCK_R": 64, "BLOCK_C": 64}, num_warps=4)
    bm, bn, bk = tiles["BLOCK_M"], tiles["BLOCK_N"], tiles["BLOCK_K"]
    gemm = kernel.launch("(programs,)", ["ah_desc", "al_desc", "bh_desc", "bl_desc", "c", "M", "N", "K", "batch",
                                         "a_step", "b_step", "c.stride(0) if batched else 0",
                                         *(["diag"] if mask else [])],
                         {**tiles, "CHUNK": SPLIT_CHUNK, "PROGRAMS": "programs", "BATCHED": "batched"}, **options)
    tail = ", diag" if mask else ""
    source = _MATMUL_SPLIT.substitute(name=helper, scalars=s.params, diag=tail, split=split,
                                      a_view="a.mT" if ta else "a", b_view="b" if tb else "b.mT", bm=bm, bn=bn,
                                      bk=bk, programs=indent(programs(p, "batch"), 4), launch=gemm)
    return ([kernel, part, kernels.TF32_ROUND, _SPLIT.substitute(name=split, kernel=part.name, launch=launch),
             source], f"{helper}({s.params}a, b, c{tail})")
