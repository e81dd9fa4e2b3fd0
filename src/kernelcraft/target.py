"""What a kernel for a problem is aiming at, before any candidate is judged: the sizes that are timed, the baselines
(PyTorch eager and torch.compile) and the roofline floor. A shared noun: the verifier measures it
(verify/target.py), proposers read it (their first request states it), exports carry it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kernelcraft.result import Timing


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
