"""The op families analyze.py's interpreter reads beyond its core (elementwise, softmax, reductions, norms,
matmul): the folding of what follows an op into it (pointwise epilogues, while reading and once the ops are
finished; an eval batchnorm into a conv), and of a pointwise chain into the reduction or scan after it (a prologue); the
families' own recognizers (families/*/recognize.py) read the rest. A mixin: the methods use the interpreter's own
(value, realize, emit, refuse, attr_name, ...)."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import fx

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.families.rows import prologue
from kernelcraft.propose.builtin.plan import (TENSOR_STEPS, Op, can_cut, drop, is_own, operand_refs, readers, reads,
                                              shift)
from kernelcraft.propose.builtin.values import Ew, Prod, chains_in, mentions




class FamilyOps:

    def fold_epilogue(self, chain: Ew) -> int:
        """How many leading steps of `chain` the op it reads applies itself (the epilogue of a conv (before any
        pooling), a linear, a matmul, a norm or a softmax; tensor steps only where the op reads their operand, see
        operand_folds): folded into it (0: none). Only an op no later op reads takes them (the branches of an
        inception or fire module each end in their own epilogue), and only when no other value still to be read needs
        its result without them (see foldable)."""
        if not isinstance(chain.base, int) or self.no_fold \
                or any(chain.base in reads(later) for later in self.ops[chain.base + 1:]):
            return 0
        op = self.ops[chain.base]
        n = self.epilogue_prefix(op, chain.steps)
        if n == 0 or not self.foldable(chain.base, chain.steps[:n], chain):
            return 0
        op.detail["steps"] = [list(s) for s in chain.steps[:n]]
        return n

    def epilogue_prefix(self, op: Op, steps) -> int:
        """How many leading `steps` `op` can take into its epilogue: none unless its kind has one and it is still
        empty with no pooling or mask after it (steps after those are an op of their own); tensor steps only where
        it reads their operand itself (operand_folds), and only as many as leave a rest that reads no value the
        epilogue made (plan.can_cut)."""
        if op.kind not in registry.epilogue_kinds() or op.detail.get("steps") \
                or op.detail.get("pool") or op.detail.get("mask"):
            return 0
        n = next((i for i, s in enumerate(steps) if s[0] in TENSOR_STEPS and not self.operand_folds(op, s[1])),
                 len(steps))
        return next(k for k in range(n, -1, -1) if can_cut(steps, k))  # the rest reads no own value of the prefix

    def fold_elementwise(self, ops: list[Op]) -> list[Op]:
        """The finished `ops` with the leading steps of each elementwise op folded into the epilogue of the op it
        reads, where that op takes them (epilogue_prefix) and no other op reads its result: the interpreter emitted
        the elementwise op before it could know (an operand emitted mid-expression, or ops merged since,
        plan.merge_elementwise). An elementwise op left with no steps is dropped, its readers reading the producer.
        Renumbered."""
        for i, op in enumerate(ops):
            src = op.src
            if op.kind != "elementwise" or not isinstance(src, int) or readers(ops, src) != [i]:
                continue
            steps = op.detail["steps"]
            if n := self.epilogue_prefix(ops[src], steps):
                ops[src].detail["steps"] = [list(s) for s in steps[:n]]
                op.detail["steps"] = shift(steps[n:], -n)
                if not op.detail["steps"]:
                    return self.fold_elementwise(drop(ops, i, src))
        return ops

    def fold_prologues(self, ops: list[Op]) -> list[Op]:
        """The finished `ops` with each elementwise op read only as a reduce's or a scan's src folded into it as its
        prologue ("pre": the kernel applies the steps to what it loads, so the elementwise result is never
        written), where that kernel reads every tensor operand in place (prologue_reads, scan_reads). Renumbered."""
        for i, op in enumerate(ops):
            if op.kind != "elementwise" or len(found := readers(ops, i)) != 1:
                continue
            into = ops[found[0]]
            if into.src != i or into.detail.get("pre"):
                continue
            if (into.kind == "reduce" and self.prologue_reads(op, into)) \
                    or (into.kind == "scan" and self.scan_reads(op)):
                into.detail["pre"] = [list(s) for s in op.detail["steps"]]
                return self.fold_prologues(drop(ops, i, op.src))
        return ops

    def scan_reads(self, op: Op) -> bool:
        """Whether the scan kernel can apply elementwise `op`'s steps as it loads op's src (families/scan/kernels.py):
        steps with no tensor operand always; else the src a floating forward input or parameter and every operand
        one of its shape, of its dtype or a bool or integer one (torch.cumsum(x * mask, 1)), read at the src's own
        offsets."""
        refs = operand_refs(op.detail["steps"])
        if not refs:
            return True
        metas = [self.value_meta(ref) for ref in [op.src, *refs]]
        if any(m is None for m in metas):
            return False
        (shape, dtype), operands = metas[0], metas[1:]
        if not getattr(torch, dtype).is_floating_point:
            return False
        lower = lambda d: not getattr(torch, d).is_floating_point and not getattr(torch, d).is_complex  # noqa: E731
        return all(list(s) == list(shape) and (d == dtype or lower(d)) for s, d in operands)

    def prologue_reads(self, op: Op, reduce: Op) -> bool:
        """Whether `reduce`'s kernel can apply elementwise `op`'s steps as it loads op's src: steps with no tensor
        operand always; else the src and every operand a forward input or a parameter of a known shape and of one
        dtype, the operands broadcasting to the src's shape without growing it and read in place there under the
        reduction's view (prologue.kc_fold_layout, at the traced shapes: no copy)."""
        refs = operand_refs(op.detail["steps"])
        if not refs:
            return True
        metas = [self.value_meta(ref) for ref in [op.src, *refs]]
        if any(m is None for m in metas) or len({dtype for _, dtype in metas}) != 1:
            return False
        x = torch.empty(metas[0][0], device="meta")
        ts = [torch.empty(shape, device="meta") for shape, _ in metas[1:]]
        try:
            if prologue.kc_fold_grow(x, ts) is not x:
                return False
        except RuntimeError:  # sizes that do not broadcast
            return False
        dim = reduce.detail.get("dim")
        nd = x.dim()
        if dim is None:
            lo, hi = 0, nd
        else:
            dims = [int(d) % max(nd, 1) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
            lo, hi = min(dims), max(dims) + 1
        view = (math.prod(x.shape[:lo]), math.prod(x.shape[lo:hi]), math.prod(x.shape[hi:]))
        return prologue.kc_fold_layout(x, ts, *view, lo, hi, copy=False) is not None

    def value_meta(self, ref) -> tuple | None:
        """(shape, dtype name) of a forward input or a parameter (its views applied) the reference reads; None for
        anything else (an op's result, a number)."""
        if ref == "x" or (isinstance(ref, tuple) and ref[0] == "input"):
            meta = self.inputs_meta()
            index = 0 if ref == "x" else int(ref[1])
            return meta[index] if index < len(meta) and meta[index] else None
        if isinstance(ref, tuple) and ref[0] == "attr" and (t := self.tensor_at(ref[1])) is not None:
            try:
                for method, args in ref[2] if len(ref) > 2 else ():
                    t = getattr(t, method)(*args)
            except (RuntimeError, TypeError, AttributeError):
                return None
            return tuple(t.shape), str(t.dtype).removeprefix("torch.")
        return None

    def operand_folds(self, op, ref) -> bool:
        """Whether `op`'s epilogue reads tensor operand `ref` itself: its own earlier value (any epilogue), a
        parameter, any for a conv, a channel norm or a softmax (read at the output's coordinates), for a linear one
        that varies at most along its columns (read along them)."""
        if is_own(ref):
            return True
        if not (isinstance(ref, tuple) and ref[0] == "attr") or op.kind not in registry.operand_epilogue_kinds():
            return False
        weight = self.tensor_at(op.detail["weight"]) if op.kind == "linear" else None
        if weight is not None and op.detail.get("weight_kn"):
            weight = weight.t()  # held (K, N)
        return op.kind != "linear" or self.along_columns(self.tensor_at(ref[1]), weight)

    def tensor_at(self, path: str):
        """The module's tensor at attribute path `path` (None: no tensor there)."""
        t = self.gm
        for part in path.split("."):
            t = getattr(t, part, None)
        return t if isinstance(t, torch.Tensor) else None

    @staticmethod
    def along_columns(t, weight) -> bool:
        """Whether parameter `t` broadcasts along a linear's output columns (weight (N, K)) without growing an output
        of two dims or more: one value or one per column, shape (), (1,), (N,), (1, 1) or (1, N)."""
        return t is not None and weight is not None and t.dim() <= 2 and all(s == 1 for s in t.shape[:-1]) \
            and (t.dim() == 0 or t.shape[-1] in (1, weight.shape[0]))

    def foldable(self, i: int, prefix: tuple | None, consumed: Ew) -> bool:
        """Whether op i may start applying `prefix` (None: a pooling) to its result. Every value still to be read
        that reads op i must read it through those same first steps (it is then rebased past them) and none may
        take op i's result as a tensor operand; `consumed`, the value folded, read by this node alone, is exempt."""
        def plain(v):  # a chain times a parameter as the chain it is
            return c if isinstance(v, Prod) and isinstance(c := self.as_chain(v), Ew) else v

        live = [m for m in self.env if any(self.order[u] >= self.position for u in m.users)]
        if any(s[0] in TENSOR_STEPS and s[1] == i for s in consumed.steps):
            return False
        for m in live:
            v = plain(self.env[m])
            if v == consumed and all(self.order[u] <= self.position for u in m.users):
                continue
            for c in chains_in(v):
                if mentions(Ew(None, c.steps), i) or (c.base == i and (
                        prefix is None or c.steps[:len(prefix)] != prefix or not can_cut(c.steps, len(prefix)))):
                    return False
        if prefix:  # rebased: they now read op i's new result
            def rebase(c):
                return Ew(i, shift(c.steps[len(prefix):], -len(prefix))) if isinstance(c, Ew) and c.base == i else c
            for m in live:
                if mentions(v := plain(self.env[m]), i):
                    self.env[m] = rebase(v) if isinstance(v, Ew) else replace(v, **{
                        f: rebase(getattr(v, f)) for f in ("src", "inv_src") if hasattr(v, f)})
        return True

    def view(self, node: fx.Node, detail: dict):
        """A free reshape (flatten, or view/reshape to literal sizes) of a value: a view op, no kernel."""
        if not isinstance(chain := self.realize(self.value(node.args[0])), Ew):
            return self.refuse("view", node)
        return self.emit("view", self.emit_chain(chain).base, **detail)

    def fold_batchnorm(self, chain: Ew, bn: dict) -> bool:
        """An eval batchnorm right after a conv (no epilogue yet, not read otherwise): a per-channel scale and shift
        the conv applies before its epilogue (its detail's "bn")."""
        i = chain.base
        if chain.steps or not (isinstance(i, int) and i == len(self.ops) - 1) or self.no_fold:
            return False
        op = self.ops[i]
        if op.kind not in ("conv1d", "conv2d") or op.detail.get("steps") or op.detail.get("pool") \
                or op.detail.get("bn") or not self.foldable(i, None, chain):
            return False
        op.detail["bn"] = bn
        return True

