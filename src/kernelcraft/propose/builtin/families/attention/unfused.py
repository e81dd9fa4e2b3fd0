"""The attention family's path for wide heads, chosen at run time in ModelNew.forward: heads whose padded rows are
too wide for the FlashAttention kernel's registers (WIDE: a 1024-wide fp32 head spilled so badly that its
verification timed out; evidence.py) take three kernels, the L x S scores in memory (batch·heads·L·S fp32: 1 GiB
at KernelBench's 97_ScaledDotProductAttention):

1. scores = q @ k^T: the GEMM family's strided tiled kernel (its K loop over E in BLOCK_K steps), batched over the
   leading dims, fp32 out; causal, it is the kernel with torch.tril's mask, so the tiles wholly above the diagonal
   run no products (their scores are masked by the softmax anyway);
2. `kc_attention_softmax`: each score row scaled and soft-maxed in fp32 (two passes over the row in BLOCK_S tiles,
   an online max and sum, then the probabilities), the causal mask applied there (-inf past the query: torch's
   top-left alignment), written over the scores (fp32 inputs) or to a 16-bit copy (16-bit inputs: the
   probabilities rounded to the input dtype before the product with v, as the fused kernel and torch's do);
3. out = p @ v: the same tiled kernel, its K loop over the keys (causal: only the first min(S, L), as no query
   sees a key past L - 1), out in q's dtype.

The products take the move's precision ("ieee", "tf32x3", or "tf32" in the relaxed move) for fp32 inputs. On a
Hopper GPU the tensor-core moves' fp32 inputs take the GEMM family's TMA kernel for both products (gemm/tma.py: q and
k read as they lie, k being the K-major operand of q @ k^T; v copied once K-major, 2 GiB at KernelBench's 97 beside
~20 ms of GEMMs) as 3xTF32 (~1e-6 relative) or TF32, the tensor-core path that reached cuBLAS's exact fp32 speed on
level-1 matmuls where the strided exact kernel ran at ~0.85 of it. The exact move ("ieee") keeps the strided exact
products there too: a score's error is multiplied by its size in the softmax, and 3xTF32's took a wide-head problem
past the strict policy's tolerance (evidence.py)."""

from __future__ import annotations

from dataclasses import replace

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.gemm import kernels as gemm
from kernelcraft.propose.builtin.families.gemm import tma
from kernelcraft.propose.builtin.families.gemm.tiles import TMA_TILES, MatmulTiles
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.plan import Op

# The bound (bytes of one padded row) past which heads take this path. The fused kernel holds a BLOCK_M x E_PAD
# query tile and a BLOCK_M x EV_PAD fp32 accumulator in registers; wide rows run it with 64-query tiles, 4 warps
# at the least, so a 512-byte query row is 64 registers a thread and a 1024-byte accumulator row 128: with the
# score tile, its exponentials and the addresses, about the 255 a thread has. fp32 heads up to 128 and 16-bit
# ones up to 256 (Ev up to 256 either way) stay fused, where they ran well; wider ones spill.
Q_ROW_BYTES, ACC_ROW_BYTES = 512, 1024
WIDE = f"e_pad * q.element_size() > {Q_ROW_BYTES} or ev_pad * 4 > {ACC_ROW_BYTES}"

BLOCK_N, BLOCK_K, GROUP_M = 128, 32, 8  # the GEMMs' tiles: BLOCK_M and warps are the move's

# Exact products on the fp64 tensor cores (a move's wide_fp64): on a Hopper GPU (compute capability 9) fp32 inputs
# widened exactly to fp64, each product exact and the sums in fp64 (the GEMM family's "fp64" PREC: Hopper's DMMA,
# m16n8k16), more accurate than fp32 FMAs. Hopper's fp64 tensor cores run at its fp32 FMA rate; newer GPUs' at far
# less, so only capability 9 takes them
FP64_IDEA = ("wide heads' exact products on the fp64 tensor cores of a Hopper GPU (fp32 operands widened exactly, "
             "products and sums in fp64; 64 x 128 tiles, 4 warps)")
# their tiles (BLOCK_M, warps), whatever the move's: faster than the first move's 128 rows on 8 warps (evidence.py)
FP64_TILES = (64, 4)
FP64_GPU = '''
def kc_fp64_gpu(t):  # on a Hopper GPU: fp64 tensor cores at its fp32 FMA rate there
    return t.is_cuda and torch.cuda.get_device_capability(t.device)[0] == 9
'''
MAX_BATCH = 65535  # the GEMM kernel takes the batch in its grid's second dim, which CUDA bounds at 65535

_SOFTMAX = '''
# program -> one row r of scores (batch·head r // L, query r % L), S wide, contiguous: p = softmax(s * scale) over
# keys [0, hi), zeros past hi (causal: hi = query + 1, torch's top-left alignment). Base 2: qk_scale is the scale's
# size times log2 e, NEG its sign. The max is of the raw scores and the scale applied to each score's difference
# from it, exp2((s - m) * qk_scale), so the row's largest score weighs exactly 1 (a score scaled first meets the
# max in an FMA the compiler makes of exp2(s * c - m), unrounded: at scores of 1e5 that put up to 0.5% on each
# weight, on average 600x torch's own error at level 1's 97 with inputs 30x to 1000x on an H200)
pid = tl.program_id(0)
row = pid.to(tl.int64)  # offsets row * S past 2^31
hi = S
if CAUSAL:
    hi = tl.minimum(S, pid % L + 1)
cols = tl.arange(0, BLOCK_S)
m = tl.full([], -float("inf"), tl.float32)  # the first tile holds key 0, so m is finite after it
l = tl.full([], 0.0, tl.float32)
for n0 in range(0, hi, BLOCK_S):  # online max and sum, one tile at a time
    c = n0 + cols
    x = tl.load(s_ptr + row * S + c, mask=c < hi, other=0.0)
    if NEG:
        x = -x
    m_new = tl.maximum(m, tl.max(tl.where(c < hi, x, -float("inf")), 0))
    # the masked and the first tile's rescale by where: a zero scale would make -inf * 0 a NaN
    alpha = tl.where(m == -float("inf"), 0.0, tl.exp2((m - m_new) * qk_scale))
    l = l * alpha + tl.sum(tl.where(c < hi, tl.exp2((x - m_new) * qk_scale), 0.0), 0)
    m = m_new
inv = tl.where(l > 0.0, 1.0 / l, 0.0)  # no key at all (S == 0): nothing to weigh, the row is zeros
for n0 in range(0, S, BLOCK_S):
    c = n0 + cols
    x = tl.load(s_ptr + row * S + c, mask=c < hi, other=0.0)
    if NEG:
        x = -x
    p = tl.where(c < hi, tl.exp2((x - m) * qk_scale) * inv, 0.0)
    tl.store(p_ptr + row * S + c, p.to(p_ptr.dtype.element_ty), mask=c < S)
'''

# the GEMMs' strides: the batch, then a's rows and columns, b's rows (the K dim) and columns, c's rows and columns
_SCORES_ARGS = ["qb", "kb", "sb", "L", "S", "E", "qb.stride(0)", "qb.stride(1)", "qb.stride(2)", "kb.stride(0)",
                "kb.stride(2)", "kb.stride(1)", "sb.stride(0)", "sb.stride(1)", "sb.stride(2)"]  # k read as k^T
_PV_ARGS = ["pb", "vb", "ob", "L", "EV", "keys", "pb.stride(0)", "pb.stride(1)", "pb.stride(2)", "vb.stride(0)",
            "vb.stride(1)", "vb.stride(2)", "ob.stride(0)", "ob.stride(1)", "ob.stride(2)"]


def softmax_kernel(names: Names) -> TritonKernel:
    return TritonKernel(names("kc_attention_softmax"), ("s_ptr", "p_ptr", "L", "S", "qk_scale"),
                        ("BLOCK_S", "CAUSAL", "NEG"),
                        _SOFTMAX, comment="wide heads: one row of scores soft-maxed (the causal mask applied here)")


def gemm_kernels(causal: bool, names: Names) -> tuple[TritonKernel, TritonKernel]:
    """(the scores' kernel, p @ v's): the GEMM family's tiled kernel, the scores' with torch.tril's mask (diagonal
    0: query i keeps keys j <= i) when causal, named for this op (a plain matmul's kernel in the same file keeps its
    own name)."""
    plain = gemm.tiled(Op("matmul", {}), names, "kc_attention_gemm")
    if not causal:
        return plain, plain
    tril = Op("matmul", {"mask": {"op": "tril", "diagonal": 0, "diagonal_attr": None}})
    return gemm.tiled(tril, names, "kc_attention_scores_gemm"), plain


# the TMA GEMMs' move on a Hopper GPU (fp32 inputs): the matmul family's first 3xTF32 TMA tiles
TMA_MOVE = MatmulTiles(*TMA_TILES[0][:3], 8, *TMA_TILES[0][3:], "tf32x3", tma=True)


def _tma_gemm(op: Op, names: Names) -> tuple[list, str]:
    """(the module-level blocks, the helper's name) of one product through the GEMM family's TMA helper, its names
    suffixed so that the scores' and p @ v's never clash."""
    tiles = {"BLOCK_M": TMA_MOVE.BLOCK_M, "BLOCK_N": TMA_MOVE.BLOCK_N, "BLOCK_K": TMA_MOVE.BLOCK_K,
             "GROUP_M": TMA_MOVE.GROUP_M}
    blocks, _ = tma.matmul(op, TMA_MOVE, names, tiles,
                           {"num_warps": TMA_MOVE.num_warps, "num_stages": TMA_MOVE.num_stages})
    return blocks, names("kc_matmul_tma")


def tma_lines(causal: bool, names: Names) -> tuple[list, list[str]]:
    """(the blocks, the forward's lines) of the wide path on a Hopper GPU for fp32 inputs: the scores by the TMA
    kernel (q (batch, L, E) rows, k (batch, S, E) the K-major operand as it lies; causal, with torch.tril's mask so
    that tiles above the diagonal run no products), the softmax in place, p @ v by the TMA kernel (v copied once
    K-major); they end by returning o."""
    tril = {"mask": {"op": "tril", "diagonal": 0, "diagonal_attr": None}} if causal else {}
    qk_blocks, qk = _tma_gemm(Op("matmul", {"trans_b": True, **tril}), replace(names, suffix=names.suffix + "_qk"))
    pv_blocks, pv = _tma_gemm(Op("matmul", {}), replace(names, suffix=names.suffix + "_pv"))
    pv_blocks = [b for b in pv_blocks if not (isinstance(b, str) and b in qk_blocks)]  # the shared host helpers
    soft = softmax_kernel(names)
    lines = [
        "scores = torch.empty((batch, L, S), dtype=torch.float32, device=q.device)",
        f"{qk}(q3, k3, scores, prec{', 0' if causal else ''})",  # 3xTF32, or TF32 (the relaxed move)
        soft.launch("(batch * L,)", ["scores", "scores", "L", "S", "qk_scale"],
                    {"BLOCK_S": "min(1024, triton.next_power_of_2(S))", "CAUSAL": causal, "NEG": "neg"},
                    num_warps=4),
        f"keys = {'min(S, L)  # causal: no query sees a key past L - 1' if causal else 'S'}",
        f"{pv}(scores[..., :keys], v3[:, :keys], o3, prec)",
        "return o",
    ]
    return qk_blocks + pv_blocks, lines


def body(causal: bool, p, names: Names) -> tuple[tuple[TritonKernel, ...], str]:
    """(the kernels, the forward's lines for wide heads): q3, k3, v3, o3 (batch, rows, cols), L, S, E, EV, batch,
    prec, qk_scale (the scale's size times log2 e) and neg (its sign) are set before them; they end by returning o."""
    scores, pv = gemm_kernels(causal, names)
    soft = softmax_kernel(names)
    def products(bm: int, warps: int, prec: str) -> tuple[str, str]:
        tiles = {"BLOCK_M": bm, "BLOCK_N": BLOCK_N, "BLOCK_K": BLOCK_K, "GROUP_M": GROUP_M, "PREC": prec}
        grid = "(triton.cdiv(L, {}) * triton.cdiv({{}}, {}), nb)".format(bm, BLOCK_N)
        return (scores.launch(grid.format("S"), _SCORES_ARGS + (["0"] if causal else []), tiles, num_warps=warps,
                              num_stages=3),
                pv.launch(grid.format("EV"), _PV_ARGS, tiles, num_warps=warps, num_stages=3))

    qk, pv_run = products(int(p.BLOCK_M), int(p.num_warps), "prec")
    if p.wide_fp64:  # the fp64 products on their own tiles, where kc_fp64_gpu says so
        qk64, pv64 = products(*FP64_TILES, '"fp64"')
        qk = f"if fp64:\n    {qk64}\nelse:\n    {qk}"
        pv_run = f"if fp64:\n    {pv64}\nelse:\n    {pv_run}"
    launches = [qk, soft.launch("(nb * L,)", ["sb", "pb", "L", "S", "qk_scale"],
                                {"BLOCK_S": "block_s", "CAUSAL": causal, "NEG": "neg"}, num_warps=4), pv_run]
    keys = "min(S, L)  # causal: no query sees a key past L - 1" if causal else "S"
    fast, fast_lines = tma_lines(causal, names)
    lines = [
        "if q.dtype == torch.float32 and prec != \"ieee\" and S > 0 and kc_tma_gpu(q3):  # Hopper: GEMMs through TMA",
        *indent("\n".join(fast_lines), 4).split("\n"),
        "# the scores in memory (batch·heads·L·S fp32), the softmax in place over them for fp32 inputs",
        "scores = torch.empty((batch, L, S), dtype=torch.float32, device=q.device)",
        "probs = scores if q.dtype == torch.float32 else torch.empty_like(scores, dtype=q.dtype)",
        "block_s = min(1024, triton.next_power_of_2(max(S, 1)))",
        *(["fp64 = prec == \"ieee\" and q.dtype == torch.float32 and kc_fp64_gpu(q)  # exact products: fp64 "
            "tensor cores"] if p.wide_fp64 else []),
        f"keys = {keys}",
        f"for b0 in range(0, batch, {MAX_BATCH}):  # the GEMMs' grid holds the batch in its second dim",
        f"    nb = min({MAX_BATCH}, batch - b0)",
        "    qb, kb, vb, sb, pb, ob = (t[b0:b0 + nb] for t in (q3, k3, v3, scores, probs, o3))",
        "    if S > 0:  # no keys: p @ v below runs no K step and stores zeros",
        *indent("\n".join(launches[:2]), 8).split("\n"),
        *indent(launches[2], 4).split("\n"),
        "return o",
    ]
    kernels = (scores, soft) if scores is pv else (scores, pv, soft)
    return (*kernels, *fast, *((FP64_GPU,) if p.wide_fp64 else ())), "\n".join(lines)
