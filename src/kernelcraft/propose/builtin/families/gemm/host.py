"""The GEMM family's host code: ModelNew.forward's body for a matmul and for a linear layer, and the module-level
helpers they call. The TMA moves add tma.py's helpers (whether a tensor is on a Hopper GPU and read by TMA as it
lies: the same for every op) and a per-op helper (`kc_matmul_tma` there, `kc_linear_tma` here, named through
`names`) that builds the descriptors and launches the persistent kernel; like every kernel of the op it takes the
op's scalars first."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.family import Names, Rendered
from kernelcraft.propose.builtin.families.gemm import kernels
from kernelcraft.propose.builtin.families.gemm import tma as tma_path
from kernelcraft.propose.builtin.families.gemm.tiles import GEMV_COLUMNS, PRECISIONS, SHORT_K, SHORT_K_TILES, Tiles
from kernelcraft.propose.builtin.paths import attr, parameter
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars

COLUMN_ARGS = '''
def kc_column_args(o, n, ndim):
    """A linear epilogue's parameter operand, one value or one per column of the output's n (shape (), (1,), (n,),
    (1, n), ...; no more dims than the output's ndim), and its stride along the columns (0: one value)."""
    if o.dim() > ndim or any(s != 1 for s in o.shape[:-1]) or (o.dim() and o.shape[-1] not in (1, n)):
        raise ValueError(f"an operand of shape {tuple(o.shape)} does not broadcast along {n} columns of {ndim} dims")
    return [o, 0 if o.dim() == 0 or o.shape[-1] == 1 else o.stride(-1)]
'''


SPLIT_K = '''
def kc_k_splits(tiles, K, block_k, t):
    """Split-K: into how many contiguous parts of K a product of `tiles` output tiles is cut (1: none). Only where
    the tiles fill under half the SMs; the parts divide K exactly, each at least 16 K steps long, and tiles times
    parts stay within one wave of programs."""
    sms = torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 4
    if 2 * tiles > sms:
        return 1
    return max([s for s in range(1, sms // tiles + 1) if K % s == 0 and K // s >= 16 * block_k] or [1])
'''


K_CHUNKS = '''
def kc_k_chunks(t, dim, parts):
    """t's K dim `dim` cut into `parts` contiguous chunks, stacked as a leading batch dim: a view, no copy."""
    d = dim % t.dim()
    return t.unflatten(d, (parts, t.shape[d] // parts)).movedim(d, 0)
'''


def _tiles(p: Tiles) -> dict:
    """The launch constants every GEMM kernel takes from the move."""
    return {"BLOCK_M": int(p.BLOCK_M), "BLOCK_N": int(p.BLOCK_N), "BLOCK_K": int(p.BLOCK_K), "GROUP_M": int(p.GROUP_M)}


def _options(p: Tiles) -> dict:
    return {"num_warps": int(p.num_warps), "num_stages": int(p.num_stages)}


def _precision(p: Tiles) -> str:
    if p.precision not in PRECISIONS:
        raise ValueError(f"unknown matmul precision {p.precision!r}")
    return p.precision


def _strided(p: Tiles) -> tuple[Tiles, str]:
    """The move the strided kernel runs under `p` (Tiles.strided: a 3xTF32 TMA move's is exact fp32 at the first
    exact move's tiles) and its PREC argument: the body's `prec` where it is p's own precision, else that one's."""
    q = p.strided()
    return q, "prec" if q.precision == p.precision else f'"{_precision(q)}"'


_MATMUL = Template('''
M, K, N = a.shape[$am], a.shape[$ak], b.shape[$bn]
out = torch.empty((*(a.shape if a.dim() > 2 else b.shape)[:-2], M, N), dtype=a.dtype, device=a.device)
if out.numel() == 0:
    return out  # K == 0 needs no case: the K loop runs no step and the zero accumulator is stored
c = out
if a.dim() > 2 and b.dim() == 2:  # B shared by every matrix of A: $flat_why (views when A is contiguous)
    c = out.reshape($flat_c)
    a = a.reshape($flat_a)
M = c.shape[-2]
batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
s_a, s_b, s_c = a.stride(), b.stride(), c.stride()
s_ab = s_a[0] if a.dim() == 3 and a.shape[0] > 1 else 0  # a 2-D operand is shared by every batch
s_bb = s_b[0] if b.dim() == 3 and b.shape[0] > 1 else 0
s_cb = s_c[0] if c.dim() == 3 else 0
${diag}${gemv}${short}prec = "$prec" if a.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
${split}${tma}grid = (triton.cdiv(M, $bm) * triton.cdiv(N, $bn_tile), batch)
$launch
return out''')

# how A of 3 dims or more meets a 2-D B: its rows as one matrix (one GEMM), or, where a row's place in its own
# matrix matters (a transposed A, a triangle mask), its matrices as one batch
_FLAT = {True: {"flat_why": "A's leading dims flattened into its rows, one GEMM", "flat_c": "-1, N",
                "flat_a": "c.shape[0], K"},
         False: {"flat_why": "A's leading dims flattened into one batch", "flat_c": "-1, M, N",
                 "flat_a": "c.shape[0], *a.shape[-2:]"}}


def matmul(op: Op, p: Tiles, names: Names) -> Rendered:
    """C = op(A) @ op(B) (2-D, batched 3-D with a 2-D operand shared, or A of more dims flattened over a 2-D B): the
    strided kernel, the GEMV kernel for few columns under the GEMV move, the TMA kernel on a Hopper GPU under a TMA
    move (tma.py: any operands under an fp32 move, copied where TMA cannot read them; 2-D ones as they lie under
    a 16-bit one); then the steps and a triangle mask on the fp32 tile."""
    ta, tb = bool(op.detail.get("trans_a")), bool(op.detail.get("trans_b"))
    prec = _precision(p)
    mask = kernels.mask(op)
    # op(A)[m, k] is A[k, m] when transposed: swap the last two dims' sizes and strides, no copy
    am, ak = (-1, -2) if ta else (-2, -1)
    bk, bn = (-1, -2) if tb else (-2, -1)
    strides = ["s_ab", f"s_a[{am}]", f"s_a[{ak}]", "s_bb", f"s_b[{bk}]", f"s_b[{bn}]", "s_cb", "s_c[-2]", "s_c[-1]"]
    strides += ["diag"] if mask else []  # the triangle's diagonal, read when forward runs
    q, strided_prec = _strided(p)
    tiled = kernels.tiled(op, names)
    launch = tiled.launch("grid", ["a", "b", "c", "M", "N", "K", *strides], {**_tiles(q), "PREC": strided_prec},
                          **_options(q))
    blocks: list = [tiled]
    gemv = ""
    if p.gemv:
        kernel = kernels.gemv(op, names)
        blocks.append(kernel)
        gemv_launch = kernel.launch("(triton.cdiv(M, 8), N, batch)", ["a", "b", "c", "M", "N", "K", *strides],
                                    {"BLOCK_M": 8, "BLOCK_K": 512}, num_warps=4)
        gemv = (f"if N <= {GEMV_COLUMNS}:  # matrix-vector: each column of C from one pass over A\n"
                f"    {gemv_launch}\n    return out\n")
    short = ""
    if p.short_k:
        m, n, k, warps, stages = SHORT_K_TILES
        short_launch = tiled.launch(f"(triton.cdiv(M, {m}) * triton.cdiv(N, {n}), batch)",
                                    ["a", "b", "c", "M", "N", "K", *strides],
                                    {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": int(p.GROUP_M),
                                     "PREC": '"ieee"'}, num_warps=warps, num_stages=stages)
        short = (f"if K <= {SHORT_K}:  # one K step: bound by writing C, exact fp32 on small tiles\n"
                 f"    {short_launch}\n    return out\n")
    tma = ""
    if p.tma and (p.tma_copies or not ta):  # (tma.py: which operands take the TMA path)
        tma_blocks, tma = tma_path.matmul(op, p, names, _tiles(p), _options(p))
        blocks += tma_blocks
    split = ""
    if p.split_k and not mask and not op.detail.get("steps"):  # partial sums must not pass through steps or a mask
        total = kernels.split_sum(names)
        blocks += [SPLIT_K, total]
        part_launch = tiled.launch(
            "(tiles, splits)", ["a", "b", "ws", "M", "N", "part", f"part * s_a[{ak}]", f"s_a[{am}]", f"s_a[{ak}]",
                                f"part * s_b[{bk}]", f"s_b[{bk}]", f"s_b[{bn}]", "M * N", "N", "1"],
            {**_tiles(q), "PREC": strided_prec}, **_options(q))
        sum_launch = total.launch("(triton.cdiv(M * N, 1024),)", ["ws", "c", "M * N", "splits"], {"BLOCK": 1024},
                                  num_warps=4)
        parts = f"    {part_launch}\n"
        if p.split_k_tma:  # the parts as one batch of products on the TMA kernel (its helper: tma.py)
            blocks.append(K_CHUNKS)
            helper = names("kc_matmul_tma")
            parts = (f"    if prec == \"tf32x3\" and kc_tma_gpu(a):  # a batch of K chunks on the TMA kernel\n"
                     f"        {helper}({Scalars.of(op).params}kc_k_chunks(a, {ak}, splits), "
                     f"kc_k_chunks(b, {bk}, splits), ws, prec)\n"
                     f"    else:\n    {parts}")
        split = (f"tiles = triton.cdiv(M, {int(q.BLOCK_M)}) * triton.cdiv(N, {int(q.BLOCK_N)})\n"
                 f"splits = kc_k_splits(tiles, K, {int(q.BLOCK_K)}, a) if batch == 1 and c.dim() == 2 else 1\n"
                 "if splits > 1:  # split-K: too few output tiles to fill the GPU; part p of K is batch p\n"
                 "    ws = torch.empty((splits, M, N), dtype=torch.float32, device=a.device)\n"
                 "    part = K // splits\n"
                 f"{parts}    {sum_launch}\n    return out\n")
    diag = ""
    if mask:
        diagonal = f"int({attr(mask['diagonal_attr'])})" if mask.get("diagonal_attr") else repr(int(mask["diagonal"]))
        diag = f"diag = {diagonal}  # torch.{mask['op']}'s diagonal\n"
    body = _MATMUL.substitute(am=am, ak=ak, bn=bn, gemv=gemv, short=short, prec=prec, tma=tma, bm=int(q.BLOCK_M),
                              bn_tile=int(q.BLOCK_N), launch=launch, diag=diag, split=split,
                              **_FLAT[not ta and not mask])
    return Rendered(tuple(blocks), body)


_LINEAR = Template('''
w, bias = $weight, $bias
K, N = x.shape[-1], w.shape[0]
a = x.reshape(-1, K)
M = a.shape[0]
c = torch.empty((*x.shape[:-1], N), dtype=x.dtype, device=x.device)
if c.numel() == 0:
    return c
c2 = c.reshape(M, N)
bias_arg = x if bias is None else bias
${operands}prec = "$prec" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
${tma}grid = (triton.cdiv(M, $bm) * triton.cdiv(N, $bn), 1)
$launch
return c''')

_LINEAR_TMA = Template('''
def $name(${scalars}a, w, bias, c, prec, has_bias${operands}):
    from triton.tools.tensor_descriptor import TensorDescriptor

    (M, K), N = a.shape, w.shape[0]
$programs
    $launch
''')


def linear(op: Op, p: Tiles, names: Names) -> Rendered:
    """x (..., K) @ weight.T (weight (N, K): already the K-major B the tensor cores want) + bias, then the steps
    (their parameter operands, one value or one per column, read along the columns)."""
    d = op.detail
    s = Scalars.of(op)  # the numbers the epilogue reads from the module: the kernels' and helper's first parameters
    prec = _precision(p)
    refs = operand_refs(d.get("steps") or [])
    epi = [v for k in range(len(refs)) for v in (f"o{k}", f"o{k}_s")]  # the epilogue's operands and their strides
    operands = "".join(f"o{k}, o{k}_s = kc_column_args({parameter(r)}, N, c.dim())  # an epilogue operand, its column "
                       "stride\n" for k, r in enumerate(refs))
    q, strided_prec = _strided(p)
    tiled = kernels.tiled(op, names)
    launch = tiled.launch("grid", ["a", "w", "c2", "bias_arg", *epi, "M", "N", "K", "0", "a.stride(0)", "a.stride(1)",
                                   "0", "w.stride(1)", "w.stride(0)", "0", "c2.stride(0)", "c2.stride(1)"],
                          {**_tiles(q), "PREC": strided_prec, "HAS_BIAS": "bias is not None"}, **_options(q))
    blocks: list = [COLUMN_ARGS] if refs else []
    blocks.append(tiled)
    tma = ""
    if p.tma:
        helper, kernel = names("kc_linear_tma"), kernels.tma(op, names)
        tiles = _tiles(p)
        tma_launch = kernel.launch(
            "(programs,)", [f"TensorDescriptor.from_tensor(a, [{tiles['BLOCK_M']}, {tiles['BLOCK_K']}])",
                            f"TensorDescriptor.from_tensor(w, [{tiles['BLOCK_N']}, {tiles['BLOCK_K']}])", "c", "bias",
                            *epi, "M", "N", "K", "1", "0", "0", "0"],  # one product: batch 1, steps and s_cb 0
            {**tiles, "PREC": "prec", "HAS_BIAS": "has_bias", "PROGRAMS": "programs", "B_KMAJOR": True,
             "BATCHED": False}, **_options(p))
        blocks += [kernel, tma_path.TMA_OK,
                   _LINEAR_TMA.substitute(name=helper, scalars=s.params, operands="".join(f", {v}" for v in epi),
                                          programs=indent(tma_path.programs(p), 4), launch=tma_launch)]
        tma = (f"if K > 0 and kc_tma_ok(a, w, c2):  # w (N, K) row-major is K-major already: no copy\n"
               f"    {helper}({s.params}a, w, bias_arg, c2, prec, bias is not None{''.join(f', {v}' for v in epi)})\n"
               "    return c\n")
    weight = attr(d["weight"]) + (".t()" if d.get("weight_kn") else "")  # held (K, N): its (N, K) transpose
    body = _LINEAR.substitute(weight=weight, bias=attr(d["bias"]) if d.get("bias") else "None",
                              operands=operands, prec=prec, tma=tma, bm=int(q.BLOCK_M), bn=int(q.BLOCK_N),
                              launch=launch)
    return Rendered(tuple(blocks), body)
