"""The op kind the conv3d family serves, typed (Family.details; steps by plan.py's grammar)."""

from kernelcraft.propose.builtin.families.conv.ops import ConvHyper


class Conv3d(ConvHyper):
    """y = steps(conv3d(x, weight, bias)) over x (N, C, D, H, W) or (C, D, H, W); the keys mean what conv2d's do
    (nn.Conv3d or F.conv3d; no pool; the steps' parameter operands read at the output's coordinates)."""


DETAILS = {"conv3d": Conv3d}
