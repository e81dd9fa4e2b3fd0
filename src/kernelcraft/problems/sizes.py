"""The sizes a problem runs at: full, its SMALL_SIZES, sizes derived from its cost, and the user's overrides.

Upstream KernelBench files have no SMALL_SIZES, and at their published sizes one level-1 problem holds
gigabytes: on a CPU they would run for minutes and verify nothing. For such a file the small sizes are
derived: the largest of its module-level size constants is halved, again and again, until the problem's
bytes and FLOPs (the meta-device cost pass of cost.py: shapes only, no memory) fit a CPU budget taken from
the bundled suite. A halving that makes the problem fail to build or trace (a shape mismatch, a divisor)
or that does not lower its cost is undone, and that constant is left as it is.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernelcraft import syntax
from kernelcraft.errors import ProblemError

if TYPE_CHECKING:  # a problem's sizes and its loading call each other: problem.py imports this module
    from kernelcraft.problems.problem import Problem

# The bundled suite at its SMALL_SIZES (compute_cost over all 67 problems): bytes median 97 KB, 90th
# percentile 0.30 MB, largest 1.03 MB; FLOPs median 0.34 M, 90th percentile 4.2 M, largest 36 M. Halving
# stops at the first size under both budgets, so a derived problem lands between about 1/8 of them and
# them: the scale of the suite's upper half, which runs in milliseconds on a CPU.
BYTES_BUDGET = 1 << 19  # 512 KiB
FLOPS_BUDGET = 1 << 24  # 16.8 MFLOP
MODES = ("auto", "full", "small")
# Constants that shape the computation rather than its size: halving them changes the problem.
_NOT_A_SIZE = re.compile(r"kernel|stride|pad|dilation|group", re.IGNORECASE)
_MAX_STEPS = 200  # halvings, a guard: a 2**40 constant takes 40


@dataclass
class Sizes:
    constants: dict  # name -> value set on the module as it runs: the only values applied
    source: str = "full"  # "full", "SMALL_SIZES" or "derived"; "+user" when overrides are on top
    full: dict = field(default_factory=dict)  # the same names as the file writes them
    note: str = ""  # why derived sizes stayed over budget, or why none could be derived

    def describe(self) -> str:
        """One line: "derived sizes batch_size=16, dim=4096 (full: 4096, 393216)"."""
        note = f"; {self.note}" if self.note else ""
        if self.source in ("full", "SMALL_SIZES"):
            return ("full sizes" if self.source == "full" else "SMALL_SIZES") + note
        changed = [n for n in self.constants if self.constants[n] != self.full.get(n)]
        text = f"{self.source} sizes " + ", ".join(f"{n}={_text(self.constants[n])}" for n in changed)
        if changed:
            text += " (full: " + ", ".join(_text(self.full.get(n)) for n in changed) + ")"
        return text + note

    def key(self) -> str:
        """A short hash of the constants applied: the same sizes give the same key, whatever their source."""
        text = json.dumps(sorted((n, _jsonable(v)) for n, v in self.constants.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_dict(self) -> dict:
        d = {"source": self.source, "constants": {n: _jsonable(v) for n, v in self.constants.items()},
             "full": {n: _jsonable(v) for n, v in self.full.items()}}
        return d | ({"note": self.note} if self.note else {})


def _text(value) -> str:
    return str(value).replace(" ", "")


def _jsonable(value):
    return list(value) if isinstance(value, (tuple, list)) else value


# -- parsing ------------------------------------------------------------------------------------------

def parse_sizes(text: str) -> dict:
    """`"batch_size=16,input_shape=(128,4096)"` -> {"batch_size": 16, "input_shape": (128, 4096)}."""
    sizes: dict = {}
    for item in _split_items(text):
        name, eq, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name.isidentifier():
            raise ValueError(f"--sizes: {item!r} is not NAME=VALUE (e.g. batch_size=16 or input_shape=(128,4096))")
        try:
            parsed = syntax.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = None
        ints = parsed if isinstance(parsed, (tuple, list)) else (parsed,)
        if not ints or not all(type(v) is int for v in ints):
            raise ValueError(f"--sizes: {item!r}: the value must be an integer, or a tuple or list of integers")
        if any(v < 1 for v in ints):
            raise ValueError(f"--sizes: {item!r}: sizes must be positive")
        if name in sizes:
            raise ValueError(f"--sizes: {name} is given twice")
        sizes[name] = parsed
    if not sizes:
        raise ValueError("--sizes: give NAME=VALUE pairs, e.g. batch_size=16,dim=4096")
    return sizes


def _split_items(text: str) -> list[str]:
    """Split on the commas outside parentheses and brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


# -- the file's constants ------------------------------------------------------------------------------

def module_constants(problem: Problem) -> dict[str, bool]:
    """The file's module-level int and int-tuple constants -> whether each is written without other names
    (`dim = 4096`, `M = 1024 * 2`, `height, width = 128, 128`: free to change; `groups = in_channels`:
    follows another)."""
    module = problem.load()
    found: dict[str, bool] = {}
    for node in syntax.parse(problem.source).body:
        value = getattr(node, "value", None)
        free = value is not None and not isinstance(node, ast.AugAssign) and \
            not any(isinstance(n, ast.Name) for n in ast.walk(value))
        for name in syntax.bound_names(node):
            if _is_size(getattr(module, name, None)):
                found[name] = found.get(name, True) and free
    return found


def _is_size(value) -> bool:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return bool(values) and all(type(v) is int for v in values)


# -- resolving -----------------------------------------------------------------------------------------

def resolve_sizes(problem: Problem, mode: str = "auto", device_type: str = "cpu", overrides: dict | None = None,
                  strict: bool = True) -> Sizes:
    """The sizes `problem` runs at. mode: full; small (SMALL_SIZES, else derived); auto (small on the CPU,
    full on a GPU). `overrides` win over all of these; with `strict`, a name the file does not define is
    an error, else it is left out (the same overrides given to many problems)."""
    if mode not in MODES:
        raise ValueError(f"size mode {mode!r}: use one of {', '.join(MODES)}")
    small = mode == "small" or (mode == "auto" and device_type == "cpu")
    module = problem.load()
    if not small:
        sizes = Sizes({}, "full")
    elif getattr(module, "SMALL_SIZES", None):
        smalls = dict(module.SMALL_SIZES)
        sizes = Sizes(smalls, "SMALL_SIZES", {n: getattr(module, n, None) for n in smalls})
    else:
        sizes = derive_sizes(problem)
    if not overrides:
        return sizes
    known = module_constants(problem)
    unknown = [n for n in overrides if n not in known]
    if unknown and strict:
        raise ValueError(f"no module-level constant {unknown[0]!r} in {problem.name}; it has: "
                         f"{', '.join(known) or 'no integer constants'}")
    given = {n: v for n, v in overrides.items() if n in known}
    if not given:
        return sizes
    full = {**sizes.full, **{n: getattr(module, n) for n in given if n not in sizes.full}}
    return Sizes({**sizes.constants, **given}, sizes.source + "+user", full)


# -- deriving ------------------------------------------------------------------------------------------

_DERIVED: dict[str, Sizes] = {}  # by problem sha: a derivation runs once per problem in a process


def derive_sizes(problem: Problem, bytes_budget: int = BYTES_BUDGET, flops_budget: int = FLOPS_BUDGET) -> Sizes:
    """Sizes under both budgets, found by halving the file's largest free size constant, one step at a time."""
    key = f"{problem.sha}-{bytes_budget}-{flops_budget}"
    if key not in _DERIVED:
        _DERIVED[key] = _derive(problem, bytes_budget, flops_budget)
    return _DERIVED[key]


def _derive(problem: Problem, bytes_budget: int, flops_budget: int) -> Sizes:
    module = problem.load()
    full = {n: getattr(module, n) for n, free in module_constants(problem).items()
            if free and not _NOT_A_SIZE.search(n) and _magnitude(getattr(module, n)) >= 2}
    cost = _cost(problem, {})
    if isinstance(cost, str):
        return Sizes({}, "full", note=f"no sizes derived: the cost pass failed at full size ({cost})")
    over = lambda c: c[0] > bytes_budget or c[1] > flops_budget  # noqa: E731
    current: dict = {}
    frozen: set[str] = set()
    for _ in range(_MAX_STEPS):
        if not over(cost):
            break
        open_ = [n for n in full if n not in frozen and _magnitude(current.get(n, full[n])) >= 2]
        if not open_:
            break
        name = max(open_, key=lambda n: _magnitude(current.get(n, full[n])))
        value = _magnitude(current.get(name, full[name]))
        # Constants of one value are often one size written twice (a square matmul's M and N, a batch
        # broadcast against a shape): where halving one alone breaks the problem, they are halved together.
        tied = [n for n in open_ if _magnitude(current.get(n, full[n])) == value]
        for group in ([name], tied) if len(tied) > 1 else ([name],):
            trial = {**current, **{n: _halve(current.get(n, full[n])) for n in group}}
            trial_cost = _cost(problem, trial)
            if not isinstance(trial_cost, str) and (trial_cost[0] < cost[0] or trial_cost[1] < cost[1]):
                current, cost = trial, trial_cost
                break
        else:  # it broke the problem, or it changed nothing: the constant stays as it is
            frozen.add(name)
    note = "" if not over(cost) else (f"over the CPU budget still ({cost[0]} bytes, {cost[1]} FLOPs): "
                                      "no size constant could be halved further")
    if not current:
        return Sizes({}, "full", note=note)
    return Sizes(current, "derived", {n: full[n] for n in current}, note)


def _magnitude(value) -> int:
    return max(value) if isinstance(value, (tuple, list)) else value


def _halve(value):
    """An int halved; in a tuple or list (`input_shape = (32768,)`, `hidden_layer_sizes = [...]`), its
    largest entries halved."""
    if isinstance(value, (tuple, list)):
        top = max(value)
        return type(value)(v // 2 if v == top else v for v in value)
    return value // 2


def _cost(problem: Problem, constants: dict) -> tuple[int, int] | str:
    """(bytes, FLOPs) at these sizes, or why the problem does not build or trace there."""
    from kernelcraft.problems.cost import compute_cost  # torch: imported only when a derivation runs

    try:
        cost = compute_cost(problem.load(sizes=constants))
    except ProblemError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - whatever the reference raises at these sizes
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
    return cost.bytes, cost.flops
