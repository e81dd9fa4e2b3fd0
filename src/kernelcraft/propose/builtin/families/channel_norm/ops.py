"""The op kinds the channel norm families serve, typed (Family.details; steps by plan.py's grammar). *_attr: where
forward reads the value at run time ("eps", "norm.eps"); steps: the pointwise ops after the norm, as an epilogue."""

from typing import NotRequired, TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Batchnorm(TypedDict):
    """Eval mode over (N, C, *spatial): per channel (x - running_mean) / sqrt(running_var + eps) [* weight] [+ bias].
    Folded into a conv before it, the conv's detail holds it as "bn"."""

    eps: float
    eps_attr: str | None
    weight: str | None
    bias: str | None
    running_mean: str
    running_var: str
    steps: NotRequired[Steps]


class Instancenorm(TypedDict):
    """Statistics per (n, c) over the spatial dims, affine per channel; spatial: the module's spatial dims (an input
    with spatial + 1 dims is unbatched), None for F.instance_norm."""

    eps: float
    eps_attr: str | None
    weight: str | None
    bias: str | None
    spatial: int | None
    steps: NotRequired[Steps]


class Groupnorm(TypedDict):
    """Statistics per (n, group) over C/groups channels and the spatial dims, affine per channel."""

    groups: int
    groups_attr: str | None
    eps: float
    eps_attr: str | None
    weight: str | None
    bias: str | None
    steps: NotRequired[Steps]


DETAILS = {"batchnorm": Batchnorm, "instancenorm": Instancenorm, "groupnorm": Groupnorm}
