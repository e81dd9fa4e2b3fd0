"""What the built-in engineer's tuning rules rest on, as data: each family keeps, beside its code, the measurements
that chose its thresholds and the order of its moves (`families/<family>/evidence.py`, a tuple `EVIDENCE` of
`Evidence` rows). A comment in the code says what a rule does and why in a line; the numbers that decided it, the
card they were measured on, the record that holds them and the commit they measured live here, where a test checks
that every record exists and every rule names something the family defines (tests/propose/builtin/test_evidence.py).
A rule measured again is a new row or a row changed with its record; a record superseded since (benchmarks/results/
index.json) leaves its row standing as what chose the rule, until a new measurement moves it.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class Evidence:
    """One measurement a rule rests on."""

    rule: str  # what it decided, as the family's code names it: "kernels.SHORT_PHASES", "moves" (the order of moves)
    value: str  # what the rule is now, as the code sets it ("1.0", "taps before packed where CPG >= 2 chunks")
    finding: str  # what was measured, with its numbers as measured (problems by KernelBench level and number)
    device: str  # the card ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    records: tuple[str, ...]  # files under benchmarks/results/ that hold the measurement
    code: str | None = None  # the commit measured, where the record names one


def family_evidence() -> dict[str, tuple[Evidence, ...]]:
    """Every family's EVIDENCE, by the family's package name (those with none are left out)."""
    from kernelcraft.propose.builtin import families

    found = {}
    for info in pkgutil.iter_modules(families.__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{families.__name__}.{info.name}.evidence")
        except ModuleNotFoundError as exc:
            if exc.name != f"{families.__name__}.{info.name}.evidence":
                raise
            continue
        found[info.name] = tuple(module.EVIDENCE)
    return found
