"""The op kind the conv3d family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import TypedDict

from kernelcraft.propose.builtin.plan import Steps


class Conv3d(TypedDict):
    """y = steps(conv3d(x, weight, bias)) over x (N, C, D, H, W) or (C, D, H, W); the keys mean what conv2d's do
    (nn.Conv3d or F.conv3d; no pool; the steps' parameter operands read at the output's coordinates)."""

    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    module: str | None
    groups_attr: str | None
    weight: str
    bias: str | None
    steps: Steps


DETAILS = {"conv3d": Conv3d}
