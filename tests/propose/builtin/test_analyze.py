"""What analyze() reads out of a reference: the suite's covered level-1 problems, hand-written variants, and
references it must decline (with the reason) without raising."""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn.functional as F

from kernelcraft.problems import Problem, load_problem, suite_names
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.plan import UNARY, WITH_PARAMS, Own
from tests.helpers import FIXTURES, KERNELBENCH

SUITE = {
    "relu": ("elementwise", {"steps": [["relu"]]}),
    "gelu": ("elementwise", {"steps": [["gelu"]]}),
    "elu": ("elementwise", {"steps": [["elu", "self.alpha"]]}),  # forward reads the numbers from the module
    "leaky_relu": ("elementwise", {"steps": [["leaky_relu", "self.negative_slope"]]}),
    "hardtanh": ("elementwise", {"steps": [["hardtanh", "self.min_val", "self.max_val"]]}),
    "sigmoid": ("elementwise", {"steps": [["sigmoid"]]}),
    "silu": ("elementwise", {"steps": [["silu"]]}),
    "softplus": ("elementwise", {"steps": [["softplus", 1.0, 20.0]]}),
    "tanh": ("elementwise", {"steps": [["tanh"]]}),
    "softmax": ("softmax", {"dim": 1}),
    "log_softmax": ("log_softmax", {"dim": 1}),
    "layernorm": ("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"}),
    "rmsnorm": ("rmsnorm", {"eps": 1e-6, "eps_attr": "eps", "weight": "weight"}),
    "sum_dim": ("reduce", {"op": "sum", "dim": -1, "dim_attr": "dim", "keepdim": False}),
    "mean_dim": ("reduce", {"op": "mean", "dim": 1, "dim_attr": "dim", "keepdim": False}),
    "max_dim": ("reduce", {"op": "max", "dim": 1, "dim_attr": "dim", "keepdim": False}),
}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_covered_suite_problems_give_their_single_op(name):
    analysis = analyze(load_problem(f"level1/{name}"))
    op = analysis.single
    assert op is not None, analysis
    assert (op.kind, op.detail) == SUITE[name]
    assert analysis.n_inputs == 1


MATMUL_SUITE = {"matmul": (False, False), "matmul_rectangular": (False, False), "matmul_small_k": (False, False),
                "matmul_transposed_a": (True, False), "matmul_fp16": (False, False), "bmm": (False, False),
                "matvec": (False, False)}


@pytest.mark.parametrize("name", sorted(MATMUL_SUITE))
def test_suite_matmuls_are_one_matmul_over_two_inputs(name):
    analysis = analyze(load_problem(f"level1/{name}"))
    ta, tb = MATMUL_SUITE[name]
    assert analysis.single is not None, analysis
    dtype = "float16" if name == "matmul_fp16" else "float32"  # the moves offered depend on it
    assert (analysis.single.kind, analysis.single.detail) == ("matmul", {"trans_a": ta, "trans_b": tb, "dtype": dtype})
    assert analysis.n_inputs == 2


def test_an_uncovered_problem_says_what_is_missing():
    analysis = analyze(load_problem(FIXTURES / "problems" / "spectrum.py"))
    assert analysis.single is None and analysis.error is None
    assert analysis.unsupported == ["fft_rfft", "abs"] and analysis.n_inputs == 1  # abs: of what it lost track of


def test_level2_problems_are_single_where_a_family_fuses_them_else_chains():
    names = [n for n in suite_names() if n.startswith("level2/")]
    assert names
    for name in names:
        analysis = analyze(load_problem(name))
        fused = {"level2/conv2d_relu_maxpool": "conv2d",  # conv, relu epilogue, max-pool: one pooled conv
                 "level2/gemm_gelu_scale": "linear",  # linear with a gelu-and-scale epilogue
                 "level2/layernorm_gelu": "layernorm",  # layernorm with a gelu epilogue
                 "level2/conv_transpose2d_tanh": "conv_transpose2d",  # transposed conv with a tanh epilogue
                 "level2/conv2d_batchnorm_relu": "conv2d",  # conv, eval batchnorm and relu folded in
                 "level2/conv2d_add_sigmoid": "conv2d",  # conv, + a per-channel parameter and sigmoid folded in
                 "level2/gemm_relu_add_bias": "linear"}  # linear, relu and + a per-column parameter folded in
        if name in fused:
            assert analysis.single is not None and analysis.single.kind == fused[name], analysis
            continue
        assert analysis.single is None, name
        assert analysis.chain is not None, (name, analysis)  # the others: chains


# -- hand-written references ------------------------------------------------------------------------------

def write(tmp_path, forward: str, init: str = "", inputs: str = "[torch.randn(4, 8)]", args: str = "x"):
    """A KernelBench-format problem file whose forward body is `forward`."""
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
        {init}
            def forward(self, {args}):
        {forward}


        def get_inputs():
            return {inputs}


        def get_init_inputs():
            return []
        """).format(init=textwrap.indent(textwrap.dedent(init), " " * 8), args=args, inputs=inputs,
                    forward=textwrap.indent(textwrap.dedent(forward), " " * 8))
    path = tmp_path / "problem.py"
    path.write_text(source)
    return load_problem(path)


def single(tmp_path, forward: str, init: str = ""):
    analysis = analyze(write(tmp_path, forward, init))
    assert analysis.single is not None, analysis
    return analysis.single


_PLAIN = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "gelu": F.gelu,
          "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "exp": torch.exp, "log": torch.log,
          "abs": torch.abs, "neg": torch.neg, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "square": torch.square}
_PARAM = {"elu": F.elu, "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh, "clamp": torch.clamp,
          "softplus": F.softplus, "add": torch.add, "sub": torch.sub, "rsub": lambda x, c: c - x,
          "mul": torch.mul, "div": torch.div, "rdiv": lambda x, c: c / x, "pow": torch.pow}


_OWN = {"tadd": torch.add, "tsub": torch.sub, "trsub": lambda x, o: o - x, "tmul": torch.mul, "tdiv": torch.div,
        "trdiv": lambda x, o: o / x, "tmin": torch.minimum, "tmax": torch.maximum}


def run_steps(steps, x):
    """The IR's meaning of an elementwise chain, for checking it against the reference: tensor steps may read the
    chain's own value after k steps, with a scalar branch of it (plan.Own)."""
    values = []
    for name, *params in steps:
        values.append(x)
        if name in _OWN:
            own = Own.of(params[0])
            x = _OWN[name](x, run_steps(own.branch, values[own.k]))
            continue
        assert name in UNARY and not params or WITH_PARAMS.get(name) == len(params), (name, params)
        x = _PLAIN[name](x) if name in _PLAIN else _PARAM[name](x, *params)
    return x


@pytest.mark.parametrize("forward, steps", [
    ("return torch.relu(x * 2.0) - 1.0", [["mul", 2.0], ["relu"], ["sub", 1.0]]),
    ("return 3.0 / (2 - x.pow(3)).abs().clamp(min=0.5)",
     [["pow", 3.0], ["rsub", 2.0], ["abs"], ["clamp", 0.5, None], ["rdiv", 3.0]]),
    ("return F.gelu(-x, approximate='tanh').clamp_max(4) + 1", [["neg"], ["gelu_tanh"], ["clamp", None, 4.0],
                                                                 ["add", 1.0]]),
    ("return torch.sigmoid(x) * x", [["silu"]]),
    # tensor + tensor: two chains of x, the second a scalar branch of x that the first computes beside itself
    ("return (x * x) / 4 + x.abs().sqrt().mul(0)",
     [["square"], ["div", 4.0], ["tadd", ("step", 0, (("abs",), ("sqrt",), ("mul", 0.0)))]]),
])
def test_elementwise_chains_fuse_into_one_op_that_means_the_same(tmp_path, forward, steps):
    problem = write(tmp_path, forward)
    analysis = analyze(problem)
    assert analysis.single.kind == "elementwise" and analysis.single.detail["steps"] == steps
    module = problem.load(small=True)
    x = torch.randn(4, 8)
    torch.testing.assert_close(run_steps(steps, x), module.Model()(x), equal_nan=True)


def test_module_hyper_parameters_come_from_the_instance(tmp_path):
    op = single(tmp_path, "return self.act(x)", "self.act = nn.ELU(alpha=0.5)")
    assert op.detail["steps"] == [["elu", 0.5]]
    op = single(tmp_path, "return self.b(self.a(x))", "self.a = nn.GELU(approximate='tanh')\n"
                                                      "self.b = nn.Softplus(beta=2, threshold=10)")
    assert op.detail["steps"] == [["gelu_tanh"], ["softplus", 2.0, 10.0]]


@pytest.mark.parametrize("forward, init", [("return x.softmax(0)", ""), ("return F.softmax(x, dim=0)", ""),
                                           ("return self.sm(x)", "self.sm = nn.Softmax(dim=0)")])
def test_softmax_over_dim_0(tmp_path, forward, init):
    op = single(tmp_path, forward, init)
    assert (op.kind, op.detail) == ("softmax", {"dim": 0})


def test_log_softmax_keeps_a_negative_dim(tmp_path):
    op = single(tmp_path, "return self.ls(x)", "self.ls = nn.LogSoftmax(dim=-1)")
    assert (op.kind, op.detail) == ("log_softmax", {"dim": -1})


def test_sum_with_keepdim_and_a_literal_dim_has_no_dim_attr(tmp_path):
    # self.k equals the dim but forward does not read it: the dim is the literal, not the attribute
    op = single(tmp_path, "return x.sum(1, keepdim=True)", "self.k = 1")
    assert (op.kind, op.detail) == ("reduce", {"op": "sum", "dim": 1, "dim_attr": None, "keepdim": True})


@pytest.mark.parametrize("forward, detail", [
    ("return torch.max(x, 1)[0]", {"op": "max", "dim": 1, "dim_attr": None, "keepdim": False}),
    ("return torch.amin(x, dim=(0,), keepdim=True)", {"op": "min", "dim": 0, "dim_attr": None, "keepdim": True}),
    ("return torch.mean(x)", {"op": "mean", "dim": None, "dim_attr": None, "keepdim": False}),
])
def test_reduction_spellings(tmp_path, forward, detail):
    assert single(tmp_path, forward).detail == detail


def test_max_indices_are_an_argmax(tmp_path):  # more spellings: families/argreduce/test_analyze.py
    op = single(tmp_path, "return torch.max(x, dim=1).indices")
    assert (op.kind, op.detail) == ("argreduce", {"op": "argmax", "dim": 1, "dim_attr": None, "keepdim": False})


def test_layernorm_without_affine(tmp_path):
    op = single(tmp_path, "return self.norm(x)", "self.norm = nn.LayerNorm(8, eps=1e-3, elementwise_affine=False)")
    assert (op.kind, op.detail) == ("layernorm", {"ndim": 1, "eps": 1e-3, "weight": None, "bias": None})


def test_functional_layer_norm_with_a_weight_parameter(tmp_path):
    op = single(tmp_path, "return F.layer_norm(x, (8,), self.g, None, 1e-6)", "self.g = nn.Parameter(torch.ones(8))")
    assert (op.kind, op.detail) == ("layernorm", {"ndim": 1, "eps": 1e-6, "weight": "g", "bias": None})


@pytest.mark.parametrize("forward, weight", [
    ("return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.scale", "scale"),
    ("return self.scale * (x * torch.rsqrt(torch.mean(x * x, -1, keepdim=True) + self.eps))", "scale"),
    ("return x * (1.0 / torch.sqrt(self.eps + (x ** 2).mean(-1, keepdim=True)))", None),
])
def test_rmsnorm_written_by_hand(tmp_path, forward, weight):
    op = single(tmp_path, forward, "self.eps = 1e-5\nself.scale = nn.Parameter(torch.ones(8))")
    assert (op.kind, op.detail) == ("rmsnorm", {"eps": 1e-5, "eps_attr": "eps", "weight": weight})


def test_a_mean_of_squares_that_is_not_an_rmsnorm_is_its_parts(tmp_path):
    analysis = analyze(write(tmp_path, "return x.pow(2).mean(-1, keepdim=True) + 1.0"))
    assert [op.kind for op in analysis.chain] == ["reduce", "elementwise"]  # the square the mean's prologue
    assert analysis.ops[0].detail["pre"] == [["square"]]
    assert analysis.single is None and [op.src for op in analysis.ops] == ["x", 0]


MM_2D = "[torch.randn(4, 8), torch.randn(8, 3)]"
MM_3D = "[torch.randn(2, 4, 8), torch.randn(2, 8, 3)]"


@pytest.mark.parametrize("forward, inputs, trans", [
    ("return a @ b", MM_3D, (False, False)),  # a 3-D bmm written with @
    ("return torch.bmm(a, b.transpose(1, 2))", "[torch.randn(2, 4, 8), torch.randn(2, 3, 8)]", (False, True)),
    ("return a.mT.matmul(b)", "[torch.randn(2, 8, 4), torch.randn(2, 8, 3)]", (True, False)),
    ("return torch.mm(a, b)", MM_2D, (False, False)),
    ("return a.t() @ b.T", "[torch.randn(8, 4), torch.randn(3, 8)]", (True, True)),
    ("return torch.matmul(a.transpose(-2, -1), b)", "[torch.randn(8, 4), torch.randn(8, 3)]", (True, False)),
    ("return torch.matmul(a.transpose(0, 1).contiguous(), b)", "[torch.randn(8, 4), torch.randn(8, 3)]",
     (True, False)),
    ("return a.T.T @ b", MM_2D, (False, False)),
])
def test_matmul_spellings(tmp_path, forward, inputs, trans):
    problem = write(tmp_path, forward, inputs=inputs, args="a, b")
    analysis = analyze(problem)
    assert analysis.single is not None, analysis
    assert (analysis.single.kind, analysis.single.detail) == \
        ("matmul", {**dict(zip(("trans_a", "trans_b"), trans)), "dtype": "float32"})
    assert analysis.n_inputs == 2
    module = problem.load(small=True)
    inputs = module.get_inputs()
    a, b = (t.transpose(-2, -1) if flip else t for t, flip in zip(inputs, trans))
    torch.testing.assert_close(module.Model()(*inputs), a @ b)  # the flags mean what the reference computes


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_a_matmul_names_its_inputs_dtype(tmp_path, dtype):
    problem = write(tmp_path, "return a @ b", inputs=f"[torch.randn(8, 4, dtype=torch.{dtype}), "
                    f"torch.randn(4, 3, dtype=torch.{dtype})]", args="a, b")
    assert analyze(problem).single.detail == {"trans_a": False, "trans_b": False, "dtype": dtype}


@pytest.mark.parametrize("forward, inputs", [
    ("return b @ a", "[torch.randn(3, 4), torch.randn(4, 3)]"),  # operands swapped
    ("return a.transpose(0, 1) @ b", "[torch.randn(4, 2, 8), torch.randn(2, 8, 3)]"),  # batch dim swapped
    ("return a @ b", "[torch.randn(4, 8), torch.randn(2, 8, 3)]"),  # B's batch broadcast over a 2-D A
    ("return a @ b", "[torch.randn(4, 8), torch.randn(8)]"),  # a vector
])
def test_matmuls_not_covered(tmp_path, forward, inputs):
    analysis = analyze(write(tmp_path, forward, inputs=inputs, args="a, b"))
    assert analysis.single is None and analysis.error is None and analysis.unsupported


def test_matmul_is_not_covered(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(x) @ y", inputs="[torch.randn(4, 8), torch.randn(8, 3)]",
                             args="x, y"))
    assert analysis.single is None and "matmul" in analysis.unsupported and analysis.n_inputs == 2
    assert [op.detail for op in analysis.ops] == [{"steps": [["relu"]]}]  # the covered part is still listed


def test_ops_on_another_input_read_it(tmp_path):
    analysis = analyze(write(tmp_path, "return torch.relu(y)", inputs="[torch.randn(4), torch.randn(4)]",
                             args="x, y"))
    assert analysis.single is None and [(op.kind, op.src) for op in analysis.chain] == [("elementwise", ("input", 1))]


def test_data_dependent_control_flow_is_an_error_not_a_crash(tmp_path):
    analysis = analyze(write(tmp_path, "if x.sum() > 0:\n    return x\nreturn -x"))
    assert analysis.error and analysis.single is None and analysis.ops == []


def test_a_failing_constructor_is_an_error(tmp_path):
    analysis = analyze(write(tmp_path, "return x", "raise RuntimeError('no')"))
    assert analysis.error == "RuntimeError: no" and analysis.single is None


@pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(), reason="no KernelBench copy")
def test_an_upstream_file_is_read_at_its_derived_sizes(monkeypatch):
    # KernelBench's matrix-vector product has no SMALL_SIZES, and its A is 2048 x 1048576 (8.6 GB): the
    # analysis (which draws the inputs to read their shapes) must build it at the sizes derived for a CPU.
    problem = load_problem(KERNELBENCH / "level1" / "4_Matrix_vector_multiplication_.py")
    loaded = []
    real_load = Problem.load
    monkeypatch.setattr(Problem, "load", lambda self, *a, **k: loaded.append(real_load(self, *a, **k)) or loaded[-1])
    analysis = analyze(problem)
    assert analysis.error is None and [op.kind for op in analysis.ops] == ["matmul"]
    assert (loaded[-1].M, loaded[-1].K) == (256, 256)


RMS = """\
h = x.to(torch.float32)
h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
return self.weight * h.to(x.dtype)
"""


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_float_casts_inside_fp32_math_are_read(dtype, tmp_path):
    """An RMSNorm as transformers writes it, in the model's dtype: the cast to float32 is the identity of the kernels'
    fp32 math, the cast back a rounding step (none in float32), then the weight."""
    problem = write(tmp_path, RMS, f"self.weight = nn.Parameter(torch.ones(64, dtype=torch.{dtype}))",
                    inputs=f"[torch.randn(4, 64, dtype=torch.{dtype})]")
    analysis = analyze(problem)
    assert not analysis.unsupported, analysis.unsupported
    steps = [s for op in analysis.ops for s in op.detail.get("steps", ())]
    rounding = {"float16": [["round_fp16"]], "bfloat16": [["round_bf16"]], "float32": []}[dtype]
    assert [list(s) for s in steps if s[0].startswith("round")] == rounding


@pytest.mark.parametrize("forward, inputs, why", [
    ("return x.float() * 2", "[torch.randn(4, 8, dtype=torch.float16)]", "changes the output's dtype"),
    ("return (x.to(torch.float32) * 2).to(torch.float16)", "[torch.randn(4, 8, dtype=torch.float64)]",
     "other than float16, bfloat16 or float32"),
    ("return x.to('cpu', torch.float16)", "[torch.randn(4, 8)]", "to"),
])
def test_a_cast_the_kernels_cannot_honour_is_not_covered(forward, inputs, why, tmp_path):
    analysis = analyze(write(tmp_path, forward, inputs=inputs))
    assert any(why in u for u in analysis.unsupported), analysis.unsupported
