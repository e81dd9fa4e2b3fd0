"""Probe: fp32 GEMMs at fp32-grade accuracy on the tensor cores, their TF32 splits made once by a pass before the
GEMM rather than at each K step inside it.

3xTF32 writes x = hi + lo, hi = x rounded to TF32 and lo = x - hi rounded to TF32, and sums three TF32 products,
lo_a hi_b + hi_a lo_b + hi_a hi_b. Triton's `input_precision="tf32x3"` splits every operand tile in registers at
every K step (and, on Hopper, must hand B back through shared memory); here a pass splits each operand once into
two fp32 tensors whose low 13 bits are zero, so the GEMM's K loop is three plain TF32 products fed by TMA. The two
small products go to an accumulator of their own, dropped where it is not finite (an infinite hi times a zero lo,
or a lo of the other sign: the large products carry the infinity, of the right sign).

Per shape: torch.matmul (eager, TF32 off: fp32 cuBLAS), the persistent TMA kernel at tf32x3 (the engineer's
current fp32 TMA kernel, the same loop), the split kernel at several tiles (with and without the NaN guard), the
split pass alone, plain TF32 (a ceiling, not fp32-accurate); max error relative to max |C| against an fp64 product.
Timings: triton.testing.do_bench (median, L2 flushed between calls).

    python benchmarks/probes/tf32_split_probe.py --out probe.json
"""

from __future__ import annotations

import argparse
import datetime
import json

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

SHAPES = {  # KernelBench level 1 (M, K, N) at published sizes
    "1_square": (4096, 4096, 4096),
    "2_standard": (2048, 8192, 4096),
    "7_small_k": (32768, 64, 32768),
    "9_tall_skinny": (32768, 32, 32768),
    "8_irregular": (8205, 2949, 5921),
    "13_square": (4096, 4096, 4096),
    "long_k": (1024, 65536, 1024),
}
TILES = ((128, 128, 32, 8, 3), (128, 128, 16, 8, 4), (128, 256, 16, 8, 3), (256, 128, 16, 8, 3),
         (128, 256, 32, 8, 2))


@triton.jit
def _tf32_round(x):
    """x rounded to TF32 (nearest, ties away from zero) as an fp32 whose low 13 bits are zero; inf and NaN kept,
    and a finite x that would round past the largest TF32 truncated instead."""
    bits = x.to(tl.uint32, bitcast=True)
    up = (bits + 0x1000) & 0xFFFFE000
    down = bits & 0xFFFFE000
    r = tl.where((up & 0x7F800000) == 0x7F800000, down, up)
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))


@triton.jit
def split_kernel(src, hi, lo, rows, cols, ld, s_r, s_c, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    tiles_c = tl.cdiv(cols, BLOCK_C)
    r = ((tl.program_id(0) // tiles_c) * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    j = ((tl.program_id(0) % tiles_c) * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    mask = (r[:, None] < rows) & (j[None, :] < cols)
    x = tl.load(src + r[:, None] * s_r + j[None, :] * s_c, mask=mask, other=0.0)
    h = _tf32_round(x)
    small = tl.where((h == x) | (h != h) | (tl.abs(h) == float("inf")), 0.0, x - h)
    out = r[:, None] * ld + j[None, :]
    tl.store(hi + out, h, mask=mask)
    tl.store(lo + out, _tf32_round(small), mask=mask)


@triton.jit
def split_gemm(ah, al, bh, bl, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, GUARD: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS):
        first_m = (tile // in_group) * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m
        pid_n = (tile % in_group) // group_m
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a_hi = ah.load([pid_m * BLOCK_M, k0])
            a_lo = al.load([pid_m * BLOCK_M, k0])
            b_hi = bh.load([pid_n * BLOCK_N, k0]).T
            b_lo = bl.load([pid_n * BLOCK_N, k0]).T
            if GUARD:
                small = tl.dot(a_lo, b_hi, small, input_precision="tf32")
                small = tl.dot(a_hi, b_lo, small, input_precision="tf32")
            else:
                acc = tl.dot(a_lo, b_hi, acc, input_precision="tf32")
                acc = tl.dot(a_hi, b_lo, acc, input_precision="tf32")
            acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
        if GUARD:
            acc += tl.where(tl.abs(small) < float("inf"), small, 0.0)
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def chunked_gemm(ah, al, bh, bl, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, CHUNK: tl.constexpr,
                 GUARD: tl.constexpr):
    """split_gemm with the tensor cores' accumulation cut every CHUNK K steps: the chunk's products summed by the
    tensor cores into a fresh accumulator, the chunk's sum added to the tile's by an fp32 add."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS):
        first_m = (tile // in_group) * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m
        pid_n = (tile % in_group) // group_m
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        part = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        steps = tl.cdiv(K, BLOCK_K)
        for i in range(0, steps):
            k0 = i * BLOCK_K
            a_hi = ah.load([pid_m * BLOCK_M, k0])
            a_lo = al.load([pid_m * BLOCK_M, k0])
            b_hi = bh.load([pid_n * BLOCK_N, k0]).T
            b_lo = bl.load([pid_n * BLOCK_N, k0]).T
            if GUARD:
                small = tl.dot(a_lo, b_hi, small, input_precision="tf32")
                small = tl.dot(a_hi, b_lo, small, input_precision="tf32")
            else:
                part = tl.dot(a_lo, b_hi, part, input_precision="tf32")
                part = tl.dot(a_hi, b_lo, part, input_precision="tf32")
            part = tl.dot(a_hi, b_hi, part, input_precision="tf32")
            if i % CHUNK == CHUNK - 1:
                if GUARD:
                    acc += part + tl.where(tl.abs(small) < float("inf"), small, 0.0)
                    small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                else:
                    acc += part
                part = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if GUARD:
            acc += part + tl.where(tl.abs(small) < float("inf"), small, 0.0)
        else:
            acc += part
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def plain_gemm(a_desc, b_desc, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, PROGRAMS: tl.constexpr, PREC: tl.constexpr):
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS):
        first_m = (tile // in_group) * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        pid_m = first_m + (tile % in_group) % group_m
        pid_n = (tile % in_group) // group_m
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k0])
            b = b_desc.load([pid_n * BLOCK_N, k0]).T
            acc = tl.dot(a, b, acc, input_precision=PREC)
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


def padded(rows, cols, device):
    """An fp32 (rows, cols) view of rows padded to 16 bytes (TMA's row alignment)."""
    ld = (cols + 3) // 4 * 4
    return torch.empty((rows, ld), device=device)[:, :cols]


def split(t):
    """(hi, lo) of a 2-D t, row-major rows padded to 16 bytes."""
    rows, cols = t.shape
    hi, lo = padded(rows, cols, t.device), padded(rows, cols, t.device)
    grid = (triton.cdiv(rows, 64) * triton.cdiv(cols, 64),)
    split_kernel[grid](t, hi, lo, rows, cols, hi.stride(0), t.stride(0), t.stride(1), BLOCK_R=64, BLOCK_C=64)
    return hi, lo


def programs(M, N, bm, bn):
    return min(triton.cdiv(M, bm) * triton.cdiv(N, bn), torch.cuda.get_device_properties(0).multi_processor_count)


def run_split(a, b, c, tile, guard, chunk=0):
    bm, bn, bk, w, s = tile
    (ah, al), (bh, bl) = split(a), split(b.mT)
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    d = [TensorDescriptor.from_tensor(t, [bm, bk]) for t in (ah, al)]
    d += [TensorDescriptor.from_tensor(t, [bn, bk]) for t in (bh, bl)]
    if chunk:
        chunked_gemm[(programs(M, N, bm, bn),)](*d, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                                PROGRAMS=programs(M, N, bm, bn), CHUNK=chunk, GUARD=guard,
                                                num_warps=w, num_stages=s)
        return
    split_gemm[(programs(M, N, bm, bn),)](*d, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                          PROGRAMS=programs(M, N, bm, bn), GUARD=guard, num_warps=w, num_stages=s)


def run_plain(a, b, c, tile, prec):
    bm, bn, bk, w, s = tile
    a_p, b_p = padded(*a.shape, a.device), padded(b.shape[1], b.shape[0], a.device)
    a_p.copy_(a)
    b_p.copy_(b.mT)
    M, K, N = a.shape[0], a.shape[1], b.shape[1]
    plain_gemm[(programs(M, N, bm, bn),)](TensorDescriptor.from_tensor(a_p, [bm, bk]),
                                          TensorDescriptor.from_tensor(b_p, [bn, bk]), c, M, N, K, BLOCK_M=bm,
                                          BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, PROGRAMS=programs(M, N, bm, bn),
                                          PREC=prec, num_warps=w, num_stages=s)


def error(c, ref):
    return float((c.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated shape names")
    ap.add_argument("--tiles", type=int, default=len(TILES), help="split kernel tiles tried (first N of TILES)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for name, (M, K, N) in SHAPES.items():
        if args.only and not any(s in name for s in args.only.split(",")):
            continue
        torch.manual_seed(0)
        a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
        ref = (a.double() @ b.double()) if M * N <= 2**26 else None  # fp64 product where it fits in time
        c = torch.empty(M, N, device="cuda")
        row = {"shape": name, "MKN": [M, K, N], "eager_ms": triton.testing.do_bench(lambda: torch.matmul(a, b))}
        if ref is not None:
            row["eager_err"] = error(torch.matmul(a, b), ref)
        row["split_pass_ms"] = triton.testing.do_bench(lambda: (split(a), split(b.mT)))
        variants = [("tf32x3_tma", t, lambda t=t: run_plain(a, b, c, t, "tf32x3")) for t in TILES[:2]]
        variants += [("tf32_tma", t, lambda t=t: run_plain(a, b, c, t, "tf32")) for t in TILES[:1]]
        variants += [(f"split{'_guard' if g else ''}", t, lambda t=t, g=g: run_split(a, b, c, t, g))
                     for t in TILES[:args.tiles] for g in (True, False)]
        variants += [(f"chunk{ch}{'_guard' if g else ''}", t, lambda t=t, g=g, ch=ch: run_split(a, b, c, t, g, ch))
                     for t in TILES[:1] + TILES[2:3] for ch in (1, 4, 16) for g in (True, False)]
        row["variants"] = []
        for kind, tile, fn in variants:
            v = {"kind": kind, "tile": list(tile)}
            try:
                fn()
                torch.cuda.synchronize()
                if ref is not None:
                    v["err"] = error(c, ref)
                v["ms"] = triton.testing.do_bench(fn)  # includes its split pass or operand copies
            except Exception as e:  # a tile that does not fit (shared memory, registers): recorded, not fatal
                v["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            row["variants"].append(v)
            print(name, kind, tile, {k: v[k] for k in v if k in ("ms", "err", "error")}, flush=True)
        print(name, "eager", row["eager_ms"], row.get("eager_err"), "split pass", row["split_pass_ms"], flush=True)
        rows.append(row)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "date": datetime.date.today().isoformat(), "method": "triton.testing.do_bench median, L2 flushed; kernel "
           "times include their split pass or operand copies", "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
