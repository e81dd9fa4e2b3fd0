"""The op kind the scan family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import Literal, NotRequired, TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Scan(TypedDict):
    """Inclusive along dim; reverse: from the end (flip(scan(flip(x, dim)), dim), as torch spells it); exclusive:
    entry r the scan of entries 0..r-1, entry 0 the identity. pre: pointwise steps applied to each element of src as
    it is loaded, tensor steps too where every operand has src's shape (cumsum(x * mask) reads the mask in place)."""

    op: Literal["cumsum", "cumprod"]
    dim: int
    dim_attr: str | None
    reverse: NotRequired[bool]
    exclusive: NotRequired[bool]
    pre: NotRequired[Steps]


DETAILS = {"scan": Scan}
