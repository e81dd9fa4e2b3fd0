"""What a run, a bench or an apply was asked to do: the search's settings (RunConfig, with its Budget), how its
candidates are verified (VerifySpec), whom it asks for kernels (ProposerSpec, never the key), and for an apply its
own settings and output directory (ApplySpec). A RunSpec is stored with each run and bench exactly as given
(`to_dict`, JSON) and read back to resume it (`from_dict`), so a resumed run goes on with what it started with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace


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
    """What a strategy does each round and when the run must stop."""

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
    def from_dict(cls, data: dict) -> RunConfig:
        data = dict(data)
        budget = Budget(**data.pop("budget", None) or {})
        return cls(budget=budget, **_known(cls, data))


@dataclass(frozen=True)
class VerifySpec:
    """How a run's candidates are verified, as asked (the device as given: `auto` stays `auto`)."""

    device: str = "auto"
    policy: str = "strict"
    size: str = "auto"  # auto | small | full
    size_overrides: dict | None = None  # module-level constants the user set
    sizes: dict | None = None  # one problem's resolved sizes (a run's; None for a bench's or an apply's)
    compile_baseline: bool = True
    timing_budget: float = 6.0
    small: bool = False  # whether `size` came to the small sizes (kept for the stores and exports that read it)

    @classmethod
    def from_dict(cls, data: dict) -> VerifySpec:
        data = dict(data)
        if not data.get("size"):  # stores from before `size` kept `small` alone
            data["size"] = "small" if data.get("small") else "full"
        return cls(**_known(cls, data))


@dataclass(frozen=True)
class ProposerSpec:
    """Whom a run asks for kernels: the built-in engineer or a model, and how (the key is never kept)."""

    model: str = "builtin"  # PROVIDER/NAME, or builtin
    base_url: str | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float = 600.0
    max_retries: int = 4
    concurrency: int = 8

    @classmethod
    def from_dict(cls, data: dict) -> ProposerSpec:
        return cls(**_known(cls, data))


@dataclass
class RunSpec:
    """A run's or a bench's whole setting. `verify` and `proposer` are None only for runs started from Python
    without them (a test's, a benchmark's): such a run resumes with the verifier and proposer it is given."""

    run: RunConfig = field(default_factory=RunConfig)
    verify: VerifySpec | None = None
    proposer: ProposerSpec | None = None

    def to_dict(self) -> dict:
        stored: dict = {"run": self.run.to_dict()}
        if self.verify is not None:
            stored["verify"] = asdict(self.verify)
        if self.proposer is not None:
            stored["proposer"] = asdict(self.proposer)
        return stored

    @classmethod
    def from_dict(cls, data: dict) -> RunSpec:
        return cls(RunConfig.from_dict(data.get("run") or {}),
                   VerifySpec.from_dict(data["verify"]) if data.get("verify") else None,
                   ProposerSpec.from_dict(data["proposer"]) if data.get("proposer") else None)

    def copy(self, **run_changes) -> RunSpec:
        """An independent copy (a bench's run each, an apply's region each), its RunConfig changed as given."""
        run = RunConfig.from_dict(self.run.to_dict())
        return RunSpec(replace(run, **run_changes) if run_changes else run, self.verify, self.proposer)


REPLACE = ("faster", "correct")


@dataclass
class ApplySettings:
    """An apply's own settings."""

    budget_minutes: float | None = None  # the whole apply's wall time (apply/budget.py); None: each run's own limits
    min_share: float = 0.02
    seed: int = 0  # the weights the regions' problem files hold
    # which regions' kernels go into the model: "faster" than PyTorch (the product), or every "correct" one (to
    # verify the kernels in the model where they cannot be faster, as in the Triton interpreter on a CPU)
    replace: str = "faster"

    def __post_init__(self):
        if self.replace not in REPLACE:
            raise ValueError(f"replace {self.replace!r}: use one of {', '.join(REPLACE)}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ApplySpec:
    """An apply's whole setting: its region runs' RunSpec, its own settings, and where it writes."""

    spec: RunSpec
    apply: ApplySettings
    out_dir: str

    def to_dict(self) -> dict:
        return {**self.spec.to_dict(), "apply": self.apply.to_dict(), "out_dir": self.out_dir}

    @classmethod
    def from_dict(cls, data: dict) -> ApplySpec:
        return cls(RunSpec.from_dict(data), ApplySettings(**_known(ApplySettings, data.get("apply") or {})),
                   data["out_dir"])


def _known(cls, data: dict) -> dict:
    """The keys of `data` that `cls` has (a key it does not know is left out, so an older kernelcraft reads a newer
    store)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
