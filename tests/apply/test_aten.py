"""A torch.export graph's ATen calls written as the torch calls they come from: the same values, torch's own
functions and methods in the graph, implementation-only arguments dropped, and a call that does not fit left
as it is."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.apply.aten import torch_level


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 12)

    def forward(self, x):
        q, k, v = self.fc(self.ln(x)).split(4, dim=-1)
        att = torch.softmax((q @ k.transpose(-2, -1)) * 0.5, dim=-1)
        return (att @ v).view(-1) + torch.cumsum(x, 0).sum()


def test_export_graph_reads_as_torch_and_computes_the_same():
    model, x = Block().eval(), torch.randn(3, 5, 8)
    program = torch.export.export(model, (x,)).run_decompositions({})
    gm = program.module()
    want = gm(x)
    count = torch_level(gm.graph)
    gm.recompile()
    targets = {n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")}
    assert count >= 8 and {F.linear, F.layer_norm, torch.softmax, torch.matmul, torch.split, "view"} <= targets
    assert torch.ops.aten.cumsum.default in targets  # not in the table: still ATen, and still runs
    layer_norm = next(n for n in gm.graph.nodes if n.target is F.layer_norm)
    assert len(layer_norm.args) == 5  # cudnn_enable, which picks an implementation, dropped
    torch.testing.assert_close(gm(x), want)


def test_no_entry_passes_a_keyword_only_argument_by_position():
    """Each torch call takes positionally no more of the schema's leading arguments than the schema does (a
    keyword-only one, gelu's `approximate`, passed by position raised TypeError in the model)."""
    from kernelcraft.apply.aten import TORCH
    for overload, (_, positional) in TORCH.items():
        leading = overload._schema.arguments[:positional]
        assert not any(a.kwarg_only for a in leading), (overload, [a.name for a in leading])


def test_a_tanh_gelu_from_export_runs_as_torch():
    model, x = nn.Sequential(nn.Linear(8, 8), nn.GELU(approximate="tanh")).eval(), torch.randn(4, 8)
    gm = torch.export.export(model, (x,)).run_decompositions({}).module()
    want = gm(x)
    torch_level(gm.graph)
    gm.recompile()
    gelu = next(n for n in gm.graph.nodes if n.target is F.gelu)
    assert gelu.kwargs == {"approximate": "tanh"} and len(gelu.args) == 1
    torch.testing.assert_close(gm(x), want)
