"""Regions of whole models as standalone problems: each written file loads through kernelcraft.problems, computes
what the model computed for its nodes, and the regions together give the model's output."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from kernelcraft.apply import CaptureError, compose, extract_model, observe, write_problems
from kernelcraft.problems import load_problem
from kernelcraft.problems.cost import compute_cost
from tests.helpers import KERNELBENCH

needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")

SUITE = ["level3/mlp", "level3/resnet_basic_block", "level3/transformer_encoder_block", "level3/fire_module",
         "level3/lenet5", "level3/mlp_mixer"]
UPSTREAM = ["1_MLP", "8_ResNetBasicBlock", "44_MiniGPTBlock", "43_MinGPTCausalAttention",
            "46_NetVladWithGhostClusters"]


def _built(spec):
    """A problem's model (seeded, eval mode) and inputs at its small sizes."""
    module = load_problem(spec).load(small=True)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).eval()
    return model, list(module.get_inputs())


def _check_regions(model, inputs, out_dir, name):
    """Every region's written problem loads and matches the model's values; together they give its output."""
    extraction = extract_model(model, inputs, name)
    with torch.no_grad():
        expected = model(*inputs)
        values = observe(extraction.graph_module, inputs)
        loaded = {}
        for region, path in zip(extraction.regions, write_problems(extraction, out_dir)):
            module = load_problem(path).load()
            problem_model = module.Model(*module.get_init_inputs()).eval()
            drawn = module.get_inputs()
            assert [(tuple(x.shape), str(x.dtype).removeprefix("torch.")) for x in drawn] == \
                [(m.shape, m.dtype) for m in region.input_meta], region.name
            assert all(x.stride() == m.stride for x, m in zip(drawn, region.input_meta) if m.stride), region.name
            problem_model(*drawn)  # runs on its own random inputs
            got = problem_model(*[values[n] for n in region.inputs])
            want = [values[o] for o in region.outputs]
            torch.testing.assert_close(list(got) if len(want) > 1 else [got], want, msg=region.name)
            loaded[region.name] = problem_model
        torch.testing.assert_close(compose(extraction, inputs, loaded), expected)
    covered = [n for r in extraction.regions for n in r.nodes]
    assert len(covered) == len(set(covered))  # each node in one region
    return extraction


@pytest.mark.parametrize("name", SUITE)
def test_suite_models_become_region_problems(name, tmp_path):
    model, inputs = _built(name)
    extraction = _check_regions(model, inputs, tmp_path, name.replace("/", "_"))
    assert extraction.regions


@needs_kernelbench
@pytest.mark.parametrize("name", UPSTREAM)
def test_kernelbench_models_become_region_problems(name, tmp_path):
    model, inputs = _built(KERNELBENCH / "level3" / f"{name}.py")
    extraction = _check_regions(model, inputs, tmp_path, name)
    kinds = [r.kind for r in extraction.regions]
    if name == "1_MLP":
        assert extraction.method == "fx" and kinds == ["linear"] * 3
        assert [r.nodes for r in extraction.regions][0] == ["linear", "relu"]  # the relu is the linear's epilogue
    if name == "8_ResNetBasicBlock":  # in-place += and ReLU(inplace=True) computed out of place, still fx
        assert extraction.method == "fx" and kinds == ["conv"] * 3
        undone = [note for note in extraction.notes if "in-place" in note]  # one note, each op once
        assert undone == ["in-place ops computed out of place (2): relu x2"], undone  # one ReLU module, called twice
    if name == "44_MiniGPTBlock":  # B, T, C = x.size(): fx cannot trace it, torch.export can
        assert extraction.method == "export"
        assert "attention" in kinds and kinds.count("linear") == 4
        assert any("torch.fx could not trace it" in note for note in extraction.notes)
        gelu = next(r for r in extraction.regions if "tanh" in r.nodes)
        assert gelu.kind == "linear"  # x * 0.5 * (1 + tanh(...)): every reader of the linear in one epilogue
    if name == "46_NetVladWithGhostClusters":  # export's batch norm returns (output, mean, rstd): read by index
        norm = next(r for r in extraction.regions if "_native_batch_norm_legit_no_training" in r.nodes)
        assert norm.kind == "matmul" and "getitem" in norm.nodes


@needs_kernelbench
def test_region_problems_load_as_the_verifier_loads_them(tmp_path):
    model, inputs = _built(KERNELBENCH / "level3" / "8_ResNetBasicBlock.py")
    for path in write_problems(extract_model(model, inputs, "resnet"), tmp_path):
        problem = load_problem(path)
        assert compute_cost(problem.load(small=True)).flops > 0  # the sizes pass and the cost pass both run
        assert path.with_suffix(".pt").exists()


class _Branchy(nn.Module):
    """fx cannot slice with a bound read from a tensor's shape; torch.export can (the shapes are static)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)
        self.register_buffer("position", torch.randn(16, 6))

    def forward(self, x):
        b, t, c = x.size()
        return torch.relu(self.proj(x).view(b * t, c)) * 2.0 + self.position[:t].repeat(b, 1)


class _DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class _WritesItsInput(nn.Module):
    def forward(self, x):
        x.mul_(2.0)
        return torch.tanh(x)


def test_a_model_fx_cannot_trace_falls_back_to_export(tmp_path):
    torch.manual_seed(0)
    extraction = _check_regions(_Branchy().eval(), [torch.randn(2, 3, 6)], tmp_path, "branchy")
    assert extraction.method == "export"
    assert "torch.fx could not trace it" in extraction.notes[0]


def test_a_model_neither_can_capture_is_a_one_line_error():
    with pytest.raises(CaptureError) as caught:
        extract_model(_DataDependent(), [torch.randn(4)])
    message = str(caught.value)
    assert "\n" not in message and "branches on a tensor value" in message


def test_a_model_that_writes_into_its_input_is_a_one_line_error():
    with pytest.raises(CaptureError) as caught:
        extract_model(_WritesItsInput(), [torch.randn(3, 5)])
    message = str(caught.value)
    assert "\n" not in message and "writes into an input" in message and "writes into its inputs" in message


class _ReadsAfterInPlace(nn.Module):
    """The in-place ReLU overwrites y, which is read again: out of place it would differ, so export captures it."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 5)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.proj(x)
        z = self.act(y)
        return y + z


def test_an_in_place_module_whose_input_is_read_again_is_left_to_export(tmp_path):
    torch.manual_seed(0)
    extraction = _check_regions(_ReadsAfterInPlace().eval(), [torch.randn(3, 5)], tmp_path, "reads_after")
    assert extraction.method == "export" and "overwrites a value read afterwards" in extraction.notes[0]


def test_a_copy_of_a_region_problem_run_elsewhere_reads_the_weights_where_they_were_written(tmp_path):
    model, inputs = _built("level3/mlp")
    extraction = extract_model(model, inputs, "mlp")
    path = write_problems(extraction, tmp_path / "regions")[0]
    elsewhere = tmp_path / "worker" / "problem.py"  # the verifier's worker runs the text in its own directory
    elsewhere.parent.mkdir()
    elsewhere.write_text(path.read_text())
    module = load_problem(elsewhere).load()
    copy = module.Model(*module.get_init_inputs())
    torch.testing.assert_close(dict(copy.state_dict()), dict(extraction.regions[0].module.state_dict()))


class _MaskedRunningSum(nn.Module):
    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=1)


class _SharedProduct(nn.Module):  # the product is read by the sum and by the output: it cannot join the sum
    def forward(self, x, y):
        p = x * y
        return torch.sum(p, 1), torch.relu(p)


class _ReverseScanAndNorm(nn.Module):  # torch's reverse scan (a flip each side) and torch.linalg's 2-norm
    def forward(self, x, mask, y):
        return torch.cumsum((x * mask).flip(1), 1).flip(1), y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def test_a_reverse_scan_takes_its_flips_and_the_engineer_covers_it_and_the_vector_norm(tmp_path):
    """The flips around a scan join its region (else each is a region of its own, a copy written and read back),
    and the engineer covers both regions' problems."""
    from kernelcraft.propose.builtin.proposer import BuiltinProposer

    inputs = [torch.randn(4, 96), torch.rand(4, 96) > 0.5, torch.randn(4, 40)]
    extraction = _check_regions(_ReverseScanAndNorm(), inputs, tmp_path, "m")
    assert sorted((r.name, r.nodes) for r in extraction.regions) == [
        ("00_reduce_cumsum", ["mul", "flip", "cumsum", "flip_1"]),
        ("01_reduce_linalg_vector_norm", ["linalg_vector_norm", "truediv"])]
    engineer = BuiltinProposer("cpu")
    for path in write_problems(extraction, tmp_path / "again"):
        engineer.coverage(load_problem(path), "triton")  # raises CoverageError if not covered


class _MaxParts(nn.Module):  # torch.max over a dim returns (values, indices): parts read by index and by name
    def forward(self, x, y):
        top = torch.max(torch.abs(x), dim=1)
        return top[0] * 2, torch.max(y, dim=0).values, top.indices


@pytest.mark.parametrize("model, inputs, expected", [
    (_MaskedRunningSum(), [torch.randn(4, 96), torch.rand(4, 96) > 0.5], [("00_reduce_cumsum", ["mul", "cumsum"])]),
    (_SharedProduct(), [torch.randn(4, 96), torch.randn(4, 96)], [("00_elementwise_mul", ["mul"]),
                                                                 ("01_reduce_sum_1", ["sum_1"]),
                                                                 ("02_elementwise_relu", ["relu"])]),
    (_MaxParts(), [torch.randn(4, 96), torch.randn(5, 96)], [("00_reduce_max_1", ["abs_1", "max_1", "getitem",
                                                                                  "getattr_2"]),
                                                            ("01_elementwise_mul", ["mul"]),
                                                            ("02_reduce_max_2", ["max_2", "getattr_1"])]),
], ids=["prologue", "shared-prologue-stays-out", "tuple-parts"])
def test_a_reduction_takes_the_pointwise_ops_only_it_reads_and_the_parts_it_returns(model, inputs, expected, tmp_path):
    extraction = _check_regions(model, inputs, tmp_path, "m")
    assert sorted((r.name, r.nodes) for r in extraction.regions) == sorted(expected)


class _PreNormMLP(nn.Module):
    """LayerNorm -> Linear -> GELU (tanh) -> Linear, residual, softmax head: F.gelu's `approximate` is keyword-only,
    and the lowered nn.GELU passed it by position (TypeError: gelu() takes 1 positional argument but 2 were given)."""

    def __init__(self):
        super().__init__()
        self.norm, self.fc1, self.act = nn.LayerNorm(16), nn.Linear(16, 32), nn.GELU(approximate="tanh")
        self.fc2, self.head = nn.Linear(32, 16), nn.Linear(8, 5)
        self.pool, self.slope = nn.AvgPool1d(2, ceil_mode=True), nn.LeakyReLU(0.1)

    def forward(self, x):
        x = x + self.fc2(self.act(self.fc1(self.norm(x))))
        return torch.softmax(self.head(self.slope(self.pool(x))), dim=-1)


def test_module_leaves_pass_their_settings_by_keyword(tmp_path):
    torch.manual_seed(0)
    extraction = _check_regions(_PreNormMLP().eval(), [torch.randn(2, 7, 16)], tmp_path, "prenorm")
    assert extraction.method == "fx"
    calls = {n.target: n for n in extraction.graph_module.graph.nodes if n.op == "call_function"}
    assert calls[F.gelu].kwargs == {"approximate": "tanh"} and len(calls[F.gelu].args) == 1
    assert calls[F.avg_pool1d].kwargs["ceil_mode"] is True


class _RMSNorm(nn.Module):
    """An RMSNorm as transformers writes it: in float32 whatever the model's dtype, cast back before the weight."""

    def __init__(self, checked: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(64) + 0.1 * torch.randn(64))
        self.checked = checked

    def forward(self, x):
        if self.checked and x.shape[-1] != self.weight.shape[0]:  # a branch on a size: fx cannot trace it
            raise ValueError("x's last dim is not the norm's")
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


@pytest.mark.parametrize("exported", [False, True], ids=["fx", "export"])
def test_an_rmsnorm_with_its_casts_is_one_region(exported, tmp_path):
    """The cast to float32 is read by the mean of squares and by x * rsqrt(.): it joins once the epilogue is taken.
    Under torch.export each cast comes with an `_assert_tensor_metadata` of what it read, a second reader that cut
    the normalisation from the cast back and the weight: export's assertions are dropped."""
    torch.manual_seed(0)
    model, x = _RMSNorm(checked=exported).to(torch.bfloat16).eval(), torch.randn(2, 8, 64, dtype=torch.bfloat16)
    extraction = _check_regions(model, [x], tmp_path, "rms")
    assert extraction.method == ("export" if exported else "fx")
    assert [r.kind for r in extraction.regions] == ["reduce"]
    graph = extraction.graph_module.graph
    assert not [n for n in graph.nodes if "assert" in str(n.target)]


class _FusedQKV(nn.Module):
    """Attention on q, k and v cut from one projection and split into heads: views with gaps, transposed."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.qkv, self.heads = nn.Linear(width, 3 * width), heads

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = (t.view(b, s, self.heads, w // self.heads).transpose(1, 2) for t in self.qkv(x).split(w, dim=-1))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, w)


def test_a_region_problem_draws_its_inputs_in_the_layout_the_model_hands_over(tmp_path):
    """q, k and v reach attention as gapped, transposed views of the projection's output: the region's problem
    draws them with those strides (a kernel is timed on the layout it meets in the model), and the same attention
    on contiguous inputs is another problem."""
    from kernelcraft.apply.instances import signature

    torch.manual_seed(0)
    extraction = _check_regions(_FusedQKV().eval(), [torch.randn(2, 16, 32)], tmp_path, "qkv")
    attention = next(r for r in extraction.regions if r.kind == "attention")
    assert [m.stride for m in attention.input_meta] == [(1536, 8, 96, 1)] * 3
    assert "(1536, 8, 96, 1)" in attention.source
    module = load_problem(tmp_path / f"{attention.name}.py").load()
    assert [x.stride() for x in module.get_inputs()] == [(1536, 8, 96, 1)] * 3
    contiguous = [m.__class__(m.shape, m.dtype, m.high) for m in attention.input_meta]
    assert signature(attention) != signature(dataclasses.replace(attention, input_meta=contiguous))


def test_python_builtins_a_forward_calls_are_not_imported():
    """fx lists `getattr` among a forward's globals where it prints `getattr(x, name, default)`; importing it from
    `builtins` made the reassembled model fail the candidate guards (ViT fp32, whose linears were all dropped)."""
    from kernelcraft.apply.extract import fx_imports
    from kernelcraft.verify.guards import static_findings

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    shape = graph.call_function(getattr, (x, "shape", None))
    graph.output(graph.call_function(torch.reshape, (x, shape)))
    code = graph.python_code("self")
    assert "getattr(" in code.src and code.globals.get("getattr") is getattr
    lines = fx_imports(code.globals, code.src)
    assert not [line for line in lines if "builtins" in line], lines
    assert not static_findings("\n".join(lines) + "\n" + code.src)
