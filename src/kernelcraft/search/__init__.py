"""Search: strategies that ask a proposer for kernels, verify them and decide what to ask next."""

from kernelcraft.search.bench import run_bench
from kernelcraft.search.engine import Engine
from kernelcraft.search.records import Cand
from kernelcraft.search.run import RunOutcome, outcome, resume_run, start_run
from kernelcraft.search.strategies import STRATEGIES, get_strategy
from kernelcraft.spec import Budget, RunConfig

__all__ = ["Budget", "RunConfig", "Cand", "Engine", "RunOutcome", "outcome", "resume_run", "start_run",
           "run_bench", "STRATEGIES", "get_strategy"]
