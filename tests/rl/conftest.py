"""What the rl tests share: RL rows made as `kernelcraft export --kind rl` writes them, scripted answers (Triton
kernels written for each of a few elementwise problems: fast, slow, wrong, broken), a CPU verifier and a Scorer.

On the CPU, Triton's interpreter runs a kernel some 300-3000 times slower than eager PyTorch, so every honest
kernel's speedup is far below the default shape's floor (0.1x) and all would score alike: these tests move the
correct band down (CPU_SHAPE), which keeps the tiers' order (the shape checks it) and makes a faster kernel's
score visibly higher."""

from __future__ import annotations

import pytest

from kernelcraft.export.rl import DATA_SOURCE
from kernelcraft.problems import load_problem
from kernelcraft.rl import RewardShape, Scorer
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from tests.helpers import close_shared

CPU_SHAPE = RewardShape(min_speedup=1e-6, speed_weight=0.05)
# the row's verifier settings, as export writes them for runs judged on the CPU at small sizes
CPU_INFO = {"backend": "triton", "device": "cpu",
            "policy": {"name": "strict", "fp32": 1e-4, "fp16_bf16": 1e-2, "allow_tf32": False},
            "small": True, "trials": 3, "timing_budget_s": 0.2, "compile_baseline": False}

# the elementwise op of each problem, in Triton; x is the loaded block
OPS = {"level1/relu": "tl.where(x < 0, 0.0, x)", "level1/sigmoid": "1.0 / (1.0 + tl.exp(-x))",
       "level1/silu": "x / (1.0 + tl.exp(-x))"}

KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def op_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, {expr}, mask=mask)


BLOCK = {block}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        op_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
'''


def kernel(problem: str, block: int = 4096, wrong: bool = False) -> str:
    """A Triton kernel for one of OPS: one program per BLOCK elements (a small BLOCK is many programs: slow in the
    interpreter), or off by 1e-3 everywhere (wrong)."""
    return KERNEL.format(expr=OPS[problem] + (" + 1e-3" if wrong else ""), block=block)


def answer(source: str, prose: str = "Here is the kernel.") -> str:
    """A model's answer holding `source` in one python block."""
    return f"{prose}\n\n```python\n{source}```\n"


def broken(problem: str) -> str:
    """A kernel file that does not parse (a def missing its colon): a build that fails."""
    return kernel(problem).replace("def forward(self, x: torch.Tensor) -> torch.Tensor:",
                                   "def forward(self, x: torch.Tensor) -> torch.Tensor")


def row(problem: str, index: int = 0, **info) -> dict:
    return {"data_source": DATA_SOURCE, "prompt": [], "ability": "kernel",
            "reward_model": {"style": "rule", "ground_truth": load_problem(problem).source},
            "extra_info": {"index": index, "problem": problem, **CPU_INFO, **info}}


def cpu_config(cache_dir) -> VerifyConfig:
    """The rows' settings as the verifier takes them (a short timing: 3 samples at least)."""
    return VerifyConfig(policy="strict", size="small", trials=3, compile_baseline=False, cache_dir=cache_dir,
                        timing=TimingConfig(budget_s=0.2, min_samples=3))


@pytest.fixture(scope="package")
def rl_verifier(tmp_path_factory):
    v = Verifier("cpu", cpu_config(tmp_path_factory.mktemp("rl-verifier")))
    yield v
    close_shared(v)


@pytest.fixture(scope="package")
def scorer(rl_verifier, tmp_path_factory):
    """A Scorer over the package's verifier, its verdict cache in a private dir."""
    with Scorer(rl_verifier, shape=CPU_SHAPE, cache_dir=tmp_path_factory.mktemp("rl-cache")) as s:
        yield s
