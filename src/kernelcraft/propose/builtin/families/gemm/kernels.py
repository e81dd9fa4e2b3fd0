"""The GEMM family's Triton kernels as specs: the strided tiled kernel, the matrix-vector (GEMV) kernel and the
persistent TMA-fed kernel, each one template whose `$epilogue` slot takes what runs on the fp32 result before its
store; and the copy that makes an operand readable by TMA. A matmul's epilogue is its pointwise steps, then its
triangle mask if it has one (torch.triu/tril of the product: zeros outside the triangle, read by a run-time `diag`;
an output tile wholly outside runs no K loop); a linear's kernels are the same templates with a bias pointer,
HAS_BIAS and the steps' parameter operands (o<k>_ptr, o<k>_s: read along the output's columns, stride 0 for one
value) among their parameters, and the bias added before the steps."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines, step_lines

SIZES = ("M", "N", "K")
STRIDES = ("s_ab", "s_am", "s_ak", "s_bb", "s_bk", "s_bn", "s_cb", "s_cm", "s_cn")  # per operand: batch, rows, cols

_TILED = Template('''
# program (tile, batch): a BLOCK_M x BLOCK_N tile of C[batch]; tiles are walked GROUP_M rows of tiles at a
# time (swizzle) so that neighbouring programs share A rows and B columns in L2
pid = tl.program_id(0)
bid = tl.program_id(1).to(tl.int64)
tiles_m = tl.cdiv(M, BLOCK_M)
tiles_n = tl.cdiv(N, BLOCK_N)
in_group = GROUP_M * tiles_n
first_m = (pid // in_group) * GROUP_M
group_m = tl.minimum(tiles_m - first_m, GROUP_M)
pid_m = first_m + (pid % in_group) % group_m
pid_n = (pid % in_group) // group_m
rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
rk = tl.arange(0, BLOCK_K).to(tl.int64)
a_ptrs = a_ptr + bid * s_ab + rm[:, None] * s_am + rk[None, :] * s_ak
b_ptrs = b_ptr + bid * s_bb + rk[:, None] * s_bk + rn[None, :] * s_bn
acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float64 if PREC == "fp64" else tl.float32)
${skip}for k0 in range(0, ${k_end}, BLOCK_K):
    kk = k0 + rk
    a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
    if PREC == "fp64":  # fp32 operands widened exactly: fp64 tensor-core products and sums (Hopper's DMMA)
        acc = tl.dot(a.to(tl.float64), b.to(tl.float64), acc, out_dtype=tl.float64)
    else:
        acc = tl.dot(a, b, acc, input_precision=PREC)
    a_ptrs += BLOCK_K * s_ak
    b_ptrs += BLOCK_K * s_bk
acc = acc.to(tl.float32)
${epilogue}c_ptrs = c_ptr + bid * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn
tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
''')

_GEMV = Template('''
# program (row block, column, batch): BLOCK_M entries of one column of C. The rows of A are walked once in
# BLOCK_K-wide tiles against that column of B, products accumulated in fp32 lanes and summed at the end
# (exact fp32 math: a vector gives tensor cores nothing to do)
rm = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
n = tl.program_id(1).to(tl.int64)
bid = tl.program_id(2).to(tl.int64)
rk = tl.arange(0, BLOCK_K).to(tl.int64)
acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
for k0 in range(0, K, BLOCK_K):
    kk = k0 + rk
    a = tl.load(a_ptr + bid * s_ab + rm[:, None] * s_am + kk[None, :] * s_ak,
                mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + bid * s_bb + kk * s_bk + n * s_bn, mask=kk < K, other=0.0)
    acc += a.to(tl.float32) * b.to(tl.float32)[None, :]
${epilogue}tl.store(c_ptr + bid * s_cb + rm * s_cm + n * s_cn, ${result}.to(c_ptr.dtype.element_ty), mask=rm < M)
''')

# The persistent TMA kernels' walk: program p takes output tiles p, p + PROGRAMS, ... of the batch's products
# (tiles_m x tiles_n per matrix, GROUP_M swizzle within one), each with its matrix bid and tile (pid_m, pid_n); and
# their store of the fp32 tile `acc` through plain masked pointers, after the $epilogue
_WALK = '''tiles_m = tl.cdiv(M, BLOCK_M)
tiles_n = tl.cdiv(N, BLOCK_N)
in_group = GROUP_M * tiles_n
per_matrix = tiles_m * tiles_n
for tile in tl.range(tl.program_id(0), batch * per_matrix, PROGRAMS):
    bid = tile // per_matrix
    at = tile % per_matrix
    first_m = (at // in_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (at % in_group) % group_m
    pid_n = (at % in_group) // group_m
'''
_STORE = '''    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
${epilogue}    tl.store(c_ptr + bid.to(tl.int64) * s_cb + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm < M)[:, None] & (rn < N)[None, :])
'''

_TMA = Template('''
# persistent: program p takes output tiles p, p + PROGRAMS, ... of the batch's products (tiles_m x tiles_n per
# matrix, GROUP_M swizzle within one). TMA brings A tiles and B tiles, zero-filled past the edges: of B transposed
# (N, K) when B_KMAJOR (K-major, the layout Hopper's TF32 tensor-core instructions read), else of B (K, N) as it
# lies (16-bit instructions read either). BATCHED: 3-D descriptors, a (1, rows, cols) block of matrix bid (step
# 0: the one matrix of an operand every product shares). C is stored through plain masked pointers (rows of any
# length; no shared-memory staging)
''' + _WALK + '''    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
${skip}    for k0 in range(0, ${k_end}, BLOCK_K):
        if BATCHED:
            a = a_desc.load([bid * a_step, pid_m * BLOCK_M, k0]).reshape([BLOCK_M, BLOCK_K])
            if B_KMAJOR:
                b = b_desc.load([bid * b_step, pid_n * BLOCK_N, k0]).reshape([BLOCK_N, BLOCK_K]).T
            else:
                b = b_desc.load([bid * b_step, k0, pid_n * BLOCK_N]).reshape([BLOCK_K, BLOCK_N])
        else:
            a = a_desc.load([pid_m * BLOCK_M, k0])
            if B_KMAJOR:
                b = b_desc.load([pid_n * BLOCK_N, k0]).T
            else:
                b = b_desc.load([k0, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc, input_precision=PREC)
''' + _STORE)

_ROWS = '''
# dst[b, r, j] = src[b, r, j] for j < cols, program (rows x cols tile, b): an operand TMA cannot read as it lies (a
# transposed view, or rows not a multiple of 16 bytes), read through its strides (a transposed view along its
# unit-stride rows: Triton specializes a stride of 1, loads along it and stores along the rows, the tile turned in
# shared memory) and written into row-major rows of ld elements (cols rounded up to 16 bytes); the pad past cols is
# left unwritten
tiles_c = tl.cdiv(cols, BLOCK_C)
r = ((tl.program_id(0) // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
j = ((tl.program_id(0) % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
bid = tl.program_id(1).to(tl.int64)
mask = (r[:, None] < rows) & (j[None, :] < cols)
v = tl.load(src_ptr + bid * s_b + r[:, None] * s_r + j[None, :] * s_c, mask=mask)
tl.store(dst_ptr + (bid * rows + r[:, None]) * ld + j[None, :], v, mask=mask)
'''

# 3xTF32 on operands split once (TF32_SPLIT): the TMA kernel's persistent walk, hi and lo tiles of A (M, K) rows and
# of B K-major (N, K) rows. Per K step three TF32 tensor-core products, lo_a hi_b + hi_a lo_b into `small` and
# hi_a hi_b into `part`; every CHUNK steps, and after the last, an fp32 add folds them into the tile's `acc`: the
# tensor cores' own running sum loses bits over a long K (tiles.SPLIT_CHUNK; evidence.py). `small` is dropped
# where it is not finite: an infinite operand's hi times a zero lo (NaN), or times a lo of the other sign, while
# the hi products carry the infinity with its sign
_TMA_SPLIT = Template('''
''' + _WALK + '''    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    part = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
${skip}    for i in range(0, tl.cdiv(${k_end}, BLOCK_K)):
        k0 = i * BLOCK_K
        if BATCHED:
            a_hi = ah_desc.load([bid * a_step, pid_m * BLOCK_M, k0]).reshape([BLOCK_M, BLOCK_K])
            a_lo = al_desc.load([bid * a_step, pid_m * BLOCK_M, k0]).reshape([BLOCK_M, BLOCK_K])
            b_hi = bh_desc.load([bid * b_step, pid_n * BLOCK_N, k0]).reshape([BLOCK_N, BLOCK_K]).T
            b_lo = bl_desc.load([bid * b_step, pid_n * BLOCK_N, k0]).reshape([BLOCK_N, BLOCK_K]).T
        else:
            a_hi = ah_desc.load([pid_m * BLOCK_M, k0])
            a_lo = al_desc.load([pid_m * BLOCK_M, k0])
            b_hi = bh_desc.load([pid_n * BLOCK_N, k0]).T
            b_lo = bl_desc.load([pid_n * BLOCK_N, k0]).T
        small = tl.dot(a_lo, b_hi, small, input_precision="tf32")
        small = tl.dot(a_hi, b_lo, small, input_precision="tf32")
        part = tl.dot(a_hi, b_hi, part, input_precision="tf32")
        if i % CHUNK == CHUNK - 1:
            acc += part + tl.where(tl.abs(small) < float("inf"), small, 0.0)
            part = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc += part + tl.where(tl.abs(small) < float("inf"), small, 0.0)
''' + _STORE)

# x rounded to TF32 (nearest, ties away from zero: what cvt.rna.tf32.f32 does) as an fp32 whose low 13 bits are
# zero, by integer arithmetic on its bits (the same in the interpreter); inf and NaN kept, and a finite x that would
# round past the largest TF32 truncated instead
TF32_ROUND = '''
@triton.jit
def kc_tf32_round(x):
    bits = x.to(tl.uint32, bitcast=True)
    up = (bits + 0x1000) & 0xFFFFE000
    r = tl.where((up & 0x7F800000) == 0x7F800000, bits & 0xFFFFE000, up)
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))
'''

_TF32_SPLIT = '''
# hi, lo of src[b, r, j] for j < cols, program (rows x cols tile, b): 3xTF32's split of an fp32 operand, made once
# before its GEMM: hi = x rounded to TF32, lo = the remainder x - hi (exact in fp32) rounded to TF32 (0 where x is
# infinite or NaN: hi carries it), both written as fp32 into row-major rows of ld elements (cols rounded up to 16
# bytes, the pad unwritten), read through src's strides (a transposed view along its unit-stride rows)
tiles_c = tl.cdiv(cols, BLOCK_C)
r = ((tl.program_id(0) // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
j = ((tl.program_id(0) % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
bid = tl.program_id(1).to(tl.int64)
mask = (r[:, None] < rows) & (j[None, :] < cols)
x = tl.load(src_ptr + bid * s_b + r[:, None] * s_r + j[None, :] * s_c, mask=mask, other=0.0)
hi = kc_tf32_round(x)
lo = kc_tf32_round(tl.where((hi == x) | (tl.abs(hi) == float("inf")) | (hi != hi), 0.0, x - hi))
at = (bid * rows + r[:, None]) * ld + j[None, :]
tl.store(hi_ptr + at, hi, mask=mask)
tl.store(lo_ptr + at, lo, mask=mask)
'''


# a linear's epilogue operand k along the output's columns rn: one value per column, or one for all (stride 0)
_COLUMN_LOAD = "tl.load(o{k}_ptr + rn * o{k}_s, mask=rn < N, other=0.0).to(tl.float32)[None, :]"
_BIAS = ["if HAS_BIAS:", "    x += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]"]


def _lines(lines: list[str], pad: int) -> str:
    """Statements for an `$epilogue` slot at indentation `pad` ("" for none)."""
    return indent("\n".join(lines), pad) + "\n" if lines else ""


def _epilogue(op: Op, pad: int) -> str:
    """What runs on the fp32 tile `acc` before its store: a linear's bias and steps (with their parameter
    operands), a matmul's steps (none: nothing), then a matmul's triangle mask."""
    steps = op.detail.get("steps") or []
    if op.kind == "linear":
        lines = epilogue_lines(steps, lambda k: _COLUMN_LOAD.format(k=k))
        return _lines(["x = acc", *_BIAS, *lines, "acc = x"], pad)
    lines = step_lines(steps)
    lines = ["x = acc", *lines, "acc = x"] if lines else []
    if (kept := _kept(op, "rm[:, None]", "rn[None, :]")) is not None:
        lines.append(f"acc = tl.where({kept}, acc, 0.0)  # torch.{mask(op)['op']}: zeros outside the triangle")
    return _lines(lines, pad)


def mask(op: Op) -> dict | None:
    """A matmul's triangle mask (plan.py: {"op": "triu" | "tril", "diagonal", "diagonal_attr"}), or None."""
    return op.detail.get("mask") if op.kind == "matmul" else None


# the entries a triangle keeps, row i, column j, by the run-time diagonal `diag`; and whether a tile whose rows
# start at m0 and columns at n0 holds any of them
_KEPT = {"triu": "{j} - {i} >= diag", "tril": "{j} - {i} <= diag"}
_LIVE = {"triu": "n0 + BLOCK_N - 1 - m0 >= diag", "tril": "n0 - (m0 + BLOCK_M - 1) <= diag"}


def _kept(op: Op, i: str, j: str) -> str | None:
    found = mask(op)
    return None if found is None else "(" + _KEPT[found["op"]].format(i=i, j=j) + ")"


def _skip(op: Op, pad: int) -> tuple[str, str]:
    """(the lines before the K loop, its bound): a masked matmul's tile wholly outside the triangle runs no
    products (its zero accumulator is masked anyway); else the loop runs over K."""
    found = mask(op)
    if found is None:
        return "", "K"
    lines = ["m0 = pid_m * BLOCK_M", "n0 = pid_n * BLOCK_N",
             f"k_end = tl.where({_LIVE[found['op']]}, K, 0)  # no entry of the tile is kept: no products"]
    return _lines(lines, pad), "k_end"


def _mask_params(op: Op) -> tuple[str, ...]:
    return ("diag",) if mask(op) is not None else ()


def operands(op: Op) -> tuple[str, ...]:
    """A linear's epilogue parameters after c_ptr: the bias pointer, then each operand with its column stride."""
    if op.kind != "linear":
        return ()
    refs = operand_refs(op.detail.get("steps") or [])
    return ("bias_ptr", *(p for k in range(len(refs)) for p in (f"o{k}_ptr", f"o{k}_s")))


def _flags(op: Op) -> tuple[str, ...]:
    return ("HAS_BIAS",) if op.kind == "linear" else ()


def tiled(op: Op, names: Names, base: str | None = None) -> TritonKernel:
    """The strided tiled kernel (any layout, batched): a program per (output tile, batch); named `base` (through
    `names`) where another family launches it for products of its own, else after the op's kind."""
    skip, k_end = _skip(op, 0)
    body = _TILED.substitute(epilogue=_epilogue(op, 0), skip=skip, k_end=k_end)
    return TritonKernel(names(base or f"kc_{op.kind}_kernel"),
                        ("a_ptr", "b_ptr", "c_ptr", *operands(op), *SIZES, *STRIDES, *_mask_params(op)),
                        ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC", *_flags(op)), body, Scalars.of(op))


def gemv(op: Op, names: Names) -> TritonKernel:
    """The matrix-vector kernel (a matmul's): a program per (row block, column, batch)."""
    lines = step_lines(op.detail.get("steps") or [])
    if (kept := _kept(op, "rm", "n")) is not None:
        lines.append(f"x = tl.where({kept}, x, 0.0)  # torch.{mask(op)['op']}: zeros outside the triangle")
    body = _GEMV.substitute(epilogue=_lines(["x = tl.sum(acc, 1)", *lines] if lines else [], 0),
                            result="x" if lines else "tl.sum(acc, 1)")
    return TritonKernel(names("kc_gemv_kernel"), ("a_ptr", "b_ptr", "c_ptr", *SIZES, *STRIDES, *_mask_params(op)),
                        ("BLOCK_M", "BLOCK_K"), body, Scalars.of(op))


_SPLIT_SUM = '''
# C = the sum of the split-K partial tiles ws[0..splits) (fp32, each M x N, contiguous), in a fixed order
offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
mask = offs < n
acc = tl.zeros([BLOCK], dtype=tl.float32)
for s in range(0, splits):
    acc += tl.load(ws_ptr + s * n + offs, mask=mask, other=0.0)
tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)
'''


def split_sum(names: Names) -> TritonKernel:
    """Split-K's second pass: the partial products of each part of K summed (deterministic: no atomics)."""
    return TritonKernel(names("kc_split_k_sum_kernel"), ("ws_ptr", "c_ptr", "n", "splits"), ("BLOCK",), _SPLIT_SUM)


def tma(op: Op, names: Names) -> TritonKernel:
    """The persistent kernel whose operand tiles come through tensor descriptors (row-major operands with 16-byte
    aligned rows: 2-D, or 3-D under BATCHED); a linear's is never batched (batch 1, steps and s_cb 0)."""
    skip, k_end = _skip(op, 4)
    body = _TMA.substitute(epilogue=_epilogue(op, 4), skip=skip, k_end=k_end)
    return TritonKernel(names(f"kc_{op.kind}_tma_kernel"),
                        ("a_desc", "b_desc", "c_ptr", *operands(op), *SIZES, "batch", "a_step", "b_step", "s_cb",
                         *_mask_params(op)),
                        ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PREC", *_flags(op), "PROGRAMS", "B_KMAJOR",
                         "BATCHED"), body, Scalars.of(op))


def rows_copy(names: Names) -> TritonKernel:
    """The copy of an operand into row-major rows TMA can read (host kc_tma_rows launches it)."""
    return TritonKernel(names("kc_tma_rows_kernel"), ("src_ptr", "dst_ptr", "rows", "cols", "ld", "s_b", "s_r", "s_c"),
                        ("BLOCK_R", "BLOCK_C"), _ROWS)


def tma_split(op: Op, names: Names) -> TritonKernel:
    """The persistent TMA kernel of 3xTF32 on operands split once: hi and lo descriptors of A and of B K-major,
    CHUNK K steps summed by the tensor cores between fp32 folds (a matmul's; 2-D, or 3-D under BATCHED)."""
    skip, k_end = _skip(op, 4)
    body = _TMA_SPLIT.substitute(epilogue=_epilogue(op, 4), skip=skip, k_end=k_end)
    return TritonKernel(names(f"kc_{op.kind}_split_kernel"),
                        ("ah_desc", "al_desc", "bh_desc", "bl_desc", "c_ptr", *operands(op), *SIZES, "batch",
                         "a_step", "b_step", "s_cb", *_mask_params(op)),
                        ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "CHUNK", *_flags(op), "PROGRAMS", "BATCHED"),
                        body, Scalars.of(op))


def tf32_split(names: Names) -> TritonKernel:
    """The split of an fp32 operand into its TF32 hi and lo parts, in rows TMA reads (host kc_tf32_split launches
    it; it calls TF32_ROUND's kc_tf32_round)."""
    return TritonKernel(names("kc_tf32_split_kernel"),
                        ("src_ptr", "hi_ptr", "lo_ptr", "rows", "cols", "ld", "s_b", "s_r", "s_c"),
                        ("BLOCK_R", "BLOCK_C"), _TF32_SPLIT)
