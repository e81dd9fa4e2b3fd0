"""The op kind the argreduce family serves, typed (Family.details)."""

from typing import Literal, TypedDict


class Argreduce(TypedDict):
    """int64 indices (dim None: into the flattened input); ties give the first index, NaN counts as the extreme
    (torch's rules); also the indices of torch.max/min(x, dim)."""

    op: Literal["argmax", "argmin"]
    dim: int | None
    dim_attr: str | None
    keepdim: bool


DETAILS = {"argreduce": Argreduce}
