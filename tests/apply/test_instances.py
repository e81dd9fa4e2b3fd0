"""Regions that are one problem: the same ops on inputs and parameters of the same shapes and dtypes, whatever the
weights' values and the nodes' names; a buffer's values, an op's arguments, a shape or a dtype tell them apart. A
kernel written for the first instance holds its tensors under that problem's names, mapped to each instance's."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.apply import extract_model
from kernelcraft.apply.instances import instances, signature, slots


class Block(nn.Module):
    def __init__(self, width=16, approximate="none", mask_value=1.0):
        super().__init__()
        self.ln, self.fc, self.approximate = nn.LayerNorm(width), nn.Linear(width, width), approximate
        self.register_buffer("scale", torch.full((width,), mask_value))

    def forward(self, x):
        return x + F.gelu(self.fc(self.ln(x)), approximate=self.approximate) * self.scale


class Stack(nn.Module):
    def __init__(self, *blocks):
        super().__init__()
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)


def _cut(*blocks, x=None):
    torch.manual_seed(0)
    return extract_model(Stack(*blocks).eval(), [torch.randn(2, 5, 16) if x is None else x], "stack").regions


def test_blocks_with_other_weights_are_instances_of_their_first():
    regions = _cut(Block(), Block(), Block())
    like = instances(regions)
    firsts = sorted(set(like.values()))
    assert len(firsts) == 2 and len(regions) == 6  # the norm and the linear with its epilogue, three times each
    for r in regions:
        assert signature(r) == signature(next(x for x in regions if x.name == like[r.name]))
    linear = [r for r in regions if r.kind == "linear"]
    mapped = slots(linear[2], linear[0])
    assert list(mapped) == list(linear[0].held) and list(mapped.values()) == list(linear[2].held)
    assert mapped != {k: k for k in mapped}  # the names differ: blocks_0_… against blocks_2_…


def test_what_a_kernel_depends_on_tells_regions_apart():
    plain = [r for r in _cut(Block(), Block(approximate="tanh"), Block(mask_value=2.0)) if r.kind == "linear"]
    assert len({signature(r) for r in plain}) == 3  # an argument's value, a buffer's values
    wide = [r for r in _cut(Block(), Stack(nn.Linear(16, 24)), Block(24)) if r.kind == "linear"]
    assert len({signature(r) for r in wide}) == len(wide)  # other shapes
    half = _cut(Block().to(torch.bfloat16), x=torch.randn(2, 5, 16, dtype=torch.bfloat16))
    full = _cut(Block())
    assert [r.kind for r in half] == [r.kind for r in full]
    assert not {signature(r) for r in half} & {signature(r) for r in full}  # another dtype
