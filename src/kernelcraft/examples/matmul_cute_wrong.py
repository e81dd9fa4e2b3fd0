"""WRONG on purpose (the verifier must say `incorrect`): matmul_cute.py loading B's tile without the K step's
offset, so every step multiplies A's tile by B's first 8 rows.

Matrix product C = A @ B (level1/matmul, 4096 x 4096 fp32) in the CuTe DSL: a 128 x 128 tile of C a CTA.

256 threads as 16 x 16; each computes an 8 x 8 block of the tile, its rows and columns interleaved 16 apart so that
a warp's shared-memory reads are contiguous and its stores to C coalesced. Each K step of 8 stages a 128 x 8 tile of
A (transposed: sA[k, m]) and an 8 x 128 tile of B in shared memory, then every thread does 8 x 8 x 8 fp32 FMAs from
registers. Exact fp32 (no TF32), so it passes under every precision policy. Bounds are checked on every load and
store, so any M, N and K run; fp16 and bf16 inputs are accumulated in fp32 and written back in their dtype. One
compiled function a dtype; shapes are run-time arguments.
"""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import make_ptr

BM, BN, BK = 128, 128, 8
TM, TN = 8, 8  # a thread's block of C
THREADS = (BM // TM) * (BN // TN)  # 256
DTYPES = {torch.float32: cutlass.Float32, torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}


@cute.kernel
def matmul_kernel(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32,
                  k: cutlass.Int32):
    tid, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    tx = tid % (BN // TN)
    ty = tid // (BN // TN)
    row0 = by * BM
    col0 = bx * BN
    gA = cute.make_tensor(a, cute.make_layout((m, k), stride=(k, 1)))
    gB = cute.make_tensor(b, cute.make_layout((k, n), stride=(n, 1)))
    gC = cute.make_tensor(c, cute.make_layout((m, n), stride=(n, 1)))
    smem = cutlass.utils.SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BM), stride=(BM, 1)), 16)
    sB = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BN), stride=(BN, 1)), 16)
    acc = cute.make_rmem_tensor((TM, TN), cutlass.Float32)
    acc.fill(0.0)
    a_frag = cute.make_rmem_tensor(TM, cutlass.Float32)
    b_frag = cute.make_rmem_tensor(TN, cutlass.Float32)

    for k0 in range(0, k, BK):
        for j in cutlass.range_constexpr(BM * BK // THREADS):  # A's tile: 4 elements a thread, k fastest
            e = tid + j * THREADS
            r = e // BK
            kk = e % BK
            v = cutlass.Float32(0.0)
            if row0 + r < m and k0 + kk < k:
                v = gA[row0 + r, k0 + kk].to(cutlass.Float32)
            sA[kk, r] = v
        for j in cutlass.range_constexpr(BK * BN // THREADS):  # B's tile: 4 elements a thread, n fastest
            e = tid + j * THREADS
            kk = e // BN
            cc = e % BN
            v = cutlass.Float32(0.0)
            if k0 + kk < k and col0 + cc < n:
                v = gB[kk, col0 + cc].to(cutlass.Float32)
            sB[kk, cc] = v
        cute.arch.sync_threads()
        for kk in cutlass.range_constexpr(BK):
            for i in cutlass.range_constexpr(TM):
                a_frag[i] = sA[kk, ty + i * (BM // TM)]
            for j in cutlass.range_constexpr(TN):
                b_frag[j] = sB[kk, tx + j * (BN // TN)]
            for i in cutlass.range_constexpr(TM):
                for j in cutlass.range_constexpr(TN):
                    acc[i, j] = acc[i, j] + a_frag[i] * b_frag[j]
        cute.arch.sync_threads()  # the tiles are read by all before the next step overwrites them

    for i in cutlass.range_constexpr(TM):
        r = row0 + ty + i * (BM // TM)
        for j in cutlass.range_constexpr(TN):
            cc = col0 + tx + j * (BN // TN)
            if r < m and cc < n:
                gC[r, cc] = acc[i, j].to(gC.element_type)


@cute.jit
def matmul(a: cute.Pointer, b: cute.Pointer, c: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32,
           stream: cuda.CUstream):
    grid = ((n + BN - 1) // BN, (m + BM - 1) // BM, 1)
    matmul_kernel(a, b, c, m, n, k).launch(grid=grid, block=(THREADS, 1, 1), stream=stream)


def pointer(t: torch.Tensor, address: int | None = None):
    return make_ptr(DTYPES[t.dtype], t.data_ptr() if address is None else address, cute.AddressSpace.gmem,
                    assumed_align=t.element_size())


_COMPILED = {}


def compiled(x: torch.Tensor):
    """The compiled function for x's dtype (compiled once; shapes are run-time arguments)."""
    if x.dtype not in _COMPILED:
        one = cutlass.Int32(1)
        args = (pointer(x, 16), pointer(x, 16), pointer(x, 16), one, one, one, cuda.CUstream(0))
        _COMPILED[x.dtype] = cute.compile(matmul, *args)
    return _COMPILED[x.dtype]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        m, k = A.shape
        n = B.shape[1]
        C = torch.empty((m, n), dtype=A.dtype, device=A.device)
        if m and n:
            stream = cuda.CUstream(torch.cuda.current_stream(A.device).cuda_stream)
            compiled(A)(pointer(A), pointer(B), pointer(C), cutlass.Int32(m), cutlass.Int32(n), cutlass.Int32(k),
                        stream)
        return C
