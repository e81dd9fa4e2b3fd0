"""What a kernel family is: the contract every family of the built-in engineer fulfils, and the specs its code is
generated from.

A family (one folder under families/, listed once in registry.py) serves some op kinds of plan.py's IR:
  - `Params`: its typed move parameters, a frozen dataclass. A move *is* its parameters: the idea text the search
    shows a model or a person is derived from them (`Params.idea`), and so is its category; nothing is keyed on
    the text beyond reading it back (proposer._choose).
  - `moves(op)`: the parameters worth trying for one op, most promising first, each right on any input shape.
  - `render(op, params, names)`: the op's module-level code and ModelNew.forward's body (`Rendered`). Triton
    kernels are `TritonKernel` specs: the `def` line (the op's run-time scalars first, then the kernel's
    parameters, then its constexprs) and every launch are generated from the spec, so a launch cannot disagree
    with the kernel it starts, and the spec checks each launch's arguments against it. Every name the family
    defines for this op goes through `names` (a `Names`), so a chain of several ops of one family gets distinct
    kernels without rewriting any generated text.
  - `recognize` (optional): how the family's ops are read from a traced reference (analyze.py's interpreter asks
    it for the nn modules and torch functions it claims).
  - `cut` (optional): the op names a captured model's graph calls that start this family's kind of region (or,
    for the pointwise family, that a region fuses): the region cutter's vocabulary (vocabulary.py).
  - `details`: what each of its kinds' `Op.detail` holds, a TypedDict per kind in the family's ops.py, checked
    after every analysis (details.py).
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.codegen import indent


GPU_ONLY = {"precision": "ieee", "tma": False}  # Params fields whose other values only a GPU computes differently


@dataclass(frozen=True)
class Params(ABC):
    """A family's move parameters. Subclasses are frozen dataclasses of JSON-able fields (ints, floats, strings,
    bools, None, tuples of those) and define `idea` and `category`; `relaxed` says the kernel is not exact in fp32
    (TF32 tensor cores), so a strict policy skips the move."""

    @abstractmethod
    def idea(self) -> str:
        """The move's optimization idea in plain words, derived from the fields (tells moves apart)."""

    @abstractmethod
    def category(self) -> str:
        """Its propose.base.CATEGORIES key."""

    @property
    def relaxed(self) -> bool:
        return False

    @property
    def gpu_only(self) -> bool:
        """The move differs from its family's others only on a GPU: tensor-core precisions for fp32 (3xTF32, TF32)
        or TMA loads. A CPU runs kernels in Triton's interpreter, which computes them as the exact, plain move does,
        so a CPU is not offered them (a field of GPU_ONLY off its default says so)."""
        fields = {f.name for f in dataclasses.fields(self)}
        return any(name in fields and getattr(self, name) != default for name, default in GPU_ONLY.items())

    def to_json(self) -> dict:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        """The parameters `data` (to_json's) stands for; keys the class does not have are an error, missing keys
        take the field's default."""
        names = {f.name for f in dataclasses.fields(cls)}
        if unknown := set(data) - names:
            raise ValueError(f"{cls.__name__} has no parameters {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})

    def but(self, **changes):
        """These parameters with some fields changed (a test's or a sweep's variant of a move)."""
        return dataclasses.replace(self, **changes)


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Names:
    """The names a family defines at module level for one op: the base name, suffixed inside a chain (each op's
    own kernels), so two ops never define one name differently."""

    suffix: str = ""

    def __call__(self, base: str) -> str:
        return base + self.suffix


@dataclass(frozen=True)
class TritonKernel:
    """The spec of one @triton.jit kernel: its name, the op's run-time scalars (taken first), its run-time
    parameters and constexprs, and its body. `source` is its definition, `launch` a launch of it."""

    name: str
    params: tuple[str, ...]
    constexprs: tuple[str, ...]
    body: str
    scalars: Scalars = Scalars()
    comment: str = ""  # a line above the kernel (what it computes), optional
    unspecialized: tuple[str, ...] = ()  # parameters whose every value shares one compilation (a time step's index)

    def source(self) -> str:
        signature = [s.name for s in self.scalars.items] + list(self.params) + [f"{c}: tl.constexpr"
                                                                                 for c in self.constexprs]
        if unknown := set(self.unspecialized) - set(self.params):
            raise ValueError(f"{self.name} has no run-time parameters {sorted(unknown)}")
        head = f"# {self.comment}\n" if self.comment else ""
        jit = f"@triton.jit(do_not_specialize={list(self.unspecialized)!r})" if self.unspecialized else "@triton.jit"
        return f"{head}{jit}\ndef {self.name}({', '.join(signature)}):\n" + indent(self.body.strip("\n"), 4)

    def launch(self, grid: str, args: Sequence[str], consts: Mapping[str, object] | None = None,
               **options: object) -> str:
        """`name[grid](scalars..., args..., CONST=value..., option=value...)`: `args` one per run-time parameter,
        `consts` one per constexpr (values as Python source text or numbers), `options` Triton's launch options
        (num_warps, num_stages)."""
        consts = dict(consts or {})
        if len(args) != len(self.params):
            raise ValueError(f"{self.name} takes {len(self.params)} arguments ({', '.join(self.params)}), "
                             f"a launch passes {len(args)}")
        if set(consts) != set(self.constexprs):
            raise ValueError(f"{self.name}'s constexprs are {sorted(self.constexprs)}, a launch passes "
                             f"{sorted(consts)}")
        parts = [s.name for s in self.scalars.items] + list(args)
        parts += [f"{k}={_value(consts[k])}" for k in self.constexprs]
        parts += [f"{k}={_value(v)}" for k, v in options.items()]
        return f"{self.name}[{grid}]({', '.join(parts)})"


def _value(v: object) -> str:
    return repr(v) if isinstance(v, (bool, int, float)) else str(v)


Block = str | TritonKernel  # a module-level block: a kernel spec, or plain source (a host helper, a CUDA source)


@dataclass(frozen=True)
class Rendered:
    """One op's code: module-level blocks, then ModelNew.forward's body for it (reading the first input as `x`, or
    the inputs the family declares for the kind under their names)."""

    blocks: tuple[Block, ...]
    body: str

    def sources(self) -> list[str]:
        return [b.source() if isinstance(b, TritonKernel) else b for b in self.blocks]


NVRTC_HEAD = "import math\n\nimport torch\n\nfrom kernelcraft.backends.nvrtc import load_kernels"  # a CUDA family's


@dataclass(frozen=True)
class Family:
    """One kernel family (module docstring)."""

    name: str
    backend: str  # "triton" | "cuda_nvrtc": the registry the proposer asks per backend
    kinds: tuple[str, ...]
    params: type[Params]
    moves: Callable[[Op], list[Params]]
    render: Callable[[Op, Params, Names], Rendered]
    inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> names the body reads inputs as
    epilogue: tuple[str, ...] = ()  # kinds whose kernels apply the pointwise steps after them ("steps")
    operand_epilogue: tuple[str, ...] = ()  # of those, kinds whose epilogue also reads parameter tensors
    recognize: object = None  # a recognize.Recognizer: the nn modules and functions analyze.py hands to it
    # the op names a captured graph calls (torch functions, tensor methods, ATen ops; no namespace or overload) that
    # the region cutter (apply/regions.py) treats as this family's region kind: {region kind: names} (vocabulary.py)
    cut: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # each kind's detail, typed: {kind: a TypedDict declared in the family's ops.py}, checked after every analysis
    details: Mapping[str, type] = field(default_factory=dict)
    head: str = ("import math\n\nimport torch\nimport triton\nimport triton.language as tl")  # the file's imports

    def __hash__(self) -> int:
        return hash((self.name, self.backend))

    def __eq__(self, other) -> bool:
        return isinstance(other, Family) and (self.name, self.backend) == (other.name, other.backend)


@dataclass(frozen=True)
class Move:
    """One optimization idea for an op: a family's parameters."""

    family: Family
    params: Params

    @property
    def text(self) -> str:
        return self.params.idea()

    @property
    def key(self) -> str:
        """What the move is, not what it is called: its family and parameters as JSON (its header says the same)."""
        return json.dumps(self.identity, sort_keys=True)

    @property
    def identity(self) -> dict:
        return {"family": self.family.name, **self.params.to_json()}

    @property
    def category(self) -> str:
        return self.params.category()

    @property
    def backend(self) -> str:
        return self.family.backend

    @property
    def relaxed(self) -> bool:
        return self.params.relaxed

    @property
    def gpu_only(self) -> bool:
        return self.params.gpu_only

    def header(self, what: str) -> str:
        """The candidate file's header comment: who wrote it, for what, with which parameters (`written_by` reads
        them back)."""
        backend = "Triton kernels" if self.backend == "triton" else "CUDA kernels (NVRTC)"
        return (f"# ---- {backend} {HEADER_MARK}{what} "
                f"{json.dumps({'family': self.family.name, **self.params.to_json()}, sort_keys=True)}")


HEADER_MARK = "by kernelcraft's built-in engineer: "  # a candidate file's header line (Move.header, chain.py's)


def written_by(source: str) -> dict | None:
    """The family and parameters the built-in engineer wrote `source` with, read back from its header line:
    {"family": name, **parameters} (a chain's also names its lead op, "lead"); None for a kernel it did not write."""
    for line in source.splitlines():
        if not line.startswith("# ---- ") or HEADER_MARK not in line:
            continue
        start = line.index(HEADER_MARK)
        while (start := line.find("{", start + 1)) != -1:  # the parameters end the line, as JSON
            try:
                found = json.loads(line[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict) and "family" in found:
                return found
    return None
