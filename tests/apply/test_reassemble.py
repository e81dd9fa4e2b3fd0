"""A model with regions replaced by their kernels, as one file: it computes what the model computes, on weights
drawn under another seed than the regions' files hold (the kernels read the model's tensors, not copies), wraps a
live model sharing its tensors, falls back to the model at other shapes, and refuses a kernel that keeps a tensor
of its own. The kernels are the built-in engineer's first answers, run in the Triton interpreter."""

from __future__ import annotations

import pytest
import torch

import kernelcraft
from kernelcraft.apply import extract_model, write_problems
from kernelcraft.apply.outcome import ApplyError
from kernelcraft.apply.reassemble import Replacement, reassemble
from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from tests.apply.conftest import DEVICE
from tests.helpers import KERNELBENCH

needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")


def _cut(spec, out_dir, seed=11):
    """The problem's module at its small sizes and its extraction from a model drawn under `seed`."""
    module = load_problem(spec).load(small=True)
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = list(module.get_inputs())
    extraction = extract_model(model, inputs, "m")
    paths = write_problems(extraction, out_dir / "regions")
    return module, extraction, paths


def _kernels(extraction, paths, only=None):
    proposer = BuiltinProposer("cpu")
    chosen = []
    for region, path in zip(extraction.regions, paths):
        if only is not None and region.name not in only:
            continue
        problem = load_problem(path)
        try:
            proposer.coverage(problem, "triton")
        except ValueError:
            continue
        answer = proposer.ask(Request("implement", problem, "triton"))
        chosen.append(Replacement(region, parse_kernel(answer.text).source))
    return chosen


def _swapped(module, extraction, replacements, source, out_dir, seed=5):
    (out_dir / "model_new.py").write_text(reassemble(extraction, source, replacements))
    torch.manual_seed(seed)  # not the seed the regions' files were drawn under
    model = module.Model(*module.get_init_inputs()).eval().to(DEVICE)
    return model, kernelcraft.apply(model, out_dir)


def _check(spec, tmp_path, only=None, tol=1e-4):
    module, extraction, paths = _cut(spec, tmp_path)
    replacements = _kernels(extraction, paths, only)
    assert replacements, "no region had a kernel"
    model, new = _swapped(module, extraction, replacements, load_problem(spec).source, tmp_path)
    inputs = [x.to(DEVICE) for x in module.get_inputs()]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), model(*inputs), rtol=tol, atol=tol)
    shared = {id(p) for p in model.parameters()}
    assert all(id(p) in shared for p in new.parameters())  # the kernels hold the model's tensors, no copies
    return model, new, replacements


@pytest.mark.parametrize("spec", ["level3/mlp", "level3/resnet_basic_block"])
def test_suite_models_with_every_region_replaced(spec, tmp_path):
    _check(spec, tmp_path)


@needs_kernelbench
# 44 and 46: torch.export (46's batch norm returns a tuple, read by index)
@pytest.mark.parametrize("name", ["1_MLP", "8_ResNetBasicBlock", "44_MiniGPTBlock", "46_NetVladWithGhostClusters"])
def test_upstream_models_with_every_region_replaced(name, tmp_path):
    _check(str(KERNELBENCH / "level3" / f"{name}.py"), tmp_path, tol=2e-4)


def test_some_regions_replaced_and_other_shapes_fall_back(tmp_path):
    model, new, replacements = _check("level3/mlp", tmp_path, only={"01_linear_linear_1"})
    assert [r.region.name for r in replacements] == ["01_linear_linear_1"]
    assert hasattr(new.graph, "r01") and not hasattr(new.graph, "r00")
    x = torch.randn(3, model.net[0].in_features, device=DEVICE)  # a batch the kernels were not cut at
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x))


HELD = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.log_scale = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return torch.relu(self.fc(x)) * self.log_scale.exp()  # exp of a parameter: computed once, held


def get_inputs():
    return [torch.randn(6, 10)]


def get_init_inputs():
    return [10]
'''


def test_a_value_computed_from_parameters_follows_the_models_weights(tmp_path):
    path = tmp_path / "held.py"
    path.write_text(HELD)
    module, extraction, paths = _cut(str(path), tmp_path)
    replacements = _kernels(extraction, paths)
    assert any(r.region.held and "exp" in r.region.held.values() for r in replacements)
    model, new = _swapped(module, extraction, replacements, HELD, tmp_path)
    x = module.get_inputs()[0].to(DEVICE)
    with torch.no_grad():
        torch.testing.assert_close(new(x), model(x))


FOREIGN = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight_t", torch.zeros(1))

    def forward(self, x):
        return x
'''


def test_a_kernel_keeping_a_tensor_of_its_own_is_refused(tmp_path):
    module, extraction, _ = _cut("level3/mlp", tmp_path)
    region = extraction.regions[0]
    with pytest.raises(ApplyError, match="weight_t"):
        _swapped(module, extraction, [Replacement(region, FOREIGN)], load_problem("level3/mlp").source, tmp_path)


class _Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fcs = torch.nn.ModuleList(torch.nn.Linear(12, 12) for _ in range(3))

    def forward(self, x):
        for fc in self.fcs:
            x = torch.relu(fc(x))
        return x


def test_one_kernel_replaces_every_instance_of_its_problem_each_on_its_own_weights(tmp_path):
    """The first instance's kernel, written once in the file, bound to each instance's tensors by position."""
    from kernelcraft.apply.instances import instances
    torch.manual_seed(0)
    model, x = _Blocks().eval(), torch.randn(6, 12)
    extraction = extract_model(model, [x], "blocks")
    paths = write_problems(extraction, tmp_path / "regions")
    like = instances(extraction.regions)
    assert len(set(like.values())) == 1 and len(extraction.regions) == 3
    (first,) = _kernels(extraction, paths[:1])
    by_name = {r.name: r for r in extraction.regions}
    replacements = [Replacement(r, first.source, None if like[r.name] == r.name else by_name[like[r.name]])
                    for r in extraction.regions]
    source = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
              "        super().__init__()\n        self.fcs = nn.ModuleList(nn.Linear(12, 12) for _ in range(3))\n\n"
              "    def forward(self, x):\n        for fc in self.fcs:\n            x = torch.relu(fc(x))\n"
              "        return x\n\n\ndef get_inputs():\n    return [torch.randn(6, 12)]\n\n\n"
              "def get_init_inputs():\n    return []\n")
    text = reassemble(extraction, source, replacements)
    assert text.count("@triton.jit") == first.source.count("@triton.jit")  # the kernel's text once
    (tmp_path / "model_new.py").write_text(text)
    new = kernelcraft.apply(model.to(DEVICE), tmp_path)
    with torch.no_grad():
        torch.testing.assert_close(new(x.to(DEVICE)), model(x.to(DEVICE)), rtol=1e-4, atol=1e-4)
    assert {id(p) for p in new.parameters()} == {id(p) for p in model.parameters()}


@pytest.fixture
def four_compile_threads():
    """Inductor set to compile with a pool of 4 (patched through its config: monkeypatch's undo would delete the
    setting, and every later compile in the session would fail on it)."""
    with torch._inductor.config.patch(compile_threads=4):
        yield


def test_the_compiled_form_runs_each_kernel_as_a_custom_op_inside_one_graph(tmp_path, monkeypatch,
                                                                           four_compile_threads):
    """The compiled form: torch.compile around the kernels, each behind a custom op whose fake agrees with it
    (torch.library.opcheck), one graph with no break, the model's forward on the model's own weights; inductor
    compiles in this process however many compile threads the process is set to (a pool of compile processes
    would stay running after the call, which the verifier rejects)."""
    from torch._dynamo.utils import counters
    from torch._inductor import compile_fx

    threads, original = [], compile_fx.compile_fx  # the compile threads inductor compiles the graph with

    def recorded(*args, **kwargs):
        threads.append(torch._inductor.config.compile_threads)
        return original(*args, **kwargs)
    monkeypatch.setattr(compile_fx, "compile_fx", recorded)

    from kernelcraft.apply import observe
    spec = "level3/resnet_basic_block"
    module, extraction, paths = _cut(spec, tmp_path)
    replacements = _kernels(extraction, paths)
    (tmp_path / "model_new_compiled.py").write_text(
        reassemble(extraction, load_problem(spec).source, replacements, compiled=True))
    torch.manual_seed(5)
    model = module.Model(*module.get_init_inputs()).eval().to(DEVICE)
    new = kernelcraft.apply(model, tmp_path, use="compiled")
    inputs = [x.to(DEVICE) for x in module.get_inputs()]
    counters.clear()
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), model(*inputs), rtol=1e-4, atol=1e-4)
        values = observe(extraction.graph_module.to(DEVICE), inputs)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"], dict(counters["graph_break"])
    assert threads == [1], threads  # one compile: in this process, whatever the process is set to
    graph = new.graph._orig_mod
    for r in replacements:
        wrapped = getattr(graph, r.attr)
        args = [values[n].detach() for n in r.region.inputs]
        torch.library.opcheck(wrapped.op, (wrapped.key, args),
                              test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


_FUSED_QKV = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = (t.view(b, s, 4, 8).transpose(1, 2) for t in self.qkv(x).split(w, dim=-1))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, w)


def get_inputs():
    return [torch.randn(2, 16, 32)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("graphs", [False, True], ids=["compiled", "cuda_graphs"])
def test_a_custom_ops_fake_gives_the_layout_the_model_made_and_its_kernel_returns_it(tmp_path, monkeypatch, graphs):
    """Attention's output, in the model, is laid out (B, L, H, E) and read back through a transpose: the compiled
    form's op for the attention kernel says so in its fake, and returns that layout (opcheck compares the fake's
    strides with the real op's). With CUDA graphs (`graphs`) inductor compiles with them asked for, and the model
    stays right over the calls that warm, record and replay them (on a GPU; a CPU has none to record)."""
    from torch._inductor import compile_fx

    from kernelcraft.apply import observe

    asked, original = [], compile_fx.compile_fx

    def recorded(*args, **kwargs):
        asked.append(torch._inductor.config.triton.cudagraphs)
        return original(*args, **kwargs)
    monkeypatch.setattr(compile_fx, "compile_fx", recorded)

    (tmp_path / "qkv.py").write_text(_FUSED_QKV)
    problem = load_problem(tmp_path / "qkv.py")
    module = problem.load()
    torch.manual_seed(3)
    model, inputs = module.Model().eval(), list(module.get_inputs())
    extraction = extract_model(model, inputs, "qkv")
    paths = write_problems(extraction, tmp_path / "regions")
    replacements = _kernels(extraction, paths, only={r.name for r in extraction.regions if r.kind == "attention"})
    assert len(replacements) == 1 and replacements[0].region.output_meta[0].stride == (512, 8, 32, 1)
    text = reassemble(extraction, problem.source, replacements, compiled=True, graphs=graphs)
    assert (f"_CUDA_GRAPHS = {graphs}" in text) and (("recorded as CUDA graphs" in text) == graphs)
    (tmp_path / "model_new_compiled.py").write_text(text)
    new = kernelcraft.apply(model.to(DEVICE), tmp_path, use="compiled")
    with torch.no_grad():
        for seed in range(3):  # on a GPU with graphs: warmed, recorded, replayed
            torch.manual_seed(seed)
            fresh = [torch.randn_like(x).to(DEVICE) for x in inputs]
            torch.testing.assert_close(new(*fresh).clone(), model(*fresh), rtol=1e-4, atol=1e-4)
        inputs = [x.to(DEVICE) for x in inputs]
        values = observe(extraction.graph_module.to(DEVICE), inputs)
    assert asked == [graphs]
    wrapped = getattr(new.graph._orig_mod, replacements[0].attr)
    args = [values[n].detach() for n in replacements[0].region.inputs]
    assert wrapped.op(wrapped.key, args)[0].stride() == (512, 8, 32, 1)
    torch.library.opcheck(wrapped.op, (wrapped.key, args), test_utils=("test_schema", "test_faketensor"))
