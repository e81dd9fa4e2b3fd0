"""The op kind the conv_transpose3d family serves, typed (Family.details): conv_transpose's keys in three dims."""

from kernelcraft.propose.builtin.families.conv_transpose.ops import ConvTranspose

DETAILS = {"conv_transpose3d": ConvTranspose}
