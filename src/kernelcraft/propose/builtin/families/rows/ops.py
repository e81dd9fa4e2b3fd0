"""The op kinds the rows families (softmax, reduce) serve, typed (Family.details; steps by plan.py's grammar)."""

from typing import Literal, NotRequired, TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Softmax(TypedDict):
    """torch.softmax(x, dim) or torch.log_softmax(x, dim); steps: the pointwise ops after it, as an epilogue."""

    dim: int
    dim_attr: NotRequired[str | None]
    steps: NotRequired[Steps]


class Reduce(TypedDict):
    """A reduction over dim (None: every dim; a list: several adjacent dims, sorted, all counted from the front or
    all from the back, reduced as one); dim_attr: the module attribute holding dim, where forward reads self.dim.
    max/min are the values only, as torch.amax/amin; norm2 is sqrt(sum(x^2)), torch.norm's p 2 or "fro". pre: the
    pointwise steps applied to each element of src before it is reduced, tensor steps too (their operands
    broadcast to src's shape, read by the reduce kernel as a prologue: mean((a - b) ** 2) reads a and b once)."""

    op: Literal["sum", "mean", "max", "min", "logsumexp", "norm2"]
    dim: int | list[int] | None
    dim_attr: str | None
    keepdim: bool
    pre: NotRequired[Steps]
    steps: NotRequired[Steps]


DETAILS = {"softmax": Softmax, "log_softmax": Softmax, "reduce": Reduce}
