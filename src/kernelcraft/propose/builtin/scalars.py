"""Numbers a reference's forward reads from its module (`x * self.scale`), read again at run time.

torch.fx bakes such a number into the graph as a constant, and analyze.py traces the model built from the
problem's small sizes: a scale of 1/sqrt(K) traced there is wrong at any other K. So a step parameter that
forward reads from an attribute is kept as the reference "self.<path>" (`attach`); the kernel text names it
`kc_s_<path>` (`name`); and `bind` makes each such name a parameter of every @triton.jit function that uses it
and passes float(self.<path>) at each launch, where the generated host code has `self` (ModelNew's forward and
the chain's per-op helpers).
"""

from __future__ import annotations

import re

from kernelcraft.propose.builtin.plan import TENSOR_STEPS

PREFIX = "kc_s_"
_NAME = re.compile(rf"\b{PREFIX}\w+")
_JIT = re.compile(r"^@triton\.jit\n(?:@.*\n)*def (\w+)\(", re.M)
# parameters whose value shapes the code (pow's exponent picks the expansion): always the traced number
STRUCTURAL = {"pow"}


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
        if op.detail.get("steps"):
            op.detail["steps"] = attach(op.detail["steps"], find)
            used |= {r[len("self."):] for r in refs(op.detail["steps"])}
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
    return {v for step in steps for v in step[1:] if is_ref(v)}


def bind(source: str) -> str:
    """The candidate file with every kc_s_<path> a kernel uses made its parameter, and passed at each launch (a
    jit function calling another passes them on)."""
    if PREFIX not in source:
        return source
    changed = True
    while changed:
        changed = False
        for fn, body in _jit_functions(source):
            needed = sorted(set(_NAME.findall(body)))
            header = re.search(rf"def {fn}\(([^)]*)", body)
            have = {p.strip().split(":")[0] for p in header.group(1).split(",")}
            missing = [n for n in needed if n not in have]
            if not missing:
                continue
            changed = True
            new_body = body.replace(f"def {fn}(", f"def {fn}({', '.join(missing)}, ", 1)
            source = _pass_at_calls(source.replace(body, new_body, 1), fn, missing)
            break  # the functions' texts have changed: read them again
    return source


def _jit_functions(source: str) -> list[tuple[str, str]]:
    """(name, text) of each @triton.jit function: its decorators to the next line at column 0."""
    out = []
    for m in _JIT.finditer(source):
        end = re.compile(r"^\S", re.M).search(source, source.index("\n", m.end()) + 1)
        text = source[m.start():end.start() if end else len(source)]
        out.append((m.group(1), text))
    return out


def _pass_at_calls(source: str, fn: str, names: list[str]) -> str:
    """Each launch fn[grid](...) gets float(self.<path>), ...; each call fn(...) from a jit function gets the
    names themselves, which makes them that function's parameters on the next pass."""
    out, i = [], 0
    for m in re.finditer(rf"(?<![\w.]){fn}\b(?=[\[(])", source):
        if source[max(0, m.start() - 4):m.start()] == "def ":
            continue
        j = m.end()
        if source[j] == "[":
            j = _close(source, j) + 1
            if j >= len(source) or source[j] != "(":
                continue
            args = "".join(f"float(self.{n[len(PREFIX):].replace('__', '.')}), " for n in names)
        else:
            args = "".join(f"{n}, " for n in names)
        out.append(source[i:j + 1] + args)
        i = j + 1
    return "".join(out) + source[i:]


def _close(text: str, start: int) -> int:
    """The index of the bracket closing the one at `start`."""
    depth = 0
    for k in range(start, len(text)):
        if text[k] in "([{":
            depth += 1
        elif text[k] in ")]}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError("unbalanced brackets in a generated launch")
