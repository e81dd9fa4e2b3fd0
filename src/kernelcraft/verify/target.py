"""What a kernel for a problem is aiming at, before any candidate is judged: the sizes that are timed, the
baselines (PyTorch eager and torch.compile) and the roofline floor. A proposer's first request states them;
later ones measure every kernel against the same baseline.

The baselines are the ones candidates are compared with (the same cache key, measured the same way in a
worker that loaded no candidate code), so measuring them here costs nothing the first evaluation would
not have spent.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass

import torch

from kernelcraft import hardware
from kernelcraft.problems import Problem
from kernelcraft.problems.cost import Cost, uses_tensor_cores
from kernelcraft.result import Result, Timing
from kernelcraft.verify.baselines import BaselineStore


@dataclass
class Floor:
    """The roofline floor: no kernel can take less time on this device."""

    ms: float
    bound: str  # "memory" or "compute": which of the two times is the larger
    bytes: int
    flops: int
    math: str  # the arithmetic rate assumed: fp32, tf32 or fp16
    rate: float  # bytes/s for a memory bound, FLOP/s for a compute bound (datasheet ceilings)


@dataclass
class Target:
    problem: str
    device: str  # the device's name ("NVIDIA H100 80GB HBM3", "cpu")
    sizes: str  # Sizes.describe(): full sizes, SMALL_SIZES, or the derived ones
    inputs: list[dict]  # [{shape, dtype}] of the forward's inputs at those sizes
    eager: Timing | None
    compiled: Timing | None
    floor: Floor | None  # None where the device has no known ceilings (a CPU, an unknown GPU)
    notes: list[str]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Target":
        timing = lambda t: Timing(**t) if t else None  # noqa: E731
        return cls(d["problem"], d["device"], d["sizes"], d["inputs"], timing(d.get("eager")),
                   timing(d.get("compiled")), Floor(**d["floor"]) if d.get("floor") else None, d.get("notes") or [])

    def summary(self) -> str:
        """One line: "eager 1.43 ms, torch.compile 1.1 ms, roofline floor 0.641 ms (full sizes)"."""
        parts = [f"eager {self.eager.cost_ms:.4g} ms" if self.eager else "no eager baseline"]
        parts += [f"torch.compile {self.compiled.cost_ms:.4g} ms"] if self.compiled else []
        parts += [f"roofline floor {self.floor.ms:.4g} ms ({self.floor.bound}-bound)"] if self.floor else []
        return ", ".join(parts) + f" ({self.sizes})"


def baseline_key(sup, problem: Problem) -> str:
    """The baseline cache key of a problem as a supervisor runs it (device, torch, policy, sizes)."""
    return BaselineStore.key(problem.sha, sup.device_name, torch.__version__,
                             sup.policy.name + ("" if sup.policy.allow_tf32 else "/exact-fp32"),
                             sup.plan(problem).sizes)


def floor(spec: hardware.DeviceSpec | None, cost: Cost, allow_tf32: bool) -> Floor | None:
    if spec is None:
        return None
    # half-precision math where the inputs or the matmuls' operands are half (a bf16 model fed token ids: its inputs
    # are integers, its weights bf16; its floor at the fp32 rate was 5.5x too high, and flagged honest kernels)
    math = "fp16" if uses_tensor_cores(cost) or any(s.dtype in (torch.float16, torch.bfloat16) for s in cost.inputs) \
        else ("tf32" if allow_tf32 and cost.matmul_flops else "fp32")
    rate = {"fp32": spec.fp32, "tf32": spec.tf32, "fp16": spec.fp16}[math]
    compute_s, memory_s = cost.flops / rate, cost.bytes / spec.bandwidth
    bound = "compute" if compute_s > memory_s else "memory"
    seconds = hardware.roofline_seconds(spec, cost.flops, cost.bytes, math)
    return Floor(round(seconds * 1e3, 6), bound, cost.bytes, cost.flops, math,
                 rate if bound == "compute" else spec.bandwidth)


def measure(sup, problem: Problem, unlocked=contextlib.nullcontext) -> Target:
    """The target of `problem` on a supervisor's device: cached baselines, or measured now (the caller
    holds the supervisor's lock; `unlocked` releases it for the baseline worker's start and compilation).
    Raises ProblemTooLarge where the device cannot hold the problem."""
    from kernelcraft.verify import speed  # speed imports this module

    ref = sup.plan(problem)
    key = baseline_key(sup, problem)
    notes: list[str] = []
    cached = sup.baselines.get(key, notes)
    if cached is None or (sup.config.compile_baseline and cached[1] is None):
        scratch = Result(problem.name, "(baselines)", "torch", device=sup.device_name, policy=sup.policy.name)
        cached = speed.fresh_baselines(sup, problem, key, scratch, unlocked)
        notes.extend(scratch.notes)
    inputs = [{"shape": list(s.shape), "dtype": str(s.dtype).removeprefix("torch.")} for s in ref.cost.inputs]
    return Target(problem.name, sup.device_name, ref.sizes.describe(), inputs, cached[0], cached[1],
                  floor(sup.spec, ref.cost, sup.policy.allow_tf32), notes)
