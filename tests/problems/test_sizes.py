"""Problem sizes: parsing --sizes, resolving full / SMALL_SIZES / derived / user sizes, and deriving
CPU sizes for upstream KernelBench files that have no SMALL_SIZES."""

from __future__ import annotations

import time

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.problems.cost import compute_cost
from kernelcraft.problems.sizes import (BYTES_BUDGET, FLOPS_BUDGET, Sizes, derive_sizes, parse_sizes,
                                        resolve_sizes)
from kernelcraft.verify import VerifyConfig
from tests.helpers import KERNELBENCH

needs_kernelbench = pytest.mark.skipif(not KERNELBENCH.is_dir(), reason=f"no KernelBench copy at {KERNELBENCH}")


def upstream(name: str):
    return load_problem(KERNELBENCH / name)


# -- parsing --------------------------------------------------------------------------------------------

def test_parse_ints_tuples_and_lists():
    assert parse_sizes("batch_size=16, dim=4096") == {"batch_size": 16, "dim": 4096}
    assert parse_sizes("input_shape=(128,4096),n=2") == {"input_shape": (128, 4096), "n": 2}
    assert parse_sizes("input_shape=(64,)") == {"input_shape": (64,)}
    assert parse_sizes("layers=[1, 2]") == {"layers": [1, 2]}


@pytest.mark.parametrize("text, words", [
    ("batch_size", "'batch_size' is not NAME=VALUE"),
    ("batch_size=16,=4", "'=4' is not NAME=VALUE"),
    ("dim=4096.5", "'dim=4096.5': the value must be an integer"),
    ("dim=big", "'dim=big': the value must be an integer"),
    ("dim=(1,x)", "'dim=(1,x)'"),
    ("dim=0", "'dim=0': sizes must be positive"),
    ("dim=True", "'dim=True': the value must be an integer"),
    ("dim=2,dim=3", "dim is given twice"),
    ("", "give NAME=VALUE pairs"),
])
def test_parse_errors_name_the_bad_item(text, words):
    with pytest.raises(ValueError, match="--sizes") as err:
        parse_sizes(text)
    assert words in str(err.value)


# -- resolving ------------------------------------------------------------------------------------------

def test_modes_on_a_suite_problem():
    p = load_problem("level1/relu")
    assert resolve_sizes(p, "auto", "cuda").source == "full"
    assert resolve_sizes(p, "auto", "cuda").constants == {}
    small = resolve_sizes(p, "auto", "cpu")
    assert (small.source, small.constants) == ("SMALL_SIZES", {"batch_size": 37, "dim": 1000})
    assert small.describe() == "SMALL_SIZES" and resolve_sizes(p, "full", "cpu").describe() == "full sizes"
    with pytest.raises(ValueError, match="size mode 'tiny'"):
        resolve_sizes(p, "tiny", "cpu")


def test_user_overrides_win_and_unknown_names_are_errors():
    p = load_problem("level1/relu")
    sizes = resolve_sizes(p, "small", "cpu", {"batch_size": 3})
    assert sizes.source == "SMALL_SIZES+user"
    assert sizes.constants == {"batch_size": 3, "dim": 1000}
    assert tuple(p.load(sizes=sizes).get_inputs()[0].shape) == (3, 1000)
    assert resolve_sizes(p, "full", "cuda", {"dim": 8}).describe() == "full+user sizes dim=8 (full: 16384)"
    with pytest.raises(ValueError) as err:
        resolve_sizes(p, "small", "cpu", {"batch": 3})
    assert str(err.value) == "no module-level constant 'batch' in level1/relu; it has: batch_size, dim"
    lenient = resolve_sizes(p, "full", "cpu", {"batch": 3}, strict=False)  # bench: left out where undefined
    assert (lenient.source, lenient.constants) == ("full", {})


def test_sizes_key_follows_the_constants_only():
    a = Sizes({"dim": 64}, "derived", {"dim": 4096})
    assert a.key() == Sizes({"dim": 64}, "full+user", {"dim": 4096}).key()
    assert a.key() != Sizes({"dim": 32}, "derived", {"dim": 4096}).key() != Sizes({}, "full").key()
    assert a.to_dict() == {"source": "derived", "constants": {"dim": 64}, "full": {"dim": 4096}}


def test_verify_config_sizes_default_to_auto_and_accept_small():
    assert (VerifyConfig().size, VerifyConfig().sizes) == ("auto", None)  # small on the CPU, full on a GPU
    assert VerifyConfig(small=True).size == "small" and VerifyConfig(small=False).size == "full"


def test_constants_computed_from_others_follow_them(tmp_path):
    path = tmp_path / "biased.py"
    path.write_text("import torch\nimport torch.nn as nn\n\nchannels = 64\nheight = width = 32\n"
                    "bias_shape = (channels, 1, 1)\n\nclass Model(nn.Module):\n"
                    "    def __init__(self, shape):\n        super().__init__()\n"
                    "        self.bias = nn.Parameter(torch.zeros(shape))\n"
                    "    def forward(self, x):\n        return x + self.bias\n\n"
                    "def get_inputs():\n    return [torch.rand(2, channels, height, width)]\n\n"
                    "def get_init_inputs():\n    return [bias_shape]\n")
    module = load_problem(path).load(sizes={"channels": 4, "width": 8})
    assert module.bias_shape == (4, 1, 1) and (module.height, module.width) == (32, 8)
    assert compute_cost(module).outputs[0].shape == (2, 4, 32, 8)


# -- deriving -------------------------------------------------------------------------------------------

@needs_kernelbench
@pytest.mark.parametrize("name", ["level1/19_ReLU.py", "level1/40_LayerNorm.py",
                                  "level1/1_Square_matrix_multiplication_.py",
                                  "level1/63_conv_standard_2D__square_input__square_kernel.py",
                                  "level1/100_HingeLoss.py",  # batch and shape must shrink together
                                  "level2/1_Conv2D_ReLU_BiasAdd.py"])
def test_derived_sizes_fit_the_budget_and_run_fast_on_the_cpu(name):
    p = upstream(name)
    full = compute_cost(p.load())
    assert full.bytes > BYTES_BUDGET or full.flops > FLOPS_BUDGET  # each is over budget as published
    sizes = resolve_sizes(p, "auto", "cpu")
    assert sizes.source == "derived" and sizes.note == "" and sizes.constants
    assert all(sizes.constants[n] != sizes.full[n] for n in sizes.constants)
    assert sizes.describe().startswith("derived sizes ") and "(full: " in sizes.describe()
    module = p.load(sizes=sizes)
    cost = compute_cost(module)
    assert cost.bytes <= BYTES_BUDGET and cost.flops <= FLOPS_BUDGET
    start = time.perf_counter()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    with torch.no_grad():
        model(*module.get_inputs())
    assert time.perf_counter() - start < 0.5


@needs_kernelbench
def test_derivation_on_the_relu_halves_the_largest_first():
    sizes = derive_sizes(upstream("level1/19_ReLU.py"))
    assert sizes.constants == {"dim": 192, "batch_size": 256}
    assert sizes.describe() == "derived sizes dim=192, batch_size=256 (full: 393216, 4096)"
    assert derive_sizes(upstream("level1/19_ReLU.py")) is sizes  # once per problem in a process


@needs_kernelbench
def test_a_problem_that_cannot_come_down_says_so():
    # AlexNet's first conv: the 224x224 image is written into get_inputs, so only the batch can shrink.
    sizes = derive_sizes(upstream("level1/50_conv_standard_2D__square_input__square_kernel.py"))
    assert sizes.constants == {"batch_size": 1}
    assert "over the CPU budget still" in sizes.note and sizes.note in sizes.describe()


@needs_kernelbench
def test_overrides_on_derived_sizes():
    p = upstream("level1/19_ReLU.py")
    sizes = resolve_sizes(p, "auto", "cpu", {"batch_size": 5})
    assert sizes.source == "derived+user" and sizes.constants == {"dim": 192, "batch_size": 5}
    assert tuple(p.load(sizes=sizes).get_inputs()[0].shape) == (5, 192)
    assert p.load(small=True).dim == 192  # load(small=True) derives where there are no SMALL_SIZES
