"""Each op kind's detail is a typed dict declared where its family lives (`Family.details`; the kinds no family
serves, in plan.py's CORE_DETAILS), checked against what the engineer read: the analysis of a reference ends with
every op's detail checked (analyze.py), so a key a family does not know, a key it needs and was not given, or a
value of the wrong type is said at once, naming the kind and the key.

The check reads the annotations as written: TypedDicts (their required and optional keys), `Literal`, unions
(`X | None`), `list[X]`, `tuple[X, ...]`, `dict[K, V]`, `Any` and the plain types. A bool is not a number here, and
an int is a float (Python's numeric tower). The modules that declare detail types are evaluated as written (no
`from __future__ import annotations`): TypedDict reads NotRequired only from annotations it can evaluate.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict


def detail_problems(detail: dict, declared: type, where: str = "") -> list[str]:
    """What is wrong with `detail` as a `declared` (a TypedDict): one line per problem, empty when it fits."""
    hints = get_type_hints(declared)
    out = [f"{where}{key!r}: not a key of {declared.__name__}" for key in detail if key not in hints]
    out += [f"{where}{key!r}: missing, {declared.__name__} needs it" for key in declared.__required_keys__
            if key not in detail]
    for key, value in detail.items():
        if key in hints:
            out += _problems(value, hints[key], f"{where}{key}")
    return out


def _problems(value: Any, annotation: Any, where: str) -> list[str]:
    if annotation is Any or annotation is object:
        return []
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        tried = [_problems(value, arg, where) for arg in args]
        return [] if any(not t for t in tried) else [f"{where}: {value!r} is none of {_name(annotation)}"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {list(args)}"]
    if is_typeddict(annotation):
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a {annotation.__name__}"]
        return detail_problems(value, annotation, f"{where}.")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return [f"{where}: {value!r} is not a list"]
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return [f"{where}: {value!r} does not have {len(args)} entries"]
            return [p for i, (v, a) in enumerate(zip(value, args)) for p in _problems(v, a, f"{where}[{i}]")]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in _problems(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a dict"]
        k, v = args or (Any, Any)
        return [p for key, item in value.items() for p in _problems(key, k, where) + _problems(item, v, f"{where}.{key}")]
    if annotation is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if annotation is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif annotation is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(annotation, type):
        ok = isinstance(value, annotation)
    else:
        raise TypeError(f"{where}: the detail check does not read the annotation {annotation!r}")
    return [] if ok else [f"{where}: {value!r} is not a {_name(annotation)}"]


def _name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")

