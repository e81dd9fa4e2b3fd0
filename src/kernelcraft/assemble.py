"""A search's pieces put together from its settings (SearchSettings, the options every face takes): the RunSpec
stored with the run, the proposer (the built-in engineer or a model), the verifier. The policy lives here (which
strategies and backends the built-in engineer takes, the backend a run defaults to, what a resumed run keeps), so
every face assembles runs alike."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from kernelcraft.errors import ConfigError
from kernelcraft.spec import Budget, ProposerSpec, RunConfig, RunSpec, VerifySpec

BUILTIN = "builtin"


@dataclass
class SearchSettings:
    """Everything a run or a bench is asked to do besides its problems, with the CLI's defaults."""

    # proposer
    model: str | None = None  # PROVIDER/NAME, or builtin; None: $KERNELCRAFT_MODEL, else builtin
    base_url: str | None = None
    api_key: str | None = None
    reasoning_effort: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    prices: Path | None = None
    concurrency: int = 8
    llm_timeout: float = 600.0
    llm_retries: int = 4
    stop_after_failures: int = 3
    # search
    strategy: str = "tree"
    backend: str | None = None
    rounds: int = 5
    ideas: int = 4
    impls: int | None = None  # 2, or 1 for the built-in engineer
    beam: int = 2
    samples: int = 8
    islands: int = 1
    seed: int = 0
    seeds: list = field(default_factory=list)  # starting kernels: paths, or source text defining ModelNew
    # budget
    max_candidates: int | None = None
    max_tokens: int | None = None
    max_usd: float | None = None
    max_minutes: float | None = None
    # verifier
    device: str = "auto"
    cluster: str | None = None  # local | auto | a Ray cluster's address; None: $KERNELCRAFT_CLUSTER, else this machine
    actors: int | None = None  # verifier actors on the cluster (default: one per GPU; on the CPU, one per node)
    policy: str = "strict"
    size: str = "auto"
    sizes: dict | str | None = None  # module-level constants, or the CLI's NAME=N,… text
    compile_baseline: bool = True
    timing_budget: float = 6.0
    cache_dir: Path | None = None
    profile: bool = False

    @classmethod
    def of(cls, **options) -> "SearchSettings":
        """Settings from keyword options; an unknown one is a ConfigError naming it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(f"unknown option {unknown[0]!r}; the options are {', '.join(sorted(known))}")
        return cls(**options)

    @property
    def model_name(self) -> str:
        return self.model or os.environ.get("KERNELCRAFT_MODEL") or BUILTIN

    @property
    def size_overrides(self) -> dict | None:
        return parse_sizes(self.sizes)


def devices(s: SearchSettings) -> list[str]:
    """The devices a run of `s` judges on: this machine's (`auto`, `cpu`, `cuda`, `cuda:N`), or on a cluster one
    entry per verifier actor it will start (`cuda` or `cpu`; joining the cluster now, so a cluster that cannot
    serve the run is said before anything starts)."""
    from kernelcraft.verify import resolve_devices

    address = cluster_of(s)
    if address is None:
        return resolve_devices(s.device)
    if s.profile:
        raise ConfigError("--profile: Nsight Compute profiles on this machine's GPU; leave out --cluster to profile")
    from kernelcraft.cluster import connect, plan

    connect(address)
    kind, count = plan(address, s.device, s.actors)
    return [kind] * count


def cluster_of(s: SearchSettings) -> str | None:
    from kernelcraft.cluster.connect import cluster_address

    address = cluster_address(s.cluster)
    if address is None and s.actors is not None:
        raise ConfigError("--actors: verifier actors run on a cluster; add --cluster local|auto|ADDRESS")
    return address


def parse_sizes(sizes: dict | str | None) -> dict | None:
    from kernelcraft.problems.sizes import parse_sizes as parse

    if not sizes:
        return None
    return parse(sizes) if isinstance(sizes, str) else dict(sizes)


def run_spec(s: SearchSettings, devices: list[str], sizes=None) -> RunSpec:
    """What a run of `s` on `devices` is asked to do, checked (`sizes`: one problem's resolved sizes, a run's only;
    `small` stays for the stores and exports that read it). Never the key."""
    small = s.size == "small" or (s.size == "auto" and devices[0].startswith("cpu"))
    verify = VerifySpec(device=s.device, policy=s.policy, size=s.size, size_overrides=s.size_overrides,
                        sizes=sizes.to_dict() if sizes else None, compile_baseline=s.compile_baseline,
                        timing_budget=s.timing_budget, small=small)
    proposer = ProposerSpec(model=s.model_name, base_url=s.base_url, reasoning_effort=s.reasoning_effort,
                            max_tokens=s.max_output_tokens, temperature=s.temperature, timeout_s=s.llm_timeout,
                            max_retries=s.llm_retries, concurrency=s.concurrency)
    return RunSpec(_run_config(s, devices), verify, proposer)


def _run_config(s: SearchSettings, devices: list[str]) -> RunConfig:
    """The RunConfig of `s`: the strategy checked against the proposer, the backend defaulted, seeds read."""
    from kernelcraft.backends import DEFAULT_FOR_MODELS, NEEDS_DEVICE, get_backend
    from kernelcraft.inputs import as_candidate
    from kernelcraft.propose.builtin.proposer import STRATEGIES, BuiltinProposer
    from kernelcraft.search import get_strategy

    try:
        get_strategy(s.strategy)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    builtin = s.model_name == BUILTIN
    if builtin and s.strategy not in STRATEGIES:
        raise ConfigError(f"--strategy {s.strategy}: the built-in engineer gives one answer per request; "
                          f"use {' or '.join(STRATEGIES)}, or a model (--model)")
    written = BuiltinProposer.backends()
    if builtin and s.backend and s.backend not in written:
        raise ConfigError(f"--backend {s.backend}: the built-in engineer writes {', '.join(written)} kernels")
    if not builtin and s.backend:
        try:
            get_backend(s.backend).prompt()
        except ValueError as exc:
            raise ConfigError(f"--backend {s.backend}: {exc}") from None
        why = get_backend(s.backend).unavailable(devices[0].split(":")[0])
        if why and why[0] == NEEDS_DEVICE:  # every kernel asked for would be rejected unrun
            raise ConfigError(f"--backend {s.backend}: {why[1]}, and this run judges on {devices[0]}")
    if builtin and s.max_usd is not None:  # a budget that can never be reached is a mistake, not a limit
        raise ConfigError("--max-usd: the built-in engineer costs nothing; --max-usd applies to a model (--model)")

    seeds = [as_candidate(seed).source for seed in s.seeds]
    if builtin:
        backend = s.backend or written[0]
    else:
        backend = s.backend or DEFAULT_FOR_MODELS["cuda" if devices[0].startswith("cuda") else "cpu"]
    if s.profile:  # said now, not after the first round
        from kernelcraft.verify.profile import ProfileError, check_device, find_ncu

        try:
            find_ncu()
            check_device(devices[0])
        except ProfileError as exc:
            raise ConfigError(f"--profile: {exc}") from None
    config = RunConfig(strategy=s.strategy, backend=backend, rounds=s.rounds, ideas=s.ideas,
                       impls=s.impls or (1 if builtin else 2), beam=s.beam, samples=s.samples, islands=s.islands,
                       concurrency=s.concurrency, seed=s.seed, seeds=seeds, profile=s.profile,
                       stop_after_failures=s.stop_after_failures,
                       budget=Budget(s.max_candidates, s.max_tokens, s.max_usd,
                                     s.max_minutes * 60 if s.max_minutes else None))
    try:
        config.check()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return config


def verifier(v: VerifySpec, cache_dir: Path | None, on_event=None, s: SearchSettings | None = None):
    """The verifier `v` describes: on this machine, or on the cluster `s` names."""
    from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig

    config = VerifyConfig(policy=v.policy, size=v.size, sizes=v.size_overrides, compile_baseline=v.compile_baseline,
                          timing=TimingConfig(budget_s=v.timing_budget))
    if cache_dir:
        config.cache_dir = Path(cache_dir)
    address = cluster_of(s) if s is not None else None
    if address is not None:
        from kernelcraft.cluster import ClusterVerifier

        return ClusterVerifier(address, s.device, config, s.actors, on_event=on_event)
    return Verifier(v.device, config, on_event=on_event)


def admit(verifier, problem) -> None:
    """A problem the device cannot hold is the problem's error, said once before any candidate."""
    if problem is None:
        return
    try:
        verifier.admit(problem)
    except Exception:
        verifier.close()
        raise


def proposer(spec: RunSpec, s: SearchSettings, device: str):
    """The proposer `spec` names, judged under its policy (the key, the endpoint and the prices from `s`)."""
    from kernelcraft.verify.policy import get_policy

    p = spec.proposer
    policy = get_policy(spec.verify.policy)
    device = device.split("@")[0]  # a cluster's device label (cuda:0@host): the kind of device, as it is here
    if p.model == BUILTIN:
        from kernelcraft.propose.builtin.proposer import BuiltinProposer

        return BuiltinProposer(device, precision_moves=policy.allow_tf32)
    from kernelcraft.propose.llm import ClientSettings, LLMProposer, PriceTable, resolve_model

    model = resolve_model(p.model, s.base_url or p.base_url, s.api_key)
    prices = PriceTable(s.prices)
    if s.max_usd is not None and prices.price(model.model) is None:
        raise ConfigError(f"--max-usd: no price known for {model.model}; add it with --prices FILE")
    return LLMProposer(model, device, (policy.name, policy.summary),
                       ClientSettings(timeout_s=p.timeout_s, max_retries=p.max_retries, concurrency=p.concurrency,
                                      reasoning_effort=p.reasoning_effort, max_tokens=p.max_tokens,
                                      temperature=p.temperature),
                       prices, precision=policy.allow_tf32)


def check_overrides(overrides: dict | None, problems) -> None:
    """Bench's sizes apply to each problem that defines the name; a name that none defines is a typo."""
    from kernelcraft.problems.sizes import module_constants

    if not overrides:
        return
    defined = set().union(*(module_constants(p) for p in problems))
    unknown = [n for n in overrides if n not in defined]
    if unknown:
        raise ConfigError(f"--sizes: no problem here has a module-level constant {unknown[0]!r}")
