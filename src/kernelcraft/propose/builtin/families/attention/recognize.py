"""How the attention family reads a call of F.scaled_dot_product_attention on the forward's first three inputs as
passed (q, k, v): no dropout, no grouped-query heads; causal or not, the scale a number (by attribute when forward
reads it from the module) or the default 1/sqrt(E). A mask is read where the module holds it (a buffer: what
`apply` makes of a mask a model computes from its sizes alone) and it is no mask (all kept: True, or 0.0 added) or
the causal one (key j kept for query i iff j <= i, as True/False or 0.0/-inf, or the dtype's lowest, added): the
kernel is then specialised to those values, which the problem holds in its file, so the verifier judges them.
Any other floating mask whose values are finite (no key dropped) and of a size exp2 holds is a bias (T5's position
bias, which `apply` holds as it is computed from parameters alone): the kernel reads it through its strides at run
time, whatever its values.
(Attention written by hand, softmax(q @ k^T * scale) @ v, is read piece by piece in the interpreter's core:
analyze_attention.py.)"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.recognize import Recognizer
from kernelcraft.propose.builtin.values import Attr

SDPA = "scaled_dot_product_attention"
# F.scaled_dot_product_attention's parameters after query, key, value, with their defaults
SDPA_SPEC = [("attn_mask", None), ("dropout_p", 0.0), ("is_causal", False), ("scale", None), ("enable_gqa", False)]


def sdpa(ix, node: fx.Node):
    names = [n for n, _ in SDPA_SPEC]
    given = dict(zip(names, node.args[3:]), **node.kwargs)
    if len(node.args) < 3 or len(node.args) > 3 + len(names) or set(given) - set(names):
        return ix.refuse(f"{SDPA} (arguments)", node)
    p = {n: given.get(n, d) for n, d in SDPA_SPEC}
    if [ix.inputs.get(a) if isinstance(a, fx.Node) else None for a in node.args[:3]] != [0, 1, 2]:
        return ix.refuse(f"{SDPA} (q, k, v other than the first three inputs as passed)", node)
    scale = p["scale"]
    mask = held_mask(ix, p["attn_mask"]) if p["attn_mask"] is not None else "none"
    if mask in ("causal", "bias") and p["is_causal"] is not False:
        mask = None  # a mask beside is_causal: torch refuses the pair
    for flag, bad in (("attn_mask", mask is None), ("dropout_p", sp.num(p["dropout_p"]) != 0.0),
                      ("is_causal", not isinstance(p["is_causal"], bool)),
                      ("enable_gqa", p["enable_gqa"] is not False),
                      ("scale", scale is not None and sp.num(scale) is None),
                      ("shapes: broadcast or mismatched q, k, v", not ix.qkv_shapes_ok())):
        if bad:
            return ix.refuse(f"{SDPA} ({flag})", node)
    scale = sp.num(scale)
    return ix.emit("attention", "x", causal=p["is_causal"] or mask == "causal", scale=scale,
                   scale_attr=ix.attr_name(p["scale"], float) if scale is not None else None,
                   **({"bias": ix.value(p["attn_mask"]).path} if mask == "bias" else {}))


BIAS_LIMIT = 1e30  # a bias's largest size: times log2 e it stays finite in fp32 (the dtype's lowest would not)


def held_mask(ix, arg) -> str | None:
    """"none", "causal" or "bias" for a mask the module holds (see the module's docstring), else None."""
    value = ix.value(arg) if isinstance(arg, fx.Node) else None
    if not isinstance(value, Attr):
        return None
    try:
        mask = ix.model.get_buffer(value.path)
    except AttributeError:
        return None
    shapes = ix.shapes()
    if mask.device.type == "meta" or len(shapes) < 3 or shapes[0] is None or shapes[1] is None or mask.dim() < 2:
        return None
    L, S = shapes[0][-2], shapes[1][-2]
    lead = torch.broadcast_shapes(tuple(shapes[0][:-2]), tuple(shapes[1][:-2]))
    try:  # the mask must broadcast to the scores (..., L, S) as torch broadcasts it
        if torch.broadcast_shapes(tuple(mask.shape), (*lead, L, S)) != (*lead, L, S):
            return None
    except RuntimeError:
        return None
    keep = torch.ones(L, S, dtype=torch.bool, device=mask.device).tril()
    if mask.dtype == torch.bool:
        kept = mask
    elif mask.is_floating_point():
        low = torch.finfo(mask.dtype).min
        if not bool(((mask == 0) | (mask == float("-inf")) | (mask == low)).all()):  # a bias, not a mask
            return "bias" if bool((mask.float().abs() <= BIAS_LIMIT).all()) else None
        kept = mask == 0
    else:
        return None
    if bool(kept.all()):
        return "none"
    return "causal" if bool((kept == keep).all()) else None


RECOGNIZER = Recognizer(functions={F.scaled_dot_product_attention: sdpa})
