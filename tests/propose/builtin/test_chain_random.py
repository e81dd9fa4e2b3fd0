"""Random forwards (seeded, so the same each run) built from the ops chains cover: pointwise steps, tensor operands
(parameters, the second input, earlier values used again), linears, norms, softmax, reductions, convs, batchnorm,
pooling. Whatever the engineer covers must match the reference on every shape the reference accepts: this is
what catches a fold that changes a value something else still reads, or a result taken from the wrong op."""

import random
import textwrap

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin import chain
from tests.propose.builtin import kernel_check
from kernelcraft.propose.builtin.analyze import analyze
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


UNARY = ["torch.relu({})", "torch.sigmoid({})", "({} * 2.0)", "({} - 1.0)", "torch.tanh({})"]
BINARY = ["({} + {})", "({} * {})", "({} - {})"]
ROWS = {"ops": ["self.fc({})", "self.fc2({})", "torch.softmax({}, -1)", "self.ln({})", "{}.sum(-1, keepdim=True)"],
        "init": "self.fc = nn.Linear(6, 6)\nself.fc2 = nn.Linear(6, 6, bias=False)\nself.ln = nn.LayerNorm(6)\n"
                "self.b = nn.Parameter(torch.randn(6))\nself.c = nn.Parameter(torch.randn(4, 1))",
        "shapes": [((4, 6), (6,)), ((3, 6), (3, 6)), ((2, 4, 6), (4, 6))]}
IMAGES = {"ops": ["self.conv({})", "self.conv2({})", "self.bn({})", "self.gn({})", "self.pool({})",
                  "torch.softmax({}, 1)", "{}.mean(-1, keepdim=True)", "F.adaptive_avg_pool2d({}, 1)"],
          "init": "self.conv = nn.Conv2d(3, 3, 3, padding=1)\nself.conv2 = nn.Conv2d(3, 3, 1, bias=False, groups=3)\n"
                  "self.bn = nn.BatchNorm2d(3)\nself.bn.running_mean.normal_()\n"
                  "self.bn.running_var.uniform_(0.5, 1.5)\n"
                  "self.gn = nn.GroupNorm(1, 3)\nself.pool = nn.MaxPool2d(2)\n"
                  "self.b = nn.Parameter(torch.randn(3, 1, 1))\nself.c = nn.Parameter(torch.randn(5))",
          "shapes": [((2, 3, 6, 5), (3, 6, 5)), ((1, 3, 4, 5), (1, 5)), ((2, 3, 7, 5), (2, 3, 7, 5))]}

SOURCE = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init}

    def forward(self, x, y):
{body}


def get_inputs():
    return [torch.randn{x}, torch.randn{y}]


def get_init_inputs():
    return []
'''


def forward(rng: random.Random, ops: list[str]) -> str:
    names, lines = ["x"], []
    for i in range(rng.randint(2, 6)):
        a, r = rng.choice(names), rng.random()
        if r < 0.35:
            expr = rng.choice(UNARY).format(a)
        elif r < 0.65:
            b = rng.choice(names + ["self.b", "y", "self.c"])
            expr = rng.choice(BINARY).format(*((a, b) if rng.random() < 0.5 else (b, a)))
        else:
            expr = rng.choice(ops).format(a)
        lines.append(f"t{i} = {expr}")
        names.append(f"t{i}")
    tail = f" + {rng.choice(names[:-1])}" if rng.random() < 0.3 else ""
    return "\n".join(lines + [f"return {names[-1]}{tail}"])


@pytest.mark.parametrize("world", ["rows", "images"])
@pytest.mark.parametrize("seed", range(12))
def test_random_forwards(tmp_path, world, seed):
    spec = ROWS if world == "rows" else IMAGES
    body = forward(random.Random(f"{world}{seed}"), spec["ops"])
    x, y = spec["shapes"][0]
    source = SOURCE.format(init=textwrap.indent(spec["init"], " " * 8), body=textwrap.indent(body, " " * 8), x=x, y=y)
    path = tmp_path / "problem.py"
    path.write_text(source)
    analysis = analyze(load_problem(path))
    if analysis.single is not None:
        candidate = kernel_check.render(analysis.single, source)
    elif analysis.chain is not None:
        candidate = chain.render(analysis.chain, source)
    else:
        pytest.skip(f"not covered: {analysis.unsupported}")
    assert_no_torch_compute(candidate)
    module = load(candidate, tmp_path)
    torch.manual_seed(0)
    ref = module.Model().to(DEVICE).eval()
    torch.manual_seed(0)
    new = module.ModelNew().to(DEVICE).eval()
    compared = 0
    for shapes in spec["shapes"]:
        inputs = [torch.randn(s, device=DEVICE) for s in shapes]
        try:
            with torch.no_grad():
                want = ref(*inputs)
        except RuntimeError:  # shapes this forward does not take
            continue
        with torch.no_grad():
            got = new(*inputs)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"{body}\n{shapes}: {m}")
        compared += 1
    assert compared or "pool" in body or "adaptive" in body, body
