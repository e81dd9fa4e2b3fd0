"""The op families analyze.py's interpreter reads beyond its core (elementwise, softmax, reductions, norms,
matmul): convolutions 1-D to 3-D and transposed 2-D ones (with their pointwise epilogue and pooling folded in),
pooling, argmax/argmin and scans, losses and channel norms. A mixin: the methods use the interpreter's own
(value, realize, emit, refuse, attr_name, ...)."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import registry, spellings as sp
from kernelcraft.propose.builtin.plan import TENSOR_STEPS
from kernelcraft.propose.builtin.values import Attr, Ew, Flipped, LogSoftmaxIn, Prod, chains_in, mentions




class FamilyOps:
    def conv2d(self, node: fx.Node, wshape, stride, padding, dilation, groups, weight: str, bias, mode="zeros",
               module=None):
        """A 2-D or 3-D conv, or a 1-D one (a 3-D weight: kind conv1d, its hyper-parameters lifted to a one-row 2-D
        conv's). module: the nn.Conv*d's path, whose hyper-parameters the kernel then reads at run time (they may
        depend on sizes, as groups does in a depthwise conv); else the values, groups by attribute if read so."""
        dims = len(wshape) - 2

        def pair(v, lift):  # as [h, w] ([d, h, w]); a 1-D conv's h is `lift` (stride and dilation 1, padding 0)
            vals = [int(v)] * dims if isinstance(v, int) else [int(u) for u in v]
            return None if len(vals) != dims else [lift, *vals] if dims == 1 else vals

        if dims not in (1, 2, 3):
            return self.refuse(f"conv{dims}d", node)
        kind = f"conv{dims}d"
        stride, dilation = pair(stride, 1), pair(dilation, 1)
        if padding == "valid":
            padding = 0
        elif padding == "same" and dilation and all(d * (k - 1) % 2 == 0 for d, k in zip(dilation[-dims:], wshape[2:])):
            padding = [d * (k - 1) // 2 for d, k in zip(dilation[-dims:], wshape[2:])]
        padding = pair(padding, 0) if not isinstance(padding, str) else None
        if mode != "zeros":
            return self.refuse(f"{kind} (padding_mode={mode})", node)
        chain = self.realize(self.value(node.args[0]))
        if None in (stride, padding, dilation) or not isinstance(chain, Ew) or not isinstance(groups, int):
            return self.refuse(kind, node)
        extra = {"pool": None} if dims < 3 else {}
        return self.emit(kind, self.emit_chain(chain).base, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, module=module, groups_attr=self.attr_name(groups, int), weight=weight,
                         bias=bias, steps=[], **extra)

    def conv2d_call(self, node: fx.Node):
        """F.conv1d / F.conv2d / F.conv3d (and torch.*) with a weight (and bias) read from the module."""
        kind = {F.conv1d: "conv1d", torch.conv1d: "conv1d", F.conv3d: "conv3d", torch.conv3d: "conv3d"}.get(
            node.target, "conv2d")
        names = ("weight", "bias", "stride", "padding", "dilation", "groups")
        given = dict(zip(names, node.args[1:]), **node.kwargs)
        w, b = self.value(given.get("weight")), self.value(given.get("bias"))
        if len(node.args) > 7 or set(given) - set(names) or not isinstance(w, Attr) or \
                not (b is None or isinstance(b, Attr)):
            return self.refuse(kind, node)
        shape = tuple(self.gm.get_parameter(w.path).shape) if w.path in dict(self.gm.named_parameters()) else ()
        if len(shape) != int(kind[4]) + 2:
            return self.refuse(kind, node)
        return self.conv2d(node, shape, given.get("stride", 1), given.get("padding", 0), given.get("dilation", 1),
                           given.get("groups", 1), w.path, b.path if b is not None else None)

    def conv_transpose2d(self, node: fx.Node, stride, padding, output_padding, dilation, groups, weight: str, bias,
                         mode="zeros", module=None, dims=2):
        """A transposed 2-D conv of the raw input (nn.ConvTranspose2d: module, read at run time; else the values), or
        a 1-D one (nn.ConvTranspose1d, dims 1: kind conv_transpose1d, its hyper-parameters lifted to a one-row 2-D
        one's: stride and dilation [1, v], padding and output_padding [0, v])."""
        def pair(v, least):
            vals = [v] * dims if isinstance(v, int) else list(v) if isinstance(v, (tuple, list)) else []
            vals = [least, *vals] if dims == 1 else vals
            return [int(u) for u in vals] if len(vals) == 2 and all(type(u) is int and u >= least for u in vals) \
                else None

        kind = f"conv_transpose{dims}d"
        if mode != "zeros":
            return self.refuse(f"{kind} (padding_mode={mode})", node)
        hyper = {"stride": pair(stride, 1), "padding": pair(padding, 0), "output_padding": pair(output_padding, 0),
                 "dilation": pair(dilation, 1)}
        chain = self.realize(self.value(node.args[0]))
        if None in hyper.values() or not isinstance(chain, Ew) or type(groups) is not int:
            return self.refuse(kind, node)
        if any(o >= max(s, d) for o, s, d in zip(hyper["output_padding"], hyper["stride"], hyper["dilation"])):
            return self.refuse(f"{kind} (output_padding not below stride or dilation)", node)
        return self.emit(kind, self.emit_chain(chain).base, **hyper, groups=groups, module=module,
                         groups_attr=self.attr_name(groups, int), weight=weight, bias=bias, steps=[])

    def conv_transpose2d_call(self, node: fx.Node):
        """F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation) (torch's order)."""
        names = ("weight", "bias", "stride", "padding", "output_padding", "groups", "dilation")
        given = dict(zip(names, node.args[1:]), **node.kwargs)
        w, b = self.value(given.get("weight")), self.value(given.get("bias"))
        if len(node.args) > 8 or set(given) - set(names) or not isinstance(w, Attr) or \
                not (b is None or isinstance(b, Attr)):
            return self.refuse("conv_transpose2d", node)
        shape = tuple(self.gm.get_parameter(w.path).shape) if w.path in dict(self.gm.named_parameters()) else ()
        if len(shape) != 4:
            return self.refuse("conv_transpose2d", node)
        return self.conv_transpose2d(node, given.get("stride", 1), given.get("padding", 0),
                                     given.get("output_padding", 0), given.get("dilation", 1), given.get("groups", 1),
                                     w.path, b.path if b is not None else None)

    def fold_epilogue(self, chain: Ew) -> int:
        """How many leading steps of `chain` the op it reads applies itself (the epilogue of a conv (before any
        pooling), a linear, a matmul or a norm; tensor steps only where the op reads their operand, see
        operand_folds): folded into it (0: none). Only the last op takes them, and only when no other value still to
        be read needs its result without them (see foldable)."""
        if not (isinstance(chain.base, int) and chain.base == len(self.ops) - 1) or self.no_fold:
            return 0
        op = self.ops[chain.base]
        if op.kind not in registry.epilogue_kinds() or op.detail.get("steps") \
                or op.detail.get("pool"):  # steps after a pool are an op of their own
            return 0
        n = next((i for i, s in enumerate(chain.steps) if s[0] in TENSOR_STEPS and not self.operand_folds(op, s[1])),
                 len(chain.steps))
        if n == 0 or not self.foldable(chain.base, chain.steps[:n], chain):
            return 0
        op.detail["steps"] = [list(s) for s in chain.steps[:n]]
        return n

    def operand_folds(self, op, ref) -> bool:
        """Whether `op`'s epilogue reads tensor operand `ref` itself: a parameter, any for a conv (read at the
        output's coordinates), a 1-D one for a linear (along its columns)."""
        if not (isinstance(ref, tuple) and ref[0] == "attr") or op.kind not in registry.operand_epilogue_kinds():
            return False
        if op.kind != "linear":
            return True
        t = self.gm
        for part in ref[1].split("."):
            t = getattr(t, part, None)
        return isinstance(t, torch.Tensor) and t.dim() == 1

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
                        prefix is None or c.steps[:len(prefix)] != prefix)):
                    return False
        if prefix:  # rebased: they now read op i's new result
            def rebase(c):
                return Ew(i, c.steps[len(prefix):]) if isinstance(c, Ew) and c.base == i else c
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

    def loss(self, kind: str, node: fx.Node, p: dict):
        """A loss of the forward's first two inputs as they are (prediction, target)."""
        args = [node.args[0], p["target"]]
        shapes = self.shapes()
        if [self.inputs.get(v) if isinstance(v, fx.Node) else None for v in args] != [0, 1] or len(shapes) < 2 \
                or None in shapes[:2]:
            return self.refuse(kind, node)
        for flag in ("weight", "size_average", "reduce"):
            if p.get(flag) is not None:
                return self.refuse(f"{kind} ({flag})", node)
        if p["reduction"] not in ("mean", "sum", "none"):
            return self.refuse(f"{kind} (reduction={p['reduction']})", node)
        if kind == "cross_entropy":
            ignore = p["ignore_index"]
            if sp.num(p["label_smoothing"]) != 0.0:
                return self.refuse("cross_entropy (label_smoothing)", node)
            if len(shapes[0]) != len(shapes[1]) + 1 or type(ignore) is not int:  # targets are class indices
                return self.refuse("cross_entropy (probability targets)", node)
            return self.emit("cross_entropy", "x", reduction=p["reduction"], ignore_index=ignore,
                             ignore_index_attr=self.hyper(p, "ignore_index", ignore, int))
        if shapes[0] != shapes[1]:
            return self.refuse(f"{kind} (broadcast)", node)
        name = "beta" if "beta" in p else "delta" if "delta" in p else None
        if name and sp.num(p[name]) is None:
            return self.refuse(kind, node)
        return self.emit("loss", "x", fn=sp.LOSSES[kind], reduction=p["reduction"], param=name and sp.num(p[name]),
                         param_attr=name and self.hyper(p, name, p[name], float))

    def kl_div(self, node: fx.Node, p: dict):
        """kl_div(log_softmax(a, d), log_softmax(b, d), log_target=True) of the first two inputs, fused."""
        lp, lq = self.value(node.args[0]), self.value(p["target"])
        shapes = self.shapes()
        if isinstance(lp, LogSoftmaxIn) and isinstance(lq, LogSoftmaxIn) and (lp.index, lq.index) == (0, 1) \
                and lp.dim == lq.dim and p["log_target"] is True and p["size_average"] is None \
                and p["reduce"] is None and p["reduction"] in ("batchmean", "sum", "mean") and len(shapes) >= 2 \
                and shapes[0] is not None and shapes[0] == shapes[1]:
            return self.emit("kl_div_logits", "x", dim=lp.dim, reduction=p["reduction"])
        for v in (lp, lq):  # the pending log_softmaxes, as they would have been without the fusion
            if isinstance(v, LogSoftmaxIn) and v.index == 0:
                self.emit("log_softmax", "x", dim=v.dim)
            elif isinstance(v, LogSoftmaxIn):
                self.note("log_softmax")
        return self.refuse("kl_div", node)

    def channel_norm(self, kind: str, node: fx.Node, p: dict):
        """batch_norm (eval: running statistics), instance_norm or group_norm over (N, C, *spatial)."""
        chain = self.realize(self.value(node.args[0]))
        w, b = self.value(p["weight"]), self.value(p["bias"])
        stats = [self.value(p.get(k)) for k in ("running_mean", "running_var")]
        if not isinstance(chain, Ew) or sp.num(p["eps"]) is None \
                or not all(v is None or isinstance(v, Attr) for v in (w, b, *stats)):
            return self.refuse(kind, node)
        if kind == "batch_norm" and (p["training"] is not False or None in stats):
            return self.refuse("batch_norm (training)", node)  # batch statistics, running buffers updated
        if kind == "instance_norm" and (stats != [None, None] or p["use_input_stats"] is not True):
            return self.refuse("instance_norm (running stats)", node)
        if kind == "group_norm" and type(p["num_groups"]) is not int:
            return self.refuse(kind, node)
        eps = float(p["eps"])
        common = {"eps": eps, "eps_attr": self.hyper(p, "eps", p["eps"], float), "weight": w and w.path,
                  "bias": b and b.path}
        if kind == "batch_norm":
            bn = {**common, "running_mean": stats[0].path, "running_var": stats[1].path}
            if self.fold_batchnorm(chain, bn):
                return chain
            return self.emit("batchnorm", self.emit_chain(chain).base, **bn)
        src = self.emit_chain(chain).base
        if kind == "instance_norm":
            return self.emit("instancenorm", src, **common, spatial=p.get("spatial"))
        groups = p["num_groups"]
        return self.emit("groupnorm", src, groups=groups, groups_attr=self.hyper(p, "num_groups", groups, int),
                         **common)

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

    def hyper(self, p: dict, name: str, value, typ) -> str | None:
        """Where forward reads a hyper-parameter: its module's attribute (nn.* spelling), or self.<attr>."""
        return f"{p['module']}.{name}" if p.get("module") else self.attr_name(value, typ)

    def arg_or_scan(self, kind: str, name: str, a, p: dict, node: fx.Node):
        """argmax / argmin over one dim or all (an argreduce Op); cumsum / cumprod along one dim (a scan Op), reverse
        when it reads a flip along that dim (cumsum(flip(x)) is flip(reverse cumsum(x))); flip: pending (Flipped)."""
        if kind == "flip":
            dims = p["dims"]
            dim = dims[0] if isinstance(dims, (tuple, list)) and len(dims) == 1 else dims
            if type(dim) is not int:
                return self.refuse(name, node)
            if isinstance(a, Flipped):  # flipped back: the value as it was, if along the same dim
                return a.src if a.dim == dim else self.refuse(name, node)
            return Flipped(chain, dim) if isinstance(chain := self.realize(a), Ew) else self.refuse(name, node)
        dim, scan = p["dim"], kind in ("cumsum", "cumprod")
        if scan and isinstance(a, Flipped) and type(dim) is int and dim == a.dim:
            src = self.emit_chain(a.src).base
            return Flipped(self.emit("scan", src, op=kind, dim=dim, dim_attr=self.attr_name(dim, int), reverse=True),
                           dim)
        if isinstance(dim, bool) or not (isinstance(dim, int) or (dim is None and not scan)):
            return self.refuse(f"{name} over several dims" if isinstance(dim, (tuple, list)) else name, node)
        if not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        src = self.emit_chain(chain).base
        dim_attr = self.attr_name(dim, int) if dim is not None else None
        if scan:
            return self.emit("scan", src, op=kind, dim=dim, dim_attr=dim_attr)
        return self.emit("argreduce", src, op=kind, dim=dim, dim_attr=dim_attr, keepdim=bool(p["keepdim"]))

    def pool(self, kind: str, name: str, a, p: dict, node: fx.Node):
        """Max / avg / adaptive-avg pooling, 2-D or 1-D (as H = 1), as one pool2d Op with [H, W] pairs."""
        nd = 1 if kind.endswith("1d") else 2

        def hw(v, fill, none_ok=False):  # an int or nd ints -> [H, W] (1-D: [fill, v]); None if not plain ints
            v = list(v) if isinstance(v, (tuple, list)) else [v] * nd
            least = 0 if fill == 0 else 1  # padding may be 0, sizes not
            ok = len(v) == nd and all((type(i) is int and i >= least) or (none_ok and i is None) for i in v)
            return ([fill] * (2 - nd) + v) if ok else None

        if p.get("return_indices") or p.get("divisor_override") is not None:
            flag = "return_indices" if p.get("return_indices") else "divisor_override"
            return self.refuse(f"{kind} with {flag}", node)
        if kind.startswith("adaptive"):
            geometry = {"kernel": None, "stride": None, "padding": None, "dilation": None}
            out = hw(p["output_size"], 1, none_ok=nd == 2)
            ok = out is not None
        else:
            kernel = hw(p["kernel_size"], 1)
            stride = kernel if p["stride"] in (None, [], ()) else hw(p["stride"], 1)
            geometry = {"kernel": kernel, "stride": stride, "padding": hw(p["padding"], 0),
                        "dilation": hw(p.get("dilation", 1), 1)}
            out = None
            ok = None not in geometry.values() and isinstance(p["ceil_mode"], bool)
        if not ok or not isinstance(chain := self.realize(a), Ew):
            return self.refuse(name, node)
        src = self.emit_chain(chain).base
        detail = dict(pool="adaptive_avg" if out else kind[:3], dims=nd, **geometry,
                      ceil_mode=p.get("ceil_mode", False), count_include_pad=bool(p.get("count_include_pad")),
                      output_size=out)
        last = self.ops[src] if isinstance(src, int) and src == len(self.ops) - 1 else None
        if last is not None and last.kind == "conv2d" and last.detail["pool"] is None and nd == 2 \
                and self.foldable(src, None, Ew(src)):
            last.detail["pool"] = detail  # pooled inside the conv's op: conv (+ epilogue), then the pool kernel
            return Ew(src)
        return self.emit("pool2d", src, **detail)
