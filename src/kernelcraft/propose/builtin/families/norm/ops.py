"""The op kinds the norm family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import NotRequired, TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Layernorm(TypedDict):
    """Over the trailing ndim dims; weight and bias by attribute path ("ln.weight"); steps: the pointwise ops after
    the norm, as an epilogue."""

    ndim: int
    eps: float
    eps_attr: NotRequired[str | None]
    weight: str | None
    bias: str | None
    steps: NotRequired[Steps]


class Rmsnorm(TypedDict):
    """x * rsqrt(mean(x^2, dim, keepdim=True) + eps) [* weight], over the last dim, or over dim (read from the
    module's attribute dim_attr where forward reads it; weight None there, a weight is a tensor step after it);
    x / sqrt(mean(x^2) + eps) is the same op. steps: the pointwise ops after the norm, as an epilogue."""

    eps: float
    eps_attr: str | None
    weight: str | None
    dim: NotRequired[int]
    dim_attr: NotRequired[str | None]
    steps: NotRequired[Steps]


DETAILS = {"layernorm": Layernorm, "rmsnorm": Rmsnorm}
