"""The op kind the cat family serves, typed (Family.details)."""

from typing import Any, TypedDict


class Cat(TypedDict):
    """torch.cat of the values `parts` (value refs, plan.py's; src: the first) along dim, all of one dtype and equal
    sizes elsewhere."""

    dim: int
    parts: list[Any]


DETAILS = {"cat": Cat}
