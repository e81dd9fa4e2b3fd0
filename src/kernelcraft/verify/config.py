"""How the verifier is set up (`VerifyConfig`): the policy, trials, sizes, baselines, timing, workers, the hardening
layers and the limits; every face builds one and the supervisor of each device reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelcraft.verify.containment import Limits
from kernelcraft.verify.timing import TimingConfig

WORKER_STARTS = ("spawn", "fork")


@dataclass
class VerifyConfig:
    policy: str = "strict"
    trials: int = 6  # one per input distribution
    # Problem sizes: "full"; "small" (a problem's SMALL_SIZES, else sizes derived from its cost); "auto":
    # small on the CPU, full on a GPU. `sizes` sets module-level constants on top, in every problem that
    # defines them (a name a problem does not define is noted on its results).
    size: str = "auto"
    sizes: dict | None = None
    small: bool | None = None  # older spelling: True is size="small", False is size="full"
    compile_baseline: bool = True
    timing: TimingConfig = field(default_factory=TimingConfig)
    load_timeout: float = 300.0
    run_timeout: float = 60.0
    baseline_timeout: float = 600.0
    # Workers spawned ahead on a GPU, so a start-up (torch import, CUDA init) overlaps work. None on
    # the CPU: a start-up there would share the cores with the timing. 3: one actor on an H100 judged 31.4 and 31.5
    # candidates a minute with 3, 29.2 and 29.9 with 2, passes alternating (scale-standby-h100-2026-11-27.json).
    standby_workers: int = 3
    # How a worker starts: "fork" (from a fork server that imported torch and Triton once: verify/forkserver.py;
    # ready in 1.9 s instead of 3.2 with 4 GPUs' workers starting at once, 0.03 s instead of 3 on a CPU) or
    # "spawn" (a new interpreter that imports torch itself). Fork falls back to spawn if its server fails.
    worker_start: str = "fork"
    cache_dir: Path = Path.home() / ".cache" / "kernelcraft"
    # hardening
    static_guards: bool = True  # read the source for forbidden moves before running it
    determinism: bool = True  # the same inputs twice must give the same outputs
    attribution: bool = True  # which kernels ran (profiler on a GPU, Triton launch counts on the CPU)
    clock_check: bool = True  # the supervisor's own clock over back-to-back calls
    sandbox: bool = True  # namespaces (no network, harness read-only, trusted caches hidden) where the OS allows
    harness_check: bool = True  # the harness's files unchanged on disk after each evaluation (verify/integrity.py)
    allow_library: bool = True  # library (ATen, cuBLAS…) kernels may run beside the candidate's own
    sanity_bound: float = 10.0  # speedups over eager beyond this are flagged for review
    gpu_memory_fraction: float = 0.6  # of the GPU, for the worker's caching allocator (more if a problem needs it)
    device_lock: bool = True  # timing phases on one device never overlap, across processes
    baseline_drift: float = 0.15  # eager beside the candidate this far from the baseline: measure it again
    # Intra-op threads of a CPU worker (None: torch's default, every core). One: on a small shared
    # machine a thread pool's wake-ups made eager's CV 2-3 (benchmarks/cpu_timing_noise.py).
    cpu_threads: int | None = 1
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self):
        if self.small is not None:
            self.size, self.small = ("small" if self.small else "full"), None
        if self.worker_start not in WORKER_STARTS:
            raise ValueError(f"worker_start must be one of {WORKER_STARTS}, not {self.worker_start!r}")
