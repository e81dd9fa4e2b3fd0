"""Numbers a reference's forward reads from its module (`x * self.scale`), read again at run time.

torch.fx bakes such a number into the graph as a constant, and analyze.py traces the model built from the
problem's small sizes: a scale of 1/sqrt(K) traced there is wrong at any other K. So a step parameter that
forward reads from an attribute is kept as the reference "self.<path>" (`attach`), and the code generated for
it comes from a spec, `Scalars.of(op)`: the op's numbers, each by its attribute path as forward reads it
(`Scalar`, the path kept, never re-derived from a name) and the identifier generated code gives it,
`kc_s_<path>` (`name`). The families emit from it (a family.TritonKernel spec takes the op's Scalars and puts
them first in its definition and in every launch; `Scalars.params` in host code):
  - every @triton.jit kernel that applies the op's steps takes the op's scalars as its first parameters;
  - every launch of such a kernel, and every call of a module-level host helper that launches one (gemm's
    kc_linear_tma, kc_matmul_tma; a chain's per-op helpers), passes them first, by the same names: such a helper
    takes them as its first parameters (a chain's after `self`), and only ModelNew.forward reads the attributes,
    binding each name once (`Scalars.reads`) before its body runs.
So module-level code never reads `self.<path>` and nothing rewrites generated text afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import TENSOR_STEPS, Own, is_own

PREFIX = "kc_s_"
# parameters whose value shapes the code (pow's exponent picks the expansion): always the traced number
STRUCTURAL = {"pow"}
STEP_KEYS = ("steps", "pre")  # an op's pointwise steps: its epilogue (or an elementwise op's own), its prologue


def is_ref(value) -> bool:
    return isinstance(value, str) and value.startswith("self.")


def name(ref: str) -> str:
    """The kernel-side identifier of the reference "self.<path>"."""
    return PREFIX + ref[len("self."):].replace(".", "__")


def attach(steps: list, find) -> list:
    """`steps` ([name, *params] each) with every number that `find(number)` names an attribute for (forward reads it
    as self.<attr>) replaced by "self.<attr>"."""
    out = []
    for step in steps:
        if step[0] in TENSOR_STEPS and is_own(step[1]) and (own := Own.of(step[1])).branch:  # the branch's too
            out.append([step[0], Own(own.k, attach(own.branch, find))])
            continue
        if step[0] in STRUCTURAL or step[0] in TENSOR_STEPS:
            out.append(list(step))
            continue
        params = []
        for v in step[1:]:
            attr = find(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
            params.append(f"self.{attr}" if attr else v)
        out.append([step[0], *params])
    return out


def resolve(ops: list, model, forward_src: str, find) -> list[str]:
    """Attach the numbers in every op's steps (`find(number)`: the attribute forward reads it from, or None). Returns
    the float attributes forward reads that no op refers to, by a step or a *_attr key: each was baked into some
    other number (1 / self.t), right only at the traced sizes."""
    used = set()
    for op in ops:
        for key in STEP_KEYS:
            if op.detail.get(key):
                op.detail[key] = attach(op.detail[key], find)
                used |= {r[len("self."):] for r in refs(op.detail[key])}
        used |= _attr_keys(op.detail)
    return [attr for attr, v in vars(model).items()
            if type(v) is float and attr not in used and not attr.startswith("_")
            and re.search(rf"\bself\.{attr}\b", forward_src)]


def _attr_keys(detail: dict) -> set[str]:
    """The attributes a detail (and the details nested in it, as a folded batchnorm's) names in *_attr keys."""
    out = set()
    for k, v in detail.items():
        if isinstance(v, dict):
            out |= _attr_keys(v)
        elif k.endswith("_attr") and isinstance(v, str):
            out.add(v)
    return out


def refs(steps: list) -> set[str]:
    """The "self.<path>" parameters of `steps`, those of the scalar branches their own values apply included."""
    found = {v for step in steps for v in step[1:] if is_ref(v)}
    for step in steps:
        if step[0] in TENSOR_STEPS and is_own(step[1]):
            found |= refs(Own.of(step[1]).branch)
    return found


@dataclass(frozen=True)
class Scalar:
    """One number forward reads from the module: its attribute path as forward reads it ("scale_factor")."""

    path: str

    @property
    def name(self) -> str:
        """Its identifier in generated code: a kernel's parameter, a host helper's, and ModelNew.forward's local."""
        return name("self." + self.path)

    @property
    def read(self) -> str:
        """The expression that reads it, where there is `self` (ModelNew.forward)."""
        return f"float({attr(self.path)})"


@dataclass(frozen=True)
class Scalars:
    """The spec of an op's run-time scalars: the kernels that apply its steps take them, in this order, as their
    first parameters; the host code launching those kernels passes them first, by name (module docstring)."""

    items: tuple[Scalar, ...] = ()

    @classmethod
    def of(cls, op) -> Scalars:
        """The scalars of `op` (a plan.Op): the "self.<path>" parameters of its steps (and prologue), by path."""
        return cls.of_refs(set().union(*(refs(op.detail.get(key) or []) for key in STEP_KEYS)))

    @classmethod
    def of_refs(cls, found) -> Scalars:
        items = tuple(Scalar(r[len("self."):]) for r in sorted(set(found)))
        names = [s.name for s in items]
        if len(set(names)) != len(names):
            raise ValueError(f"attribute paths {[s.path for s in items]} would share a kernel parameter name")
        return cls(items)

    def __add__(self, other: Scalars) -> Scalars:
        """Both ops' scalars, each once (a chain's forward reads them all)."""
        return Scalars.of_refs([f"self.{s.path}" for s in self.items + other.items])

    @property
    def params(self) -> str:
        """ "kc_s_a, kc_s_b, " (or ""): the leading parameters of a kernel or helper, and the leading arguments that
        pass them on at a launch or a helper call."""
        return "".join(f"{s.name}, " for s in self.items)

    def reads(self) -> str:
        """ModelNew.forward's lines binding each name to the number the module holds now."""
        return "".join(f"{s.name} = {s.read}\n" for s in self.items)
