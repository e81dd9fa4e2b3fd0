"""How a family reads its ops from a traced reference: the contract between analyze.py's interpreter and the
families' `recognize` modules.

A family's `Recognizer` claims nn module types (`modules`: type -> handler(ix, node, module)) and torch callables
(`functions`: target -> handler(ix, node), for call_function nodes; `methods`: name -> handler(ix, node), for
tensor methods). The interpreter asks the registry's recognizers, in registry order, before its core (pointwise
chains, reductions, softmax, layer/rms norms, matmul, attention, views), so a family's ops are read in its own
folder. A handler returns the node's abstract value (values.py): usually `ix.emit(kind, src, **detail)`'s, or
`ix.refuse(name, node)` when the call is one the family does not cover (the reason in words).

What a handler may ask of the interpreter `ix` (analyze._Interpreter):
  ix.value(arg)                 the abstract value of an fx argument (a node's, or the constant itself)
  ix.realize(v) -> Ew | None    v as a chain over an input or an emitted op (None: not a tensor it can read)
  ix.emit_chain(chain) -> Ew    the chain emitted (its steps folded or an elementwise op); `.base` is its ref
  ix.emit(kind, src, **detail)  append an Op reading `src`; its value
  ix.refuse(name, node)         an op not covered: emit what feeds it, note `name`, lose track of the result
  ix.note(name)                 note something not covered
  ix.attr_name(value, typ)      the module attribute forward reads `value` from (self.<name>), or None
  ix.foldable(i, prefix, v)     whether op i may take on what follows it (prefix: its first steps; None: an op such
                                as a pooling) without changing what a value still to be read sees; v, the value
                                folded, is exempt
  ix.gm, ix.model, ix.inputs    the traced GraphModule, the model, placeholder -> input index
  ix.shapes()                   (shape, dtype) of each forward input at the traced sizes
  ix.qkv_shapes_ok()            the first three inputs are attention's q (..., L, E), k (..., S, E), v (..., S, Ev)
  ix.ops                        the ops emitted so far
  ix.fold_batchnorm(chain, bn)  whether an eval batchnorm (its detail `bn`) of `chain` folded into the conv before it
  ix.operand(arg)               arg as a forward input of 2 dims or more, maybe transposed (values.Operand), or None
  ix.product(node, a, b, ...)   the matmul of two Operands (analyze_operands.py), or its refusal
  ix.cat(node), ix.tensor_size(node), ix.size_of(node)   the core's readings of torch.cat and of sizes (for a
                                handler that claims them only within a pattern of its own)
Helpers below: `call` (a call's name and its arguments bound by a spec), `hyper` (where forward reads a
hyper-parameter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kernelcraft.propose.builtin import spellings


@dataclass(frozen=True)
class Recognizer:
    modules: Mapping[type, Callable] = field(default_factory=dict)
    functions: Mapping[object, Callable] = field(default_factory=dict)
    methods: Mapping[str, Callable] = field(default_factory=dict)


def handler(recognizers: list[Recognizer], node) -> Callable | None:
    """The handler a family registered for `node` (a call_module's module is looked up by `module`), or None."""
    for r in recognizers:
        if node.op == "call_function" and node.target in r.functions:
            return r.functions[node.target]
        if node.op == "call_method" and node.target in r.methods:
            return r.methods[node.target]
    return None


def module_handler(recognizers: list[Recognizer], module) -> Callable | None:
    for r in recognizers:
        if type(module) in r.modules:
            return r.modules[type(module)]
    return None


def call(node, spec: list) -> tuple[str, dict | None]:
    """A call_function or call_method node's name as torch spells it, and its arguments after the first operand by
    name (`spec`: [(name, default), ...] in torch's order, spellings.bind); None for anything unexpected, or when
    the operand is not passed positionally."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", str(node.target))
    return name, (spellings.bind(spec, node.args[1:], node.kwargs) if node.args else None)


def hyper(ix, p: dict, name: str, value, typ) -> str | None:
    """Where forward reads hyper-parameter `name` of value `value`: its module's attribute when the op is an nn
    module's (p["module"], its path), else the self.<attr> holding it (or None: a literal)."""
    return f"{p['module']}.{name}" if p.get("module") else ix.attr_name(value, typ)
