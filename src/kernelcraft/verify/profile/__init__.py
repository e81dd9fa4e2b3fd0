"""Hardware counters for one call of a candidate: Nsight Compute run in a subprocess (ncu.py, target.py,
runner.py) and its counters summarised, ranked and put in words (summary.py)."""

from kernelcraft.verify.profile.ncu import ENVIRONMENT, REASONS, ProfileError, find_ncu
from kernelcraft.verify.profile.runner import Profiler, check_device
from kernelcraft.verify.profile.summary import KernelSummary, Profile, render, summarize

__all__ = ["ENVIRONMENT", "REASONS", "KernelSummary", "Profile", "ProfileError", "Profiler", "check_device",
           "find_ncu", "render", "summarize"]
