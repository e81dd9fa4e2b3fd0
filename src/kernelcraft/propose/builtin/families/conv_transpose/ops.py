"""The op kinds the conv_transpose family serves, typed (Family.details; steps by plan.py's grammar)."""

from kernelcraft.propose.builtin.families.conv.ops import ConvHyper


class ConvTranspose(ConvHyper):
    """y = steps(conv_transpose2d(x, weight, bias)), weight (C_in, C_out/groups, KH, KW), x (N, C, H, W) or
    (C, H, W); output size (H - 1)*sh - 2*ph + dh*(KH - 1) + oph + 1 (W alike); module: the nn.ConvTranspose2d's
    path, read at run time as conv2d's; padding_mode zeros only, no output_size; the steps' parameter operands read
    at the output's coordinates. conv_transpose1d: the same keys, lifted to a one-row one's as conv1d's are;
    conv_transpose3d: the same keys in three dims (each output size (D - 1)*sd - 2*pd + dd*(KD - 1) + opd + 1)."""

    output_padding: list[int]


DETAILS = {"conv_transpose2d": ConvTranspose, "conv_transpose1d": ConvTranspose}
