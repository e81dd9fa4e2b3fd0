"""Capture a model's forward as one torch.fx graph of functions over tensors: torch.fx first, torch.export where fx
cannot trace it.

Both paths end in the same form, so the stages after this one read one kind of graph: placeholders for the
forward's inputs, get_attr nodes for parameters and buffers (qualified names on the captured module), and
call_function / call_method nodes; no call_module node and no in-place op.
- fx: `fx.symbolic_trace` keeps torch.nn modules as leaves; each leaf becomes the functional call it makes
  (nn.Conv2d -> F.conv2d over its weight), so a region can be written out with nothing but torch. An in-place op
  becomes its out-of-place twin where nothing reads the value it overwrote afterwards. A leaf module without a
  functional form here, or an in-place op that cannot be undone safely, hands the model to torch.export.
- export: `torch.export.export(model, args).run_decompositions({})` is functional ATen (aten.conv2d,
  aten.linear, aten.layer_norm, ... kept whole); its lifted parameters and buffers become get_attr nodes, and the
  ATen calls that are torch functions under another name are written as those (aten.py).
The model runs in eval mode, as the verifier runs every reference (dropout off, batch norms on running stats).
"""

from __future__ import annotations

import operator
import warnings
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import fx

from kernelcraft.apply.aten import torch_level
from kernelcraft.errors import KernelcraftError
from kernelcraft.propose.builtin.untraceable import untraceable


class CaptureError(KernelcraftError):
    """A model neither torch.fx nor torch.export can capture, said in one line."""


@dataclass
class Captured:
    graph_module: fx.GraphModule = field(repr=False)
    method: str  # "fx" or "export"
    notes: list[str] = field(default_factory=list)  # why fx was not used, what was rewritten
    # get_attr targets that are not the model's own qualified names -> the model's (torch.export flattens them);
    # a target not here is the model's own (fx), or a constant export lifted that the model does not hold (None)
    origins: dict[str, str | None] = field(default_factory=dict)


def capture(model: nn.Module, inputs: list) -> Captured:
    """`model` (put in eval mode) as a graph of functions; fx first, export when fx cannot trace it."""
    model.eval()
    try:
        return _fx_capture(model)
    except _NotFunctional as exc:
        why = f"torch.fx traced it, but {exc}"
    except Exception as exc:  # noqa: BLE001 - whatever the forward's Python does under tracing
        why = "torch.fx could not trace it: " + (untraceable(exc) or f"{type(exc).__name__}: {_first_line(exc)}")
    try:
        return _export_capture(model, inputs, why)
    except Exception as exc:  # noqa: BLE001
        raise CaptureError(f"cannot capture the model: {why}; torch.export failed too "
                           f"({type(exc).__name__}: {_first_line(exc)}). {_what_to_change(exc)}") from None


def _what_to_change(exc: BaseException) -> str:
    """What the user can change in their model file, where torch.export's failure says."""
    if "cache_utils" in str(exc) or "Cache'>" in str(exc):
        return ("The model returns its key/value cache: build it with use_cache=False (transformers: "
                "`config.use_cache = False`, or call it with `use_cache=False`)")
    return ("apply needs a forward that returns tensors (or tuples of them) and does not branch on tensor values: "
            "change what the message names")


class _NotFunctional(Exception):
    """An fx graph this module cannot make functional (a leaf module or an in-place op it does not handle)."""


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The message's first line, cut at a word's end where it runs past `limit` characters."""
    line = (str(exc).strip().splitlines() or [""])[0]
    if len(line) <= limit:
        return line
    return line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


# -- fx -------------------------------------------------------------------------------------------------------

def _fx_capture(model: nn.Module) -> Captured:
    gm = fx.symbolic_trace(model)
    undone: list[str] = []  # the in-place ops computed out of place: a module's path, else the op's name
    lowered = {}  # an in-place module's call, as lowered -> its module's path
    for node in list(gm.graph.nodes):
        if node.op == "call_module":
            target, call = node.target, _lower_leaf(gm, node)
            if call is not None:
                lowered[call] = target
    for node in list(gm.graph.nodes):
        if _is_inplace(node):
            _undo_inplace(node)
            undone.append(lowered.get(node, _name(node)))
        elif node in lowered:  # lowered with no in-place argument left
            undone.append(lowered[node])
    gm.graph.eliminate_dead_code()
    gm.delete_all_unused_submodules()
    gm.recompile()
    return Captured(gm, "fx", [_undone_note(undone)] if undone else [])


def _undone_note(undone: list[str]) -> str:
    """One note for every in-place op computed out of place (ResNet-50's 16 ReLUs were 32 notes)."""
    counts = {name: undone.count(name) for name in dict.fromkeys(undone)}  # a module called twice: once, x2
    names = [name + (f" x{n}" if n > 1 else "") for name, n in counts.items()]
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return f"in-place ops computed out of place ({len(undone)}): {shown}"


def _attr(graph: fx.Graph, module_name: str, attr: str, module: nn.Module):
    """A get_attr node for a leaf's parameter or buffer, None where the leaf has none (Linear(bias=False))."""
    return graph.get_attr(f"{module_name}.{attr}") if getattr(module, attr, None) is not None else None


def _conv(n):
    return lambda g, q, m, x: (getattr(F, f"conv{n}d"), (x, _attr(g, q, "weight", m), _attr(g, q, "bias", m),
                                                           m.stride, m.padding, m.dilation, m.groups))


def _conv_t(n):
    return lambda g, q, m, x: (getattr(F, f"conv_transpose{n}d"),
                               (x, _attr(g, q, "weight", m), _attr(g, q, "bias", m), m.stride, m.padding,
                                m.output_padding, m.groups, m.dilation))


def _batch_norm(g, q, m, x):
    stats = m.track_running_stats and m.running_mean is not None
    return F.batch_norm, (x, _attr(g, q, "running_mean", m) if stats else None,
                          _attr(g, q, "running_var", m) if stats else None, _attr(g, q, "weight", m),
                          _attr(g, q, "bias", m), not stats, 0.0, m.eps)


def _instance_norm(g, q, m, x):
    stats = m.track_running_stats and m.running_mean is not None
    return F.instance_norm, (x, _attr(g, q, "running_mean", m) if stats else None,
                             _attr(g, q, "running_var", m) if stats else None, _attr(g, q, "weight", m),
                             _attr(g, q, "bias", m), not stats, 0.0, m.eps)


def _named(fn, *names):
    """A leaf whose call is fn(x, name=module.name, …): its settings by keyword, as the function names them
    (F.gelu's `approximate` is keyword-only: passed positionally it raised TypeError in the captured model)."""
    return lambda g, q, m, x: (fn, (x,), {a: getattr(m, a) for a in names})


_pool = _act = _named


# leaf module type -> (graph, qualified name, module, input node) -> (function, args[, kwargs]): the call the leaf makes
_LEAVES = {
    nn.Linear: lambda g, q, m, x: (F.linear, (x, _attr(g, q, "weight", m), _attr(g, q, "bias", m))),
    nn.Conv1d: _conv(1), nn.Conv2d: _conv(2), nn.Conv3d: _conv(3),
    nn.ConvTranspose1d: _conv_t(1), nn.ConvTranspose2d: _conv_t(2), nn.ConvTranspose3d: _conv_t(3),
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm, nn.BatchNorm3d: _batch_norm,
    nn.InstanceNorm1d: _instance_norm, nn.InstanceNorm2d: _instance_norm, nn.InstanceNorm3d: _instance_norm,
    nn.LayerNorm: lambda g, q, m, x: (F.layer_norm, (x, m.normalized_shape, _attr(g, q, "weight", m),
                                                     _attr(g, q, "bias", m), m.eps)),
    nn.GroupNorm: lambda g, q, m, x: (F.group_norm, (x, m.num_groups, _attr(g, q, "weight", m),
                                                     _attr(g, q, "bias", m), m.eps)),
    nn.MaxPool1d: _pool(F.max_pool1d, "kernel_size", "stride", "padding", "dilation", "ceil_mode"),
    nn.MaxPool2d: _pool(F.max_pool2d, "kernel_size", "stride", "padding", "dilation", "ceil_mode"),
    nn.MaxPool3d: _pool(F.max_pool3d, "kernel_size", "stride", "padding", "dilation", "ceil_mode"),
    nn.AvgPool1d: _pool(F.avg_pool1d, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"),
    nn.AvgPool2d: _pool(F.avg_pool2d, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                        "divisor_override"),
    nn.AvgPool3d: _pool(F.avg_pool3d, "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                        "divisor_override"),
    nn.AdaptiveAvgPool1d: _pool(F.adaptive_avg_pool1d, "output_size"),
    nn.AdaptiveAvgPool2d: _pool(F.adaptive_avg_pool2d, "output_size"),
    nn.AdaptiveAvgPool3d: _pool(F.adaptive_avg_pool3d, "output_size"),
    nn.AdaptiveMaxPool2d: _pool(F.adaptive_max_pool2d, "output_size"),
    nn.ReLU: _act(torch.relu), nn.Sigmoid: _act(torch.sigmoid), nn.Tanh: _act(torch.tanh),
    nn.SiLU: _act(F.silu), nn.Mish: _act(F.mish), nn.Hardswish: _act(F.hardswish), nn.ReLU6: _act(F.relu6),
    nn.GELU: _act(F.gelu, "approximate"), nn.LeakyReLU: _act(F.leaky_relu, "negative_slope"),
    nn.ELU: _act(F.elu, "alpha"), nn.Hardtanh: _act(F.hardtanh, "min_val", "max_val"),
    nn.Softplus: _act(F.softplus, "beta", "threshold"),
    nn.Softmax: _act(F.softmax, "dim"), nn.LogSoftmax: _act(F.log_softmax, "dim"),
    nn.Flatten: _act(torch.flatten, "start_dim", "end_dim"),
}
# leaves that are the identity in eval mode
_IDENTITY = (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)


def _lower_leaf(gm: fx.GraphModule, node: fx.Node) -> fx.Node | None:
    """Replace a call_module node by the functional call its module makes; that call where the module was an
    in-place one (nn.ReLU(inplace=True), allowed only where that changes nothing), else None."""
    module = gm.get_submodule(node.target)
    if len(node.args) != 1 or node.kwargs:
        raise _NotFunctional(f"its {type(module).__name__} module is called with several arguments")
    if isinstance(module, _IDENTITY):
        node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
        return None
    lower = _LEAVES.get(type(module))
    if lower is None or getattr(module, "padding_mode", "zeros") != "zeros":
        raise _NotFunctional(f"its {type(module).__name__} module has no functional form here")
    with gm.graph.inserting_before(node):
        fn, args, *kwargs = lower(gm.graph, node.target, module, node.args[0])
        call = gm.graph.call_function(fn, tuple(args), kwargs[0] if kwargs else None)
    node.replace_all_uses_with(call)
    gm.graph.erase_node(node)
    if getattr(module, "inplace", False) is not True:
        return None
    _check_overwrite(call, type(module).__name__)
    return call


_INPLACE_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                      operator.itruediv: operator.truediv}


def _name(node: fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))


def _is_inplace(node: fx.Node) -> bool:
    if node.op not in ("call_function", "call_method"):
        return False
    if node.kwargs.get("inplace") is True or node.target in _INPLACE_OPERATORS:
        return True
    name = _name(node)
    return name.endswith("_") and not name.endswith("__") and not name.startswith("_")


def _undo_inplace(node: fx.Node) -> None:
    """The out-of-place twin of an in-place op, where that computes the same (_check_overwrite)."""
    _check_overwrite(node, _name(node))
    if node.kwargs.get("inplace") is True:
        node.kwargs = {**node.kwargs, "inplace": False}
    elif node.target in _INPLACE_OPERATORS:
        node.target = _INPLACE_OPERATORS[node.target]
    elif node.op == "call_method" and hasattr(torch.Tensor, node.target[:-1]):
        node.target = node.target[:-1]
    elif node.op == "call_function" and hasattr(torch, _name(node)[:-1]):
        node.target = getattr(torch, _name(node)[:-1])
    else:
        raise _NotFunctional(f"its in-place {_name(node)} has no out-of-place twin here")


def _check_overwrite(node: fx.Node, what: str) -> None:
    """Raise unless the tensor `node` overwrites in place is made by an op of this graph (not an input, a parameter
    or a view of something else) and is read by nothing after `node`: then computing `node` out of place is the
    same computation."""
    target = node.args[0] if node.args else None
    if not isinstance(target, fx.Node) or target.op not in ("call_function", "call_method") or _is_view(target):
        raise _NotFunctional(f"its in-place {what} writes into an input, a parameter or a view")
    if any(u is not node and _after(u, node) for u in target.users):
        raise _NotFunctional(f"its in-place {what} overwrites a value read afterwards")


_VIEWS = {"view", "reshape", "transpose", "permute", "t", "expand", "expand_as", "squeeze", "unsqueeze", "flatten",
          "unflatten", "view_as", "narrow", "select", "split", "chunk", "unbind", "getitem", "detach", "as_strided"}


def _is_view(node: fx.Node) -> bool:
    return _name(node) in _VIEWS


def _after(a: fx.Node, b: fx.Node) -> bool:
    """Whether node `a` comes after node `b` in their graph."""
    node = b.next
    while node.op != "root":
        if node is a:
            return True
        node = node.next
    return False


# -- export ---------------------------------------------------------------------------------------------------

def _export_capture(model: nn.Module, inputs: list, why: str) -> Captured:
    program = torch.export.export(model, tuple(inputs)).run_decompositions({})
    gm = program.graph_module
    signature = program.graph_signature
    lifted = {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
              **signature.inputs_to_lifted_tensor_constants}
    state = {**program.state_dict, **program.constants}
    root, origins = nn.Module(), {}
    owned = {*signature.inputs_to_parameters.values(), *signature.inputs_to_buffers.values()}
    for node in list(gm.graph.nodes):
        if node.op == "placeholder" and node.name in lifted:
            name = _free_name(root, lifted[node.name])
            origins[name] = lifted[node.name] if lifted[node.name] in owned else None
            value = state[lifted[node.name]]
            if isinstance(value, nn.Parameter):
                root.register_parameter(name, value)
            else:
                root.register_buffer(name, value)
            with gm.graph.inserting_before(node), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # the attribute is on `root`, not yet on gm
                attr = gm.graph.get_attr(name)
            node.replace_all_uses_with(attr)
            gm.graph.erase_node(node)
    outputs = [n for n in gm.graph.nodes if n.op == "output"][0]
    user_outputs = len(signature.user_outputs)
    if user_outputs != len(outputs.args[0]):
        raise CaptureError("its forward writes into its inputs or buffers; a forward that keeps no state is "
                           "captured")
    if user_outputs == 1:  # the model returns a tensor, not a tuple of one
        outputs.args = (outputs.args[0][0],)
    _drop_assertions(gm.graph)
    rewritten = torch_level(gm.graph)
    captured = fx.GraphModule(root, gm.graph)
    captured.graph.lint()
    notes = [f"captured with torch.export: {why}"]
    if rewritten:
        notes.append(f"{rewritten} ATen ops written as the torch functions they come from")
    return Captured(captured, "export", notes, origins)


def _drop_assertions(graph: fx.Graph) -> None:
    """Export's run-time assertions (`_assert_tensor_metadata` before each dtype cast, `_assert_scalar`, ...) check
    what the export saw; they compute nothing, yet as a second reader of a value they cut the ops around it apart
    (an RMSNorm's cast back to the model's dtype split from its normalisation)."""
    for node in list(graph.nodes):
        if node.op == "call_function" and not node.users and _name(node).startswith("_assert"):
            graph.erase_node(node)


def _free_name(root: nn.Module, qualified: str) -> str:
    name = qualified.replace(".", "_")
    while hasattr(root, name):
        name += "_"
    return name
