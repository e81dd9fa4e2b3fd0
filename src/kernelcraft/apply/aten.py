"""A torch.export graph's ATen ops written back as the torch functions and tensor methods they come from
(`aten.linear.default` -> `F.linear`, `aten.view.default` -> `x.view`), so a region cut from it reads like one cut
from a torch.fx trace and the engines that read torch (the built-in engineer) read it too.

Only where the two are the same call: the same positional parameters in the same order with the same defaults,
the same keyword names (checked against the ATen schema's arguments, so an overload whose call does not fit is
left as it is). An op not in the table stays ATen: it runs as it did, and a proposer that reads only torch says it
cannot cover it, naming it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx

aten = torch.ops.aten

# overload -> (the torch function, or a tensor method's name; how many of the schema's leading arguments it takes)
TORCH = {
    aten.linear.default: (F.linear, 3), aten.layer_norm.default: (F.layer_norm, 5),
    aten.conv2d.default: (F.conv2d, 7), aten.matmul.default: (torch.matmul, 2), aten.bmm.default: (torch.bmm, 2),
    aten.mm.default: (torch.mm, 2), aten.add.Tensor: (torch.add, 2), aten.sub.Tensor: (torch.sub, 2),
    aten.mul.Tensor: (torch.mul, 2), aten.div.Tensor: (torch.div, 2), aten.pow.Tensor_Scalar: (torch.pow, 2),
    aten.pow.Tensor_Tensor: (torch.pow, 2), aten.tanh.default: (torch.tanh, 1), aten.relu.default: (torch.relu, 1),
    aten.sigmoid.default: (torch.sigmoid, 1), aten.exp.default: (torch.exp, 1), aten.gelu.default: (F.gelu, 1),
    aten.softmax.int: (torch.softmax, 3), aten.log_softmax.int: (torch.log_softmax, 3),
    aten.clone.default: (torch.clone, 1), aten.transpose.int: (torch.transpose, 3),
    aten.permute.default: (torch.permute, 2), aten.split.Tensor: (torch.split, 3),
    aten.masked_fill.Scalar: (torch.masked_fill, 3), aten.eq.Scalar: (torch.eq, 2),
    aten.unsqueeze.default: (torch.unsqueeze, 2), aten.mean.dim: (torch.mean, 3),
    aten.sum.dim_IntList: (torch.sum, 3), aten.dropout.default: (torch.dropout, 3),
    aten.view.default: ("view", 2), aten.reshape.default: ("reshape", 2), aten.expand.default: ("expand", 2),
    aten.rsqrt.default: (torch.rsqrt, 1), aten.sqrt.default: (torch.sqrt, 1), aten.neg.default: (torch.neg, 1),
    aten.silu.default: (F.silu, 1), aten.cat.default: (torch.cat, 2), aten.where.self: (torch.where, 3),
    aten.addmm.default: (torch.addmm, 3),
    aten.scaled_dot_product_attention.default: (F.scaled_dot_product_attention, 6),
    aten._unsafe_view.default: ("reshape", 2),  # a view that owns its storage: reshape computes the same
}
IDENTITY = {aten.alias.default}  # a view of the whole tensor: its users read its input
# trailing schema arguments that pick an implementation, not a result: dropped (torch decides as it always does)
IMPLEMENTATION_ONLY = {aten.layer_norm.default: ("cudnn_enable",)}


def torch_level(graph: fx.Graph) -> int:
    """Rewrite `graph`'s ATen calls in place; how many were rewritten."""
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in IDENTITY:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
            count += 1
            continue
        if node.target not in TORCH or not _fits(node):
            continue
        target, positional = TORCH[node.target]
        if isinstance(target, str):
            node.op = "call_method"
        node.args = node.args[:positional]
        node.kwargs = {k: v for k, v in node.kwargs.items() if k not in IMPLEMENTATION_ONLY.get(node.target, ())}
        node.target = target
        count += 1
    return count


def _fits(node: fx.Node) -> bool:
    """The call's positional arguments are among those the torch call takes, none of them one the schema takes
    by keyword only, and its keywords named alike."""
    target, positional = TORCH[node.target]
    arguments = [a.name for a in node.target._schema.arguments]
    keyword_only = {a.name for a in node.target._schema.arguments if a.kwarg_only}
    if any(a.kwarg_only for a in node.target._schema.arguments[:len(node.args)]):
        return False
    if len(node.args) > positional + len(IMPLEMENTATION_ONLY.get(node.target, ())):
        return False
    if isinstance(target, str):  # a method takes the tensor positionally and nothing by keyword here
        return not node.kwargs
    return all(k in arguments[:positional] or k in keyword_only for k in node.kwargs)
