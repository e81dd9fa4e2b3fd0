"""A number forward reads from the module (`... * self.scale`), folded into the epilogue of each family that takes
one: every move renders a file whose kernels take it as a parameter and whose launches pass it (names_check.py),
and each move runs right with the number the model holds now, not the one traced."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load, move_tolerance
from tests.propose.builtin.names_check import check_names

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        {layer}
        self.scale = scale

    def forward(self, {args}):
        return {forward}


def get_inputs():
    return [torch.randn(*s) for s in {shapes}]


def get_init_inputs():
    return [0.75]
'''

# kind, the layer, forward, the input's shape (or the inputs' shapes)
CASES = [
    # 2-D row-major operands with 16-byte rows: the TMA moves take their TMA kernels on a Hopper GPU
    ("matmul", "pass", "torch.matmul(x, y) * self.scale", [(16, 32), (32, 24)]),
    ("conv2d", "self.conv = nn.Conv2d(3, 4, 3, padding=1)", "self.conv(x) * self.scale", (2, 3, 6, 7)),
    ("conv2d", "self.conv = nn.Conv2d(4, 4, 3, groups=4)", "self.conv(x) * self.scale", (2, 4, 6, 7)),
    ("conv2d", "self.conv = nn.Conv2d(3, 4, 3)", "F.max_pool2d(self.conv(x) * self.scale, 2)", (1, 3, 8, 9)),
    ("conv1d", "self.conv = nn.Conv1d(3, 4, 3)", "self.conv(x) * self.scale", (2, 3, 9)),
    ("conv3d", "self.conv = nn.Conv3d(2, 3, 2)", "self.conv(x) * self.scale", (1, 2, 4, 5, 4)),
    ("conv_transpose2d", "self.conv = nn.ConvTranspose2d(3, 4, 3, stride=2)", "self.conv(x) * self.scale",
     (1, 3, 4, 5)),
    ("layernorm", "self.ln = nn.LayerNorm(16)", "self.ln(x) * self.scale", (3, 16)),
    ("groupnorm", "self.gn = nn.GroupNorm(2, 4)", "self.gn(x) * self.scale", (2, 4, 5, 3)),
    ("instancenorm", "self.norm = nn.InstanceNorm2d(4, affine=True)", "self.norm(x) * self.scale", (2, 4, 5, 3)),
    ("batchnorm", "self.bn = nn.BatchNorm2d(4)", "self.bn(x) * self.scale", (2, 4, 5, 3)),
    ("elementwise", "self.bias = nn.Parameter(torch.randn(7))", "x * self.scale + self.bias", (3, 7)),
    ("elementwise", "pass", "torch.relu(x) * self.scale", (3, 7)),
]


@pytest.mark.parametrize("kind, layer, forward, shape", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_every_move_takes_the_number_at_run_time(kind, layer, forward, shape, tmp_path):
    path = tmp_path / "problem.py"
    shapes = shape if isinstance(shape, list) else [shape]
    args = ", ".join("xyz"[:len(shapes)])
    path.write_text(PROBLEM.format(layer=layer, forward=forward, shapes=shapes, args=args))
    problem = load_problem(path)
    analysis = analyze(problem)
    op = analysis.single or analysis.chain[0]  # an elementwise op with a tensor operand is a chain of one
    assert op.kind == kind and ["mul", "self.scale"] in op.detail["steps"], op
    for move in kernel_check.moves(op) if analysis.single else chain.moves(analysis.chain):
        source = kernel_check.render(op, problem.source, move.params) if analysis.single else \
            chain.render(analysis.chain, problem.source, move.params)
        assert_no_torch_compute(source)
        check_names(source, {"scale"})
        module = load(source, tmp_path)
        for scale in (0.75, -1.5):
            torch.manual_seed(0)
            ref = module.Model(scale).to(DEVICE).eval()
            new = module.ModelNew(scale).to(DEVICE).eval()
            new.load_state_dict(ref.state_dict())
            xs = [torch.randn(s, device=DEVICE) for s in shapes]
            with torch.no_grad():
                torch.testing.assert_close(new(*xs), ref(*xs), **move_tolerance(move.params),
                                           msg=lambda m: f"{move.text[:60]!r} scale {scale}: {m}")
