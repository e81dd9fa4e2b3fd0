"""A run's settings: what a strategy does each round and when the run must stop. Stored with the run
(as JSON) so that `--resume` continues with exactly the settings it started with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


@dataclass
class Budget:
    """Limits; None means none. A run stops starting new work at the first one reached and lets the
    work in flight finish (so tokens and cost may pass their limit by the calls already out)."""

    candidates: int | None = None
    tokens: int | None = None
    cost: float | None = None  # USD
    wall_s: float | None = None

    def check(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value <= 0:
                raise ValueError(f"budget {f.name} must be positive, got {value}")


@dataclass
class RunConfig:
    strategy: str = "tree"
    backend: str = "cuda_nvrtc"
    rounds: int = 5  # tree: rounds; refine: turns per chain; evolve: generations; sample: 1
    ideas: int = 4  # tree: K ideas per round
    impls: int = 2  # tree: M implementations per idea
    beam: int = 2  # tree: the top B kernels seed the next round
    samples: int = 8  # sample: N independent candidates; refine: parallel chains; evolve: children per generation
    islands: int = 1  # evolve: separate archives, the best migrating between them every few generations
    concurrency: int = 8  # proposer calls in flight
    seed: int = 0  # evolve's sampling
    seeds: list[str] = field(default_factory=list)  # the user's starting kernels (sources)
    stop_after_failures: int = 3  # proposer calls failing in a row (no answer between them) that stop the run
    profile: bool = False  # Nsight Compute's counters for each round's best kernels, in their feedback
    budget: Budget = field(default_factory=Budget)

    def check(self) -> None:
        for name in ("rounds", "ideas", "impls", "beam", "samples", "islands", "concurrency", "stop_after_failures"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        self.budget.check()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        data = dict(data)
        budget = Budget(**data.pop("budget", {}))
        known = {f.name for f in fields(cls)}
        return cls(budget=budget, **{k: v for k, v in data.items() if k in known})
