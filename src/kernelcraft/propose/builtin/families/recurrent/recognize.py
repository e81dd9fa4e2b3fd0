"""How the recurrent family reads nn.LSTM and nn.GRU calls: `self.lstm(x)`, `self.lstm(x, (h0, c0))`,
`self.gru(x, h0)` (hx also by keyword), each initial state a forward input, a parameter or buffer of the module, or a
value the forward computed (another LSTM's state pair included).

torch.fx traces such a call as one node returning a tuple, (output, (h_n, c_n)) or (output, h_n), and getitem nodes
that take it apart. The call is kept pending (`Call`, a values.Pending): a subscript picks a result (`Result`, or
an LSTM's `States` pair first), and a result is emitted as an op only where something reads it, once per result
(plan.py's lstm / gru: each op computes the whole recurrence and returns its one result). A subscript of a result
that takes one entry along its leading dim (h_n[-1]; the output's time dim: out[-1], or out[:, -1, :] with
batch_first) is that result's `index`, so the linear over the last step that usually follows reads a contiguous
(B, directions * H) slice.

Refused, in words: proj_size (the hidden state projected), an initial state the forward takes as an argument that
the problem's get_inputs does not pass (forward then stands in its default: KernelBench's LSTM draws it at random,
so no kernel can agree with it), and any other subscript or use of the tuple.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn

from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr, Ew, Pending

_FULL = slice(None, None, None)


def _select(key) -> tuple[int, int] | None:
    """A subscript that takes one entry along one dim (x[i], x[:, i], x[:, i, :]) as (dim, i); else None."""
    entries = key if isinstance(key, tuple) else (key,)
    ints = [k for k, e in enumerate(entries) if type(e) is int]
    if len(ints) != 1 or any(e != _FULL for k, e in enumerate(entries) if k != ints[0]):
        return None
    return ints[0], entries[ints[0]]


@dataclass(frozen=True)
class Call(Pending):
    """An nn.LSTM / nn.GRU call's result tuple, pending the subscripts that take it apart."""

    kind: str  # "lstm" | "gru"
    module: str  # the module's attribute path
    src: Ew  # the input sequence (emitted: a value with no pending steps)
    states: tuple  # the initial states' value refs (none: zeros)
    batch_first: bool  # the module's, at analysis: which dim of the output a time-step subscript takes

    def item(self, ix, node, key):
        if key == 0:
            return Result(self, "output")
        if key == 1:
            return States(self) if self.kind == "lstm" else Result(self, "h_n")
        return ix.refuse(f"{self.kind}[{key!r}]", node)

    def realize(self, ix):
        ix.note(f"{self.kind}'s result tuple read as a whole")
        return None


@dataclass(frozen=True)
class States(Pending):
    """An LSTM's (h_n, c_n), pending its subscript."""

    call: Call

    @property
    def src(self) -> Ew:
        return self.call.src

    def item(self, ix, node, key):
        if key in (0, 1):
            return Result(self.call, ("h_n", "c_n")[key])
        return ix.refuse(f"lstm state[{key!r}]", node)

    def realize(self, ix):
        ix.note("lstm's (h_n, c_n) read as a whole")
        return None


@dataclass(frozen=True)
class Result(Pending):
    """One result of a call: emitted where it is read, or one entry of it where a subscript takes one."""

    call: Call
    result: str  # "output" | "h_n" | "c_n"

    @property
    def src(self) -> Ew:
        return self.call.src

    def emit(self, ix, index: int | None) -> Ew:
        """The op of this result (an identical one already emitted is reused: one op per result read)."""
        c = self.call
        detail = {"module": c.module, "result": self.result, "index": index, "states": list(c.states)}
        for i, op in enumerate(ix.ops):
            if op.kind == c.kind and op.src == c.src.base and op.detail == detail:
                return Ew(i)
        return ix.emit(c.kind, c.src.base, **detail)

    def realize(self, ix):
        return self.emit(ix, None)

    def item(self, ix, node, key):
        found = _select(key)
        along = (1 if self.call.batch_first else 0) if self.result == "output" else 0
        if found is None or found[0] != along:
            return ix.refuse(f"{self.call.kind} {self.result} subscript", node)
        return self.emit(ix, found[1])


def _state_ref(ix, value):
    """A state's value ref: a parameter or buffer by path, else the chain it is emitted (None: no tensor)."""
    if isinstance(value, Attr):
        return ("attr", value.path)
    chain = ix.realize(value)
    return ix.emit_chain(chain).base if isinstance(chain, Ew) else None


def _handle(kind: str):
    def handle(ix, node, module):
        name = kind
        given = dict(zip(("input", "hx"), node.args))
        if len(node.args) > 2 or set(node.kwargs) - {"input", "hx"} or set(node.kwargs) & set(given):
            return ix.refuse(name, node)
        given.update(node.kwargs)
        if getattr(module, "proj_size", 0):
            return ix.refuse(f"{name} with proj_size", node)
        hx = given.get("hx")
        if hx is None:
            args = []
        elif kind == "lstm" and isinstance(hx, (tuple, list)) and len(hx) == 2:
            args = list(hx)
        elif kind == "lstm" and isinstance(ix.value(hx), States):  # another LSTM's (h_n, c_n)
            pair = ix.value(hx)
            args = [Result(pair.call, "h_n"), Result(pair.call, "c_n")]
        elif kind == "gru" and not isinstance(hx, (tuple, list)):
            args = [hx]
        else:
            return ix.refuse(name, node)
        shapes = ix.shapes()
        for arg in args:
            if arg in ix.inputs and ix.inputs[arg] >= len(shapes):
                return ix.refuse(f"{name} initial state {arg.name} left to forward's default (get_inputs does not "
                                 "pass it)", node)
        chain = ix.realize(ix.value(given.get("input")))
        if not isinstance(chain, Ew):
            return ix.refuse(name, node)
        src = ix.emit_chain(chain)
        refs = [_state_ref(ix, a if isinstance(a, Result) else ix.value(a)) for a in args]
        if None in refs:
            return ix.refuse(name, node)
        return Call(kind, node.target, src, tuple(refs), bool(module.batch_first))
    return handle


RECOGNIZER = Recognizer(modules={nn.LSTM: _handle("lstm"), nn.GRU: _handle("gru")})
