"""Elementwise chains with tensor operands (plan.py's TENSOR_STEPS: x + self.bias, x * y, a residual add), broadcast
by torch's rules on any shapes. The output is contiguous, of the broadcast shape; every tensor (x and each
operand) is read through its own strides over that shape, 0 along the dims where it is broadcast, so no operand is
expanded or copied. The shape's dims are coalesced first wherever every tensor allows (a per-channel (C, 1, 1)
operand against (N, C, H, W) leaves three dims: N, C, H*W; same-shaped contiguous tensors leave one, a flat
index), so each element decodes only the coordinates it needs. Tiles and grid as the pointwise family's moves."""

from __future__ import annotations

import inspect

from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.triton_families.common import indent
from kernelcraft.propose.builtin.triton_families.pointwise import epilogue_lines

MAX_DIMS = 6  # dims left after coalescing that the kernel decodes (more raises at run time)



def kc_bcast_layout(ts, max_dims):
    """The broadcast shape of tensors ts (torch's rules), and that shape's dims of size > 1 coalesced where every
    tensor allows, padded to max_dims with leading 1s: (shape, sizes, strides of each tensor over the sizes (0
    where it is broadcast), number of dims used, whether an element count or offset needs 64 bits)."""
    nd = max([t.dim() for t in ts])
    shape = []
    for d in range(nd):
        sizes = [t.shape[t.dim() - nd + d] for t in ts if t.dim() - nd + d >= 0]
        big = [s for s in sizes if s != 1]
        if any(s != big[0] for s in big):
            raise ValueError(f"shapes {[tuple(t.shape) for t in ts]} do not broadcast")
        shape = shape + [big[0] if big else 1]

    # each tensor's stride along each output dim; 0 where it is broadcast (or lacks the dim)
    full = [[0 if k < 0 or t.shape[k] == 1 else t.stride(k) for k in range(t.dim() - nd, t.dim())] for t in ts]
    sizes, strides = [], [[] for t in ts]
    for d in range(nd):
        if shape[d] == 1:
            continue
        if sizes and all(st[-1] == f[d] * shape[d] for st, f in zip(strides, full)):
            sizes[-1] = sizes[-1] * shape[d]  # d merges into the dim before it: one index walks both
            strides = [st[:-1] + [f[d]] for st, f in zip(strides, full)]
        else:
            sizes = sizes + [shape[d]]
            strides = [st + [f[d]] for st, f in zip(strides, full)]
    if not sizes:
        sizes, strides = [1], [[0] for t in ts]
    if len(sizes) > max_dims:
        raise ValueError(f"broadcast over {len(sizes)} dims that do not coalesce; the kernel decodes {max_dims}")
    far = 1  # the element count, then the largest offset into any tensor
    for s in sizes:
        far = far * s
    for st in strides:
        span = 0
        for s, d in zip(st, sizes):
            span = span + (d - 1) * s
        far = max(far, span)
    pad = max_dims - len(sizes)
    return shape, [1] * pad + sizes, [[0] * pad + st for st in strides], len(sizes), far >= 2**31


def _index(names: list[str]) -> list[str]:
    """Kernel lines giving each tensor's element offset (`<name>_off`) for the flat output offsets `offs`."""
    last = MAX_DIMS - 1
    lines = ["c = offs", "if NDIM > 1:", f"    c = offs % D{last}"]
    lines += [f"{t}_off = c * {t}_s{last}" for t in names]
    lines.append("rem = offs")
    for k in range(1, MAX_DIMS):  # dim last - k, used when NDIM > k
        d = last - k
        lines += [f"if NDIM > {k}:", f"    rem = rem // D{d + 1}", "    c = rem", f"    if NDIM > {k + 1}:",
                  f"        c = rem % D{d}"]
        lines += [f"    {t}_off += c * {t}_s{d}" for t in names]
    return lines


def render(op: Op, p: dict) -> tuple[list[str], str]:
    """The pointwise move `p` for an elementwise op with tensor operands: its body reads x and o0, o1, ... (the
    operands in plan.operand_refs order)."""
    steps = op.detail["steps"]
    refs = operand_refs(steps)
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    names = ["x"] + [f"o{k}" for k in range(len(refs))]
    hint = ', eviction_policy="evict_first"' if p.get("evict_first") else ""
    lines = epilogue_lines(steps, lambda k: f"tl.load(o{k}_ptr + o{k}_off, mask=mask{hint}).to(tl.float32)")
    strides = ", ".join(f"{t}_s{d}" for t in names for d in range(MAX_DIMS))
    sizes = ", ".join(f"D{d}" for d in range(MAX_DIMS))
    kernel = f'''
@triton.jit
def kc_bcast_kernel({s.params}{", ".join(t + "_ptr" for t in names)}, y_ptr, n, n_tiles, {sizes},
                    {strides}, NDIM: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr):
    # y (contiguous, the broadcast shape) at flat offsets offs; every tensor read at its own offset from the
    # output coordinates over the last NDIM (coalesced) dims D0..D{MAX_DIMS - 1}, stride 0 where it is broadcast.
    # Offsets are decoded in int32 unless some offset needs 64 bits (WIDE)
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        if not WIDE:
            offs = offs.to(tl.int32)
{indent(chr(10).join(_index(names)), 8)}
        x = tl.load(x_ptr + x_off, mask=mask{hint}).to(tl.float32)
{indent(chr(10).join(lines), 8)}
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask{hint})
'''
    programs = "n_tiles"
    if p.get("per_sm"):
        programs = (f"min(n_tiles, {int(p['per_sm'])} * (torch.cuda.get_device_properties(x.device)"
                    ".multi_processor_count if x.is_cuda else 4))")
    args = ", ".join(names)
    stride_args = ", ".join(f"*strides[{k}]" for k in range(len(names)))
    body = f'''
if any(t.dtype != x.dtype for t in [{args}]):
    raise ValueError("tensor operands of another dtype: torch's type promotion is not followed")
shape, sizes, strides, nd, wide = kc_bcast_layout([{args}], {MAX_DIMS})
y = torch.empty(shape, dtype=x.dtype, device=x.device)
n = y.numel()
if n == 0:
    return y
n_tiles = triton.cdiv(n, {int(p["BLOCK"])})
programs = {programs}
kc_bcast_kernel[(programs,)]({s.params}{args}, y, n, n_tiles, *sizes, {stride_args}, NDIM=nd, WIDE=wide,
                             BLOCK={int(p["BLOCK"])}, num_warps={int(p["num_warps"])})
return y'''
    return [inspect.getsource(kc_bcast_layout), kernel], body
