"""The op kind the triangle family serves, typed (Family.details)."""

from typing import Literal, TypedDict


class Triangle(TypedDict):
    """torch.triu/tril(x, diagonal) over the last two dims of x (2 dims or more): entry (i, j) kept where
    j - i >= diagonal (triu) or <= diagonal (tril), else 0; diagonal_attr: the attribute holding it, read at run
    time."""

    op: Literal["triu", "tril"]
    diagonal: int
    diagonal_attr: str | None


DETAILS = {"triangle": Triangle}
