"""A problem's target (kernelcraft/target.py: the sizes that are timed, the baselines, PyTorch eager and
torch.compile, and the roofline floor): the baselines' cache key and the roofline floor. speed.measure_target
measures the whole of it before any candidate is judged; a proposer's first request states it, and later ones
measure every kernel against the same baseline.

The baselines are the ones candidates are compared with (the same cache key, measured the same way in a
worker that loaded no candidate code), so measuring them here costs nothing the first evaluation would
not have spent.
"""

from __future__ import annotations

import torch

from kernelcraft import hardware
from kernelcraft.problems import Problem
from kernelcraft.problems.cost import Cost, uses_tensor_cores
from kernelcraft.target import Floor
from kernelcraft.verify.baselines import BaselineStore


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
