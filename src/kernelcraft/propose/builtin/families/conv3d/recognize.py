"""How 3-D convolutions are read: nn.Conv3d modules and F.conv3d (torch.conv3d) calls, by the conv family's
handlers, which serve any dimension."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.propose.builtin.families.conv.recognize import conv_call, conv_module
from kernelcraft.propose.builtin.recognize import Recognizer

RECOGNIZER = Recognizer(modules={nn.Conv3d: conv_module}, functions={F.conv3d: conv_call, torch.conv3d: conv_call})
