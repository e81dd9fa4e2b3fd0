"""The op kinds the conv family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import NotRequired, TypedDict

from kernelcraft.propose.builtin.families.channel_norm.ops import Batchnorm
from kernelcraft.propose.builtin.families.pool.ops import Pool2d
from kernelcraft.propose.builtin.plan import Steps


class ConvHyper(TypedDict):
    """What every convolution's detail holds (conv1d/2d/3d and the transposed ones): its hyper-parameters, read at
    run time from `module` where it is an nn module's (groups_attr: where forward reads groups), its weight and bias
    by attribute path, and its pointwise epilogue."""

    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    module: str | None
    groups_attr: str | None
    weight: str
    bias: str | None
    steps: Steps


class Conv2d(ConvHyper):
    """y = pool(steps(bn(conv2d(x, weight, bias)))): bn an eval batchnorm folded in (per-channel scale and shift,
    present only when folded), steps the pointwise epilogue (tensor steps read any parameter at the output's
    coordinates: operands.py), pool a pooling that follows. module: the nn.Conv2d's path, whose stride, padding,
    dilation and groups the kernel reads at run time (they may depend on sizes, as a depthwise conv's groups do); for
    F.conv2d the values given (groups by attribute when read from self). conv1d has the same keys, its
    hyper-parameters lifted to a one-row conv2d's ([1, s], [0, p], [1, d])."""

    pool: Pool2d | None
    bn: NotRequired[Batchnorm]


DETAILS = {"conv2d": Conv2d, "conv1d": Conv2d}
