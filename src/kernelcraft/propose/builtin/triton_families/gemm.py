"""GEMM family (matmul, bmm, transposed operands; linear layers with a bias-and-pointwise epilogue): a program
per BLOCK_M x BLOCK_N output tile (GROUP_M swizzle) and batch, a masked K loop of tl.dot into an fp32
accumulator; operands read through their strides (a transpose is a stride swap). input_precision "ieee" (exact
fp32) or "tf32" (fp32 inputs only; such moves carry params["precision"] == "tf32", which the registry's
needs_relaxed names). TMA moves (params["tma"]) add a persistent kernel whose operand tiles come through tensor
descriptors (TMA on Hopper): used at run time for 2-D row-major operands on a GPU, the strided kernel otherwise.
Under the GEMV move, products with at most GEMV_COLUMNS columns (matrix-vector) take a GEMV kernel. A matmul's
pointwise steps after it (scaling, activations) are applied to the fp32 tile before its store, as a linear's.
A matmul of 16-bit inputs (op.detail["dtype"]) gets 16-bit moves instead: the tensor cores with fp32
accumulation, TMA tiles of B read as it lies (params["b_kmajor"] False), no TF32 question to ask."""

from __future__ import annotations

from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import attr, indent
from kernelcraft.propose.builtin.steps import epilogue_lines, step_lines


def _tile(m: int, n: int, k: int, w: int, s: int, prec: str, tma: bool = False, **more) -> dict:
    return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": s,
            "precision": prec, "tma": tma, "gemv": False, **more}


def _gemv_move(tile: dict, wider: str) -> tuple:
    """The matrix-vector move; products wider than GEMV_COLUMNS take `tile`, which `wider` names."""
    return (f"Matrix-vector kernel for products with at most {GEMV_COLUMNS} columns of C: the rows of A walked once "
            "in 512-wide tiles against each column of B, products summed in fp32 lanes, so A streams at full "
            f"bandwidth instead of filling 128-wide output tiles with one live column; wider products take {wider}",
            "memory", {**tile, "gemv": True})


def _matmul_moves(op: Op) -> list[tuple]:
    if op.kind == "matmul" and op.detail.get("dtype") in HALF:
        return _half_moves(HALF[op.detail["dtype"]])
    exact = ("Tiled GEMM, {m}x{n} output tiles ({k}-wide K steps, {w} warps, {s} stages), GROUP_M=8 swizzle for L2 "
             "reuse, strided loads (transposes cost no copy), exact fp32 products (ieee) accumulated in fp32")
    tf32 = ("TF32 tensor cores for fp32 inputs: {m}x{n} tiles ({k}-wide K steps, {w} warps, {s} stages), fp32 "
            "accumulation; inputs rounded to TF32 (10-bit mantissa), so it needs a tolerance policy that admits "
            "TF32; fp16/bf16 inputs are unaffected")

    p = _tile
    out = []
    for m, n, k, w, s, cat in ((128, 128, 32, 8, 3, "parallelism"), (64, 128, 32, 4, 4, "memory")):
        out.append((exact.format(m=m, n=n, k=k, w=w, s=s), cat, p(m, n, k, w, s, "ieee")))
    kmajor = "B transposed once so both operands are K-major" if op.kind == "matmul" else \
        "the weight (N, K) is the K-major operand as it is"
    tma = ("TF32 tensor cores fed by TMA: " + kmajor + " (the layout Hopper's "
           "TF32 tensor-core instructions read), a persistent grid (one program per SM) walks {m}x{n} output tiles, "
           "operand tiles ({k}-wide K steps, {s} stages) copied by the tensor memory accelerator with zero-filled "
           "edges, no masks in the K loop; needs a tolerance policy that admits TF32 (strided or batched "
           "operands take the plain kernel)")
    split = ("3xTF32 at fp32 accuracy, fed by TMA: each fp32 operand split into a TF32 part and a TF32 remainder, "
             "three tensor-core products per step (error ~1e-6 relative); " + kmajor + ", a persistent grid walks {m}x{n} output tiles, {k}-wide K steps in {s} stages")
    out[:0] = [(split.format(m=m, n=n, k=k, s=s), "compute", {**p(m, n, k, w, s, "tf32x3"), "tma": True})
               for m, n, k, w, s in ((128, 256, 32, 8, 3), (256, 128, 32, 8, 3))]
    for m, n, k, w, s in ((128, 256, 32, 8, 3), (256, 128, 32, 8, 3)):  # tiles: the H100 probe, 2026-11-22
        out.append((tma.format(m=m, n=n, k=k, s=s), "async", {**p(m, n, k, w, s, "tf32"), "tma": True}))
    out.append((tf32.format(m=128, n=128, k=32, w=8, s=3), "precision", p(128, 128, 32, 8, 3, "tf32")))
    if op.kind == "matmul":
        out.insert(0, _gemv_move(p(128, 128, 32, 8, 3, "ieee"), "the exact 128x128 tiled kernel"))
    return out


HALF = {"float16": "fp16", "bfloat16": "bf16"}
# 16-bit tiles (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): TMA-fed persistent ones, then strided ones; the best
# of benchmarks/matmul_sweep.py --problem level1/matmul_fp16 on the H100 (matmul-fp16-sweep-h100-2026-11-22.json)
HALF_TMA = ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 4))
HALF_PLAIN = ((128, 256, 64, 8, 3),)


def _half_moves(dt: str) -> list[tuple]:
    """A 16-bit matmul's moves: the tensor cores with fp32 accumulation are exact enough for any policy (the
    products of two 16-bit numbers are exact in fp32), so precision is not the question; feeding them is."""
    tma = (dt + " tensor cores fed by TMA, fp32 accumulation: a persistent grid (one program per SM) walks {m}x{n} "
           "output tiles, operand tiles ({k}-wide K steps, {s} stages, {w} warps) copied by the tensor memory "
           "accelerator as they lie (B read (K, N) as it is: the 16-bit instructions take either layout, so no "
           "transposed copy), zero-filled edges, no masks in the K loop (strided or batched operands take the "
           "plain kernel)")
    plain = (dt + " tensor cores, {m}x{n} output tiles ({k}-wide K steps, {w} warps, {s} stages), GROUP_M=8 "
             "swizzle for L2 reuse, strided masked loads (transposes and batches cost no copy), fp32 accumulation")

    def p(m, n, k, w, s, tma):
        return _tile(m, n, k, w, s, "ieee", tma, b_kmajor=False)

    out = [(tma.format(m=m, n=n, k=k, w=w, s=s), "async", p(m, n, k, w, s, True)) for m, n, k, w, s in HALF_TMA]
    out += [(plain.format(m=m, n=n, k=k, w=w, s=s), "parallelism", p(m, n, k, w, s, False))
            for m, n, k, w, s in HALF_PLAIN]
    out.append(_gemv_move(p(128, 128, 64, 8, 3, False), f"the {dt} 128x128 tiled kernel"))
    return out


_GEMM = '''
@triton.jit
def kc_matmul_kernel(${scalars}a_ptr, b_ptr, c_ptr, M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     PREC: tl.constexpr):
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
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    c_ptrs = c_ptr + bid * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


# The GEMV move's kernel for products with at most GEMV_COLUMNS columns of C (matrix-vector): a tile kernel would
# leave all but a few columns of each output tile empty.
GEMV_COLUMNS = 4
_GEMV = '''
@triton.jit
def kc_gemv_kernel(${scalars}a_ptr, b_ptr, c_ptr, M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,
                   BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
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
    tl.store(c_ptr + bid * s_cb + rm * s_cm + n * s_cn, tl.sum(acc, 1).to(c_ptr.dtype.element_ty), mask=rm < M)
'''


_GEMM_TMA = '''
@triton.jit
def kc_matmul_tma_kernel(${scalars}a_desc, b_desc, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, PREC: tl.constexpr, PROGRAMS: tl.constexpr,
                         B_KMAJOR: tl.constexpr = True):
    # persistent: program p takes output tiles p, p + PROGRAMS, ... (GROUP_M swizzle). TMA brings A tiles and
    # B tiles, zero-filled past the edges: of B transposed (N, K) when B_KMAJOR (K-major, the layout Hopper's
    # TF32 tensor-core instructions read), else of B (K, N) as it lies (16-bit instructions read either); C is
    # stored through plain masked pointers (no shared-memory staging)
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
            if B_KMAJOR:
                acc = tl.dot(a, b_desc.load([pid_n * BLOCK_N, k0]).T, acc, input_precision=PREC)
            else:
                acc = tl.dot(a, b_desc.load([k0, pid_n * BLOCK_N]), acc, input_precision=PREC)
        rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
                 mask=(rm < M)[:, None] & (rn < N)[None, :])
'''


_TMA_OK = '''
def kc_tma_ok(*ts):  # Hopper or newer; 2-D, unit last stride, 16-byte aligned rows and base
    return all(t.is_cuda and torch.cuda.get_device_capability(t.device)[0] >= 9 and t.dim() == 2
               and t.stride(-1) == 1 and t.stride(0) * t.element_size() % 16 == 0 and t.data_ptr() % 16 == 0
               for t in ts)

'''


def _with_epilogue(kernel: str, store: str, steps: list) -> str:
    """A matmul kernel text made a linear's: renamed, a bias pointer and HAS_BIAS added, and bias plus the
    pointwise steps applied to the fp32 tile before `store` (the line that writes it). The steps' operands (1-D
    parameters along the output's columns) come as (o<k>_ptr, o<k>_s) after the bias pointer."""
    load = "tl.load(o{k}_ptr + rn * o{k}_s, mask=rn < N, other=0.0).to(tl.float32)[None, :]"
    lines = "\n".join(epilogue_lines(steps, lambda k: load.format(k=k)))
    operands = "".join(f"o{k}_ptr, o{k}_s, " for k in range(len(operand_refs(steps))))
    pad = store[:len(store) - len(store.lstrip())]
    epilogue = (f"{pad}x = acc\n{pad}if HAS_BIAS:\n{pad}    x += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)"
                f".to(tl.float32)[None, :]\n" + (indent(lines, len(pad)) + "\n" if lines else "") + f"{pad}acc = x\n")
    kernel = kernel.replace("_matmul_", "_linear_").replace("c_ptr, M, N, K,", f"c_ptr, bias_ptr, {operands}M, N, K,",
                                                            1)
    kernel = kernel.replace("PREC: tl.constexpr", "PREC: tl.constexpr, HAS_BIAS: tl.constexpr", 1)
    assert store in kernel
    return kernel.replace(store, epilogue + store, 1)


_STORE = "    c_ptrs = c_ptr + bid * s_cb"


def _with_steps(kernel: str, steps: list) -> str:
    """A matmul kernel text with the pointwise `steps` applied to its fp32 result before the store."""
    lines = step_lines(steps)
    if not lines:
        return kernel
    if "kc_gemv_kernel" in kernel:
        store = "    tl.store(c_ptr + bid * s_cb + rm * s_cm"
        kernel = kernel.replace("tl.sum(acc, 1).to(c_ptr.dtype.element_ty)", "x.to(c_ptr.dtype.element_ty)", 1)
        return kernel.replace(store, indent("\n".join(["x = tl.sum(acc, 1)", *lines]), 4) + "\n" + store, 1)
    store = _STORE if _STORE in kernel else _STORE_TMA
    pad = store[:len(store) - len(store.lstrip())]
    return kernel.replace(store, indent("\n".join(["x = acc", *lines, "acc = x"]), len(pad)) + "\n" + store, 1)
_STORE_TMA = "        tl.store(c_ptr + rm[:, None] * N"


def _render_linear(op: Op, p: dict) -> tuple[list[str], str]:
    """x (..., K) @ weight.T (weight (N, K): already the K-major B the tensor cores want) + bias, epilogue."""
    d = op.detail
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = str(p.get("precision", "ieee"))
    s = Scalars.of(op)  # the numbers the epilogue reads from the module: the kernels' and helper's first parameters
    kernel = s.fill(_with_epilogue(_GEMM, _STORE, d.get("steps", [])))
    refs = operand_refs(d.get("steps", []))
    epi = f"[a for o in [{', '.join(attr(r[1]) for r in refs)}] for a in kc_column_args(o, N)]" if refs else "[]"
    flags = f"PREC=prec, HAS_BIAS=bias is not None, num_warps={int(p['num_warps'])}, num_stages={int(p['num_stages'])}"
    body = f'''
w, bias = {attr(d["weight"])}, {attr(d["bias"]) if d.get("bias") else "None"}
K, N = x.shape[-1], w.shape[0]
a = x.reshape(-1, K)
M = a.shape[0]
c = torch.empty((*x.shape[:-1], N), dtype=x.dtype, device=x.device)
if c.numel() == 0:
    return c
c2 = c.reshape(M, N)
bias_arg = x if bias is None else bias
epi_args = {epi}  # the epilogue's parameter operands, each with its stride along the columns
prec = "{prec}" if x.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
grid = (triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}), 1)
kc_linear_kernel[grid]({s.params}a, w, c2, bias_arg, *epi_args, M, N, K, 0, a.stride(0), a.stride(1), 0, w.stride(1),
                       w.stride(0), 0, c2.stride(0), c2.stride(1), BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={group}, {flags})
return c'''
    helpers = [_COLUMN_ARGS] if refs else []
    if not p.get("tma"):
        return [*helpers, kernel], body
    tma = _TMA_OK + f'''
def kc_linear_tma({s.params}a, w, bias, c, prec, has_bias, epi_args):
    from triton.tools.tensor_descriptor import TensorDescriptor

    (M, K), N = a.shape, w.shape[0]
    programs = min(triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}),
                   torch.cuda.get_device_properties(a.device).multi_processor_count)
    kc_linear_tma_kernel[(programs,)]({s.params}TensorDescriptor.from_tensor(a, [{bm}, {bk}]),
                                      TensorDescriptor.from_tensor(w, [{bn}, {bk}]), c, bias, *epi_args, M, N, K,
                                      BLOCK_M={bm},
                                      BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={group}, PREC=prec, HAS_BIAS=has_bias,
                                      PROGRAMS=programs, num_warps={int(p["num_warps"])},
                                      num_stages={int(p["num_stages"])})
'''
    body = body.replace("grid = (", f"""if K > 0 and kc_tma_ok(a, w, c2):  # w (N, K) row-major is K-major already: no copy
    kc_linear_tma({s.params}a, w, bias_arg, c2, prec, bias is not None, epi_args)
    return c
grid = (""", 1)
    return [*helpers, kernel, s.fill(_with_epilogue(_GEMM_TMA, _STORE_TMA, d.get("steps", []))), tma], body


_COLUMN_ARGS = '''
def kc_column_args(o, n):
    """A linear epilogue's 1-D parameter operand and its stride along the output's n columns (0: one value)."""
    if o.dim() != 1 or o.shape[0] not in (1, n):
        raise ValueError(f"an operand of shape {tuple(o.shape)} does not broadcast along {n} columns")
    return [o, 0 if o.shape[0] == 1 else o.stride(0)]
'''


def _render_matmul(op: Op, p: dict) -> tuple[list[str], str]:
    ta, tb = bool(op.detail.get("trans_a")), bool(op.detail.get("trans_b"))
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = str(p.get("precision", "ieee"))
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernels' and helper's first parameters
    if prec not in ("ieee", "tf32", "tf32x3"):
        raise ValueError(f"unknown matmul precision {prec!r}")
    # op(A)[m, k] is A[k, m] when transposed: swap the last two dims' sizes and strides, no copy
    am, ak = (-1, -2) if ta else (-2, -1)
    bk_, bn_ = (-1, -2) if tb else (-2, -1)
    gemv = f'''if N <= {GEMV_COLUMNS}:  # matrix-vector: each column of C from one pass over A
    kc_gemv_kernel[(triton.cdiv(M, 8), N, batch)]({s.params}a, b, c, M, N, K, s_ab, s_a[{am}], s_a[{ak}], s_bb, s_b[{bk_}],
                                                  s_b[{bn_}], s_cb, s_c[-2], s_c[-1], BLOCK_M=8, BLOCK_K=512,
                                                  num_warps=4)
    return c
''' if p.get("gemv") else ""
    body = f'''
M, K, N = a.shape[{am}], a.shape[{ak}], b.shape[{bn_}]
batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
c = torch.empty((batch, M, N) if max(a.dim(), b.dim()) == 3 else (M, N), dtype=a.dtype, device=a.device)
if c.numel() == 0:
    return c  # K == 0 needs no case: the K loop runs no step and the zero accumulator is stored
s_a, s_b, s_c = a.stride(), b.stride(), c.stride()
s_ab = s_a[0] if a.dim() == 3 and a.shape[0] > 1 else 0  # a 2-D operand is shared by every batch
s_bb = s_b[0] if b.dim() == 3 and b.shape[0] > 1 else 0
s_cb = s_c[0] if c.dim() == 3 else 0
{gemv}prec = "{prec}" if a.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
grid = (triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}), batch)
kc_matmul_kernel[grid]({s.params}a, b, c, M, N, K, s_ab, s_a[{am}], s_a[{ak}], s_bb, s_b[{bk_}], s_b[{bn_}], s_cb, s_c[-2],
                       s_c[-1], BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={group}, PREC=prec,
                       num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})
return c'''
    steps = op.detail.get("steps") or []  # pointwise ops after the product, on the fp32 tile before its store
    gemm, gemv_kernel, gemm_tma = (s.fill(_with_steps(k, steps)) for k in (_GEMM, _GEMV, _GEMM_TMA))
    if not p.get("tma") or ta or tb:  # TMA reads A and B as the row-major matrices they are, untransposed
        return [gemm] + ([gemv_kernel] if gemv else []), body
    # 2-D row-major operands on a GPU take TMA (unit last stride, 16-byte aligned rows); anything else the
    # strided kernel above.
    kmajor = bool(p.get("b_kmajor", True))
    b_desc = f"""    bt = b.t().contiguous()  # (N, K): K-major tiles for the tensor cores; a copy of B, small beside the GEMM
    if not kc_tma_ok(bt):
        return False
    b_desc = TensorDescriptor.from_tensor(bt, [{bn}, {bk}])
""" if kmajor else f"""    b_desc = TensorDescriptor.from_tensor(b, [{bk}, {bn}])  # (K, N) tiles as B lies: no copy
"""
    tma = _TMA_OK + f'''
def kc_matmul_tma({s.params}a, b, c, prec):
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    N = b.shape[1]
{b_desc}    programs = min(triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}),
                   torch.cuda.get_device_properties(a.device).multi_processor_count)
    kc_matmul_tma_kernel[(programs,)]({s.params}TensorDescriptor.from_tensor(a, [{bm}, {bk}]), b_desc, c, M, N, K,
                                      BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={group}, PREC=prec,
                                      PROGRAMS=programs, B_KMAJOR={kmajor}, num_warps={int(p["num_warps"])},
                                      num_stages={int(p["num_stages"])})
    return True
'''
    body = body.replace("grid = (", f"""if c.dim() == 2 and K > 0 and kc_tma_ok(a, b, c) and kc_matmul_tma({s.params}a, b, c, prec):
    return c
grid = (""", 1)
    return [gemm] + ([gemv_kernel] if gemv else []) + [gemm_tma, tma], body


KINDS = {"matmul": (_matmul_moves, _render_matmul), "linear": (_matmul_moves, _render_linear)}
INPUTS = {"matmul": ("a", "b")}  # the forward body reads the first two inputs as a, b
