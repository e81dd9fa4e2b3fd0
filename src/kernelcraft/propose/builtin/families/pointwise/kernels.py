"""The pointwise family's kernels: `flat` for steps over one tensor, `broadcast` for steps with tensor operands.

broadcast: operands broadcast by torch's rules on any shapes. The output is contiguous, of the broadcast shape;
every tensor (x and each operand) is read through its own strides over that shape, 0 along the dims where it is
broadcast, so no operand is expanded or copied. The shape's dims are coalesced first wherever every tensor allows (a
per-channel (C, 1, 1) operand against (N, C, H, W) leaves three dims: N, C, H*W; same-shaped contiguous tensors
leave one, a flat index), so each element decodes only the coordinates it needs.
"""

from __future__ import annotations

import inspect
from string import Template

import torch

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.steps import epilogue_lines, step_lines

MAX_DIMS = 6  # dims left after coalescing that the broadcast kernel decodes (more raises at run time)

_FLAT = Template('''
for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):  # int64: no offset overflow
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask$hint).to(tl.float32)
$steps
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask$hint)
''')


def _hint(p) -> str:
    return ', eviction_policy="evict_first"' if p.evict_first else ""


def _programs(p) -> str:
    if not p.per_sm:
        return "n_tiles"
    return (f"min(n_tiles, {int(p.per_sm)} * (torch.cuda.get_device_properties(x.device).multi_processor_count "
            "if x.is_cuda else 4))")


def flat(op: Op, p, names: Names) -> Rendered:
    body = _FLAT.substitute(steps=indent("\n".join(step_lines(op.detail["steps"])), 4), hint=_hint(p))
    kernel = TritonKernel(names("kc_pointwise_kernel"), ("x_ptr", "y_ptr", "n", "n_tiles"), ("BLOCK",), body,
                          Scalars.of(op))
    launch = kernel.launch("(programs,)", ["x", "y", "n", "n_tiles"], {"BLOCK": int(p.BLOCK)},
                           num_warps=int(p.num_warps))
    return Rendered((kernel,), f'''
y = torch.empty_like(x)
n = x.numel()
if n == 0:
    return y
n_tiles = triton.cdiv(n, {int(p.BLOCK)})
programs = {_programs(p)}
{launch}
return y''')


def kc_bcast_numbers(x, ts):
    """The operands ts with a number passed to forward (x * s, s a Python float) made a 0-dim tensor of x's dtype on
    x's device, as torch computes x (op) s for a floating x; filled on the device (no host-to-device copy, no sync)."""
    out = []
    for t in ts:
        if not isinstance(t, torch.Tensor):
            if not x.is_floating_point():
                raise ValueError("a number operand of a non-floating tensor: torch's type promotion is not followed")
            t = torch.full((), t, dtype=x.dtype, device=x.device)
        out.append(t)
    return out


def kc_promotes_to(x, t):
    """Whether x (op) t has x's dtype by torch's promotion though t's differs: x floating, t bool or integer (a lower
    category, e.g. x * mask). The kernel loads t as it is and converts it to fp32 like any operand."""
    return x.is_floating_point() and not (t.is_floating_point() or t.dtype.is_complex)


def operand_checks(numbers: str, checked: str) -> str:
    """Host lines of a kernel reading tensor operands beside x: the `numbers` (operand names) passed to forward as
    Python numbers made 0-dim tensors (kc_bcast_numbers), then every tensor of `checked` of x's dtype or one that
    promotes to it (kc_promotes_to), else a ValueError (the render includes both helpers' sources)."""
    return (f"{numbers}, = kc_bcast_numbers(x, [{numbers}])\n"
            f"if any(t.dtype != x.dtype and not kc_promotes_to(x, t) for t in [{checked}]):\n"
            "    raise ValueError(\"tensor operands of another dtype: torch's type promotion is not followed\")")


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


KC_BCAST_LAYOUTS = {}  # kc_bcast_packed's answers by the tensors' device, shapes and strides
_LAYOUTS_DEF = "KC_BCAST_LAYOUTS = {}  # kc_bcast_packed's answers by the tensors' device, shapes and strides"


def kc_bcast_packed(ts, max_dims):
    """kc_bcast_layout's answer for tensors ts, with its sizes and strides but the last dim's also packed in one tensor
    on their device (int32, int64 where an offset needs 64 bits), so a launch passes one pointer for them, and a mask
    of the tensors whose packed strides are all multiples of 16 (bit k: ts[k]), the hint Triton would have taken
    from them as arguments (what lets loads be vectorized): (shape, packed, dims used, wide, aligned, sizes,
    strides). Kept by the tensors' device, shapes and strides: one host-to-device copy per layout met (256 at most,
    then cleared)."""
    key = (ts[0].device, max_dims, *[(t.shape, t.stride()) for t in ts])
    hit = KC_BCAST_LAYOUTS.get(key)
    if hit is None:
        shape, sizes, strides, nd, wide = kc_bcast_layout(ts, max_dims)
        packed = torch.tensor(sizes[:-1] + [s for st in strides for s in st[:-1]],
                              dtype=torch.int64 if wide else torch.int32, device=ts[0].device)
        aligned = 0
        for k in range(len(strides)):
            if all(s % 16 == 0 for s in strides[k][:-1]):
                aligned = aligned | (1 << k)
        if len(KC_BCAST_LAYOUTS) >= 256:  # shapes that keep changing: start again
            KC_BCAST_LAYOUTS.clear()
        hit = KC_BCAST_LAYOUTS[key] = (shape, packed, nd, wide, aligned, sizes, strides)
    return hit


def _index(tensors: list[str]) -> list[str]:
    """Kernel lines giving each tensor's element offset (`<name>_off`) for the flat output offsets `offs`."""
    last = MAX_DIMS - 1
    lines = ["c = offs", "if NDIM > 1:", f"    c = offs % D{last}"]
    lines += [f"{t}_off = c * {t}_s{last}" for t in tensors]
    lines.append("rem = offs")
    for k in range(1, MAX_DIMS):  # dim last - k, used when NDIM > k
        d = last - k
        lines += [f"if NDIM > {k}:", f"    rem = rem // D{d + 1}", "    c = rem", f"    if NDIM > {k + 1}:",
                  f"        c = rem % D{d}"]
        lines += [f"    {t}_off += c * {t}_s{d}" for t in tensors]
    return lines


_BROADCAST = Template('''
# y (contiguous, the broadcast shape) at flat offsets offs; every tensor read at its own offset from the output
# coordinates over the last NDIM (coalesced) dims D0..D$last, stride 0 where it is broadcast. Offsets are decoded
# in int32 unless some offset needs 64 bits (WIDE)
for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
    offs = tile * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if not WIDE:
        offs = offs.to(tl.int32)
$index
    x = tl.load(x_ptr + x_off, mask=mask$hint).to(tl.float32)
$steps
    tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask$hint)
''')


def broadcast(op: Op, p, names: Names) -> Rendered:
    """Steps with tensor operands: the body reads x and o0, o1, ... (the operands in plan.operand_refs order)."""
    steps = op.detail["steps"]
    tensors = ["x"] + [f"o{k}" for k in range(len(operand_refs(steps)))]
    hint = _hint(p)
    lines = epilogue_lines(steps, lambda k: f"tl.load(o{k}_ptr + o{k}_off, mask=mask{hint}).to(tl.float32)")
    body = _BROADCAST.substitute(last=MAX_DIMS - 1, index=indent("\n".join(_index(tensors)), 4), hint=hint,
                                 steps=indent("\n".join(lines), 4))
    dims, last = range(MAX_DIMS), MAX_DIMS - 1
    # the sizes and strides: run-time arguments, (compiled_sizes) constexprs, one build per shape, or (packed_layout)
    # all but the last dim's loaded by each program from one small tensor the host keeps per layout (the last dim's
    # stay arguments, specialized by Triton where 1 or a multiple of 16; the loaded strides of a tensor are hinted
    # multiples of 16 where the host found them so, ALIGNED: what lets the loads be vectorized)
    layout = (*(f"D{d}" for d in dims), *(f"{t}_s{d}" for t in tensors for d in dims))
    values = (*(f"sizes[{d}]" for d in dims), *(f"strides[{k}][{d}]" for k in range(len(tensors)) for d in dims))
    compiled, packed = bool(p.compiled_sizes), bool(p.packed_layout)
    runtime, args = (() if compiled else layout), (() if compiled else values)
    constexprs = ("NDIM", "WIDE", "BLOCK", *(layout if compiled else ()))
    if packed:
        inner = {f"D{last}", *(f"{t}_s{last}" for t in tensors)}
        outer = [name for name in layout if name not in inner]
        loads = [f"{name} = tl.load(layout_ptr + {i})" for i, name in enumerate(outer)]
        for k, t in enumerate(tensors):  # a tensor's packed strides hinted where all are multiples of 16
            loads += [f"if ALIGNED & {1 << k}:"] + [f"    {t}_s{d} = tl.multiple_of({t}_s{d}, 16)" for d in dims[:-1]]
        body = ("# the sizes and strides but the last dim's, from the layout the host packed\n" + "\n".join(loads)
                + f"\n{body.lstrip()}")
        runtime = ("layout_ptr", *(name for name in layout if name not in outer))
        args = ("layout", *(v for name, v in zip(layout, values) if name not in outer))
        constexprs += ("ALIGNED",)
    kernel = TritonKernel(names("kc_bcast_kernel"), (*(f"{t}_ptr" for t in tensors), "y_ptr", "n", "n_tiles",
                                                     *runtime),
                          constexprs, body, Scalars.of(op))
    launch = kernel.launch("(programs,)", [*tensors, "y", "n", "n_tiles", *args],
                           {"NDIM": "nd", "WIDE": "wide", "BLOCK": int(p.BLOCK),
                            **(dict(zip(layout, values)) if compiled else {}),
                            **({"ALIGNED": "aligned"} if packed else {})}, num_warps=int(p.num_warps))
    listed = ", ".join(tensors)
    operands = ", ".join(tensors[1:])
    helpers = [kc_bcast_numbers, kc_promotes_to, kc_bcast_layout]
    host = f"shape, sizes, strides, nd, wide = kc_bcast_layout([{listed}], {MAX_DIMS})"
    sources = [inspect.getsource(f) for f in helpers]
    if packed:
        sources.append(f"{_LAYOUTS_DEF}\n\n\n{inspect.getsource(kc_bcast_packed)}")
        host = f"shape, layout, nd, wide, aligned, sizes, strides = kc_bcast_packed([{listed}], {MAX_DIMS})"
    return Rendered((*sources, kernel), f'''
{operand_checks(operands, listed)}
{host}
y = torch.empty(shape, dtype=x.dtype, device=x.device)
n = y.numel()
if n == 0:
    return y
n_tiles = triton.cdiv(n, {int(p.BLOCK)})
programs = {_programs(p)}
{launch}
return y''')
