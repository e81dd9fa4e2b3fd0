"""Epilogue operands: the parameter tensors of an epilogue's tensor steps (x + self.bias, x * self.scale), broadcast
to the op's output by torch's rules and read by the kernel at the output's coordinates. One machinery for every
family whose epilogue reads them: the convolutions (conv, conv3d, conv_transpose, conv_transpose3d), the channel
norms (batchnorm, groupnorm, instancenorm) and softmax.

A kernel indexes its output by its own dims, (n, co, oh, ow) or (n, co, od, oh, ow) for a conv, (n, c, s) for a
channel norm (s: the spatial dims taken flat), (outer, r, inner) for a softmax along r; the reference's output dims
are some of the kernel's, or a run of them one flat kernel dim (a norm's spatial dims). The forward
(`lines`) binds each operand o<k> with one stride per kernel dim, o<k>_s0, o<k>_s1, ... (kc_operand_args:
the operand's own stride where it varies, 0 where it is broadcast or the output has no such dim), and the kernel
reads it with `load`: the sum of its index along each kernel dim times that stride. A kernel may also take
one constexpr per operand (`flags`), O<k>_COLS: the operand varies along the kernel's dim 1 only (a conv's
out-channels, a norm's channels, a softmax's reduced dim: a bias or scale of shape (C, 1, 1)), so the kernel loads
it by that index alone (`flagged`; an implicit-GEMM tile one BLOCK_N vector instead of a value per output,
`tile_load`)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from kernelcraft.propose.builtin.paths import parameter
from kernelcraft.propose.builtin.plan import Op, operand_refs


def kc_operand_args(o, shape, dims, ndim):
    """An epilogue operand o and its strides broadcast to the output's `shape` (0 on broadcast dims), placed at the
    kernel's dims `dims` (one per output dim) of its `ndim` (0 on the others). Output dims that share a kernel dim
    are a run the kernel indexes flat: o's strides along the run must step as that flat index does, else o is first
    expanded to the output's shape (a copy, for an operand that varies along only some of the run's dims). One that
    would broadcast the output itself is refused."""
    lead = len(shape) - o.dim()
    if lead < 0 or any(o.shape[k] != 1 and o.shape[k] != shape[lead + k] for k in range(o.dim())):
        raise ValueError(f"an operand of shape {tuple(o.shape)} broadcasts beyond the output {tuple(shape)}")
    st = [0] * len(shape)
    for k in range(o.dim()):
        st[lead + k] = 0 if o.shape[k] == 1 else o.stride(k)
    run = [None] * ndim  # per kernel dim: (the stride of its innermost output dim, the run's extent so far)
    for j in range(len(shape) - 1, -1, -1):
        d = dims[j]
        if shape[j] == 1:
            continue
        if run[d] is None:
            run[d] = (st[j], shape[j])
        elif st[j] == run[d][0] * run[d][1]:
            run[d] = (run[d][0], run[d][1] * shape[j])
        else:  # not a flat run's steps: the operand at every output coordinate
            return kc_operand_args(o.expand(shape).contiguous(), shape, dims, ndim)
    return [o, *(0 if r is None else r[0] for r in run)]


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
    """A kernel's constexprs for the operands: O<k>_COLS, operand k varies along the kernel's dim 1 only."""
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
        out.append(f"{', '.join(names(k, ndim))} = kc_operand_args({parameter(r)}, shape, {dims}, {ndim})")
        rows = ", ".join(f"o{k}_s{d}" for d in range(ndim) if d != 1)
        out.append(f"o{k}_cols = not any(({rows},))  # along the kernel's dim 1 only (channels): loaded by it alone")
    return "\n".join(out) + "\n"


def load(k: int, groups: Sequence[tuple[Mapping[int, str], str]], mask: str | None) -> str:
    """Triton expression: operand k at a tile's outputs, in fp32. Each group is ({kernel dim: the tile's index along
    it}, the suffix that places their sum in the tile: "[:, None]", "[None, :]" or "" for a scalar or an index
    already shaped like the tile); `mask` None: every index is in bounds (a scalar's)."""
    parts = [f"({' + '.join(f'{index} * o{k}_s{d}' for d, index in dims.items())}){suffix}"
             for dims, suffix in groups if dims]
    masked = f", mask={mask}, other=0.0" if mask is not None else ""
    return f"tl.load(o{k}_ptr + {' + '.join(parts)}{masked}).to(tl.float32)"


def flagged(k: int, column: str, every: str) -> str:
    """Operand k as `column` (its load by the kernel's dim-1 index alone) where O<k>_COLS, else as `every` (its load
    at each output): the constexpr picks one at compile time."""
    return f"({column} if O{k}_COLS else {every})"


def tile_load(k: int, spatial: Sequence[str]) -> str:
    """`load` for an implicit-GEMM tile: rows (n, *spatial), the output coordinates named in `spatial` (oh, ow or
    od, oh, ow: the kernel's dims 2, 3, ...), masked by mmask; columns the out-channels co, masked by nmask."""
    rows = {0: "n.to(tl.int64)", **{2 + j: name for j, name in enumerate(spatial)}}
    every = load(k, [(rows, "[:, None]"), ({1: "co.to(tl.int64)"}, "[None, :]")], "mmask[:, None] & nmask[None, :]")
    column = load(k, [({1: "co.to(tl.int64)"}, "")], "nmask") + "[None, :]"
    return flagged(k, column, every)
