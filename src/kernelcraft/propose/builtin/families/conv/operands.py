"""Epilogue operands of the convolution families (conv, conv3d, conv_transpose, conv_transpose3d): the parameter
tensors of the epilogue's tensor steps (x + self.bias, x * self.scale), broadcast to the conv's output by torch's
rules and read by the kernel at the output's coordinates.

A kernel indexes its output by its own dims, (n, co, oh, ow) or (n, co, od, oh, ow); a 1-D conv runs as a one-row
2-D one and an unbatched input has no n, so the reference's output dims are some of the kernel's. The forward
(`operand_lines`) binds each operand o<k> with one stride per kernel dim, o<k>_s0, o<k>_s1, ... (kc_operand_args:
the operand's own stride where it varies, 0 where it is broadcast or the output has no such dim), and the kernel
reads it with `operand_load`: the sum of its index along each kernel dim times that stride. An implicit-GEMM tile
kernel also takes one constexpr per operand (`flags`), O<k>_COLS: the operand varies along the out-channels only (a
bias or scale of shape (C, 1, 1)), so the tile loads one BLOCK_N vector of it instead of a value per output
(`tile_load`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from kernelcraft.propose.builtin.codegen import attr
from kernelcraft.propose.builtin.plan import Op, operand_refs


def kc_operand_args(o, shape, dims, ndim):
    """An epilogue operand o and its strides broadcast to the output's `shape` (0 on broadcast dims), placed at the
    kernel's dims `dims` of its `ndim` (0 on the others). One that would broadcast the output itself is refused."""
    lead = len(shape) - o.dim()
    if lead < 0 or any(o.shape[k] != 1 and o.shape[k] != shape[lead + k] for k in range(o.dim())):
        raise ValueError(f"an operand of shape {tuple(o.shape)} broadcasts beyond the output {tuple(shape)}")
    st = [0] * len(shape)
    for k in range(o.dim()):
        st[lead + k] = 0 if o.shape[k] == 1 else o.stride(k)
    out = [0] * ndim
    for j in range(len(dims)):
        out[dims[j]] = st[j]
    return [o, *out]


HELPER = inspect.getsource(kc_operand_args)  # a module-level block of the candidate: one source for every family


def count(op: Op) -> int:
    """How many tensor operands the op's epilogue reads."""
    return len(operand_refs(op.detail.get("steps") or []))


def names(k: int, ndim: int) -> tuple[str, ...]:
    """Epilogue operand k and its strides: the forward's names (the kernels' are these with o<k>_ptr)."""
    return (f"o{k}", *(f"o{k}_s{d}" for d in range(ndim)))


def params(op: Op, ndim: int) -> tuple[str, ...]:
    """The kernel parameters of every operand of the op's epilogue, in order: o<k>_ptr and its strides."""
    return tuple(p for k in range(count(op)) for p in (f"o{k}_ptr", *names(k, ndim)[1:]))


def flags(op: Op) -> tuple[str, ...]:
    """A tile kernel's constexprs for the operands: O<k>_COLS, operand k varies along the out-channels only."""
    return tuple(f"O{k}_COLS" for k in range(count(op)))


def flag_consts(op: Op) -> dict[str, str]:
    """The launch's values of `flags` (the names `lines` binds)."""
    return {f"O{k}_COLS": f"o{k}_cols" for k in range(count(op))}


def args(op: Op, ndim: int) -> list[str]:
    """The forward's arguments for `params` (the names `lines` binds)."""
    return [a for k in range(count(op)) for a in names(k, ndim)]


def lines(op: Op, shape: str, dims: str, ndim: int) -> str:
    """The forward's lines binding each epilogue operand and its strides over the kernel's `ndim` dims: `shape` is a
    Python expression of the output's shape as the reference has it (its dims for an unbatched input too), `dims`
    one of the kernel dim each of those is. Nothing when the epilogue reads no operand."""
    refs = operand_refs(op.detail.get("steps") or [])
    if not refs:
        return ""
    out = [f"shape = {shape}  # the output's, as the reference has it"]
    for k, r in enumerate(refs):
        out.append(f"{', '.join(names(k, ndim))} = kc_operand_args({attr(r[1])}, shape, {dims}, {ndim})")
        rows = ", ".join(f"o{k}_s{d}" for d in range(ndim) if d != 1)
        out.append(f"o{k}_cols = not any(({rows},))  # along the out-channels only: one vector per tile")
    return "\n".join(out) + "\n"


def load(k: int, groups: Sequence[tuple[Mapping[int, str], str]], mask: str) -> str:
    """Triton expression: operand k at a tile's outputs, in fp32. Each group is ({kernel dim: the tile's index along
    it}, the suffix that places their sum in the tile: "[:, None]", "[None, :]" or "" for a scalar)."""
    parts = [f"({' + '.join(f'{index} * o{k}_s{d}' for d, index in dims.items())}){suffix}"
             for dims, suffix in groups if dims]
    return f"tl.load(o{k}_ptr + {' + '.join(parts)}, mask={mask}, other=0.0).to(tl.float32)"


def tile_load(k: int, spatial: Sequence[str]) -> str:
    """`load` for an implicit-GEMM tile: rows (n, *spatial), the output coordinates named in `spatial` (oh, ow or
    od, oh, ow: the kernel's dims 2, 3, ...), masked by mmask; columns the out-channels co, masked by nmask."""
    rows = {0: "n.to(tl.int64)", **{2 + j: name for j, name in enumerate(spatial)}}
    every = load(k, [(rows, "[:, None]"), ({1: "co.to(tl.int64)"}, "[None, :]")], "mmask[:, None] & nmask[None, :]")
    column = load(k, [({1: "co.to(tl.int64)"}, "")], "nmask") + "[None, :]"
    return f"({column} if O{k}_COLS else {every})"
