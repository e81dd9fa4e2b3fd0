"""How the attention family reads a call of F.scaled_dot_product_attention on the forward's first three inputs as
passed (q, k, v): no mask, no dropout, no grouped-query heads; causal or not, the scale a number (by attribute
when forward reads it from the module) or the default 1/sqrt(E). (Attention written by hand, softmax(q @ k^T *
scale) @ v, is read piece by piece in the interpreter's core: analyze_attention.py.)"""

from __future__ import annotations

import torch.nn.functional as F
from torch import fx

from kernelcraft.propose.builtin import spellings as sp
from kernelcraft.propose.builtin.recognize import Recognizer

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
    for flag, bad in (("attn_mask", p["attn_mask"] is not None), ("dropout_p", sp.num(p["dropout_p"]) != 0.0),
                      ("is_causal", not isinstance(p["is_causal"], bool)),
                      ("enable_gqa", p["enable_gqa"] is not False),
                      ("scale", scale is not None and sp.num(scale) is None),
                      ("shapes: broadcast or mismatched q, k, v", not ix.qkv_shapes_ok())):
        if bad:
            return ix.refuse(f"{SDPA} ({flag})", node)
    scale = sp.num(scale)
    return ix.emit("attention", "x", causal=p["is_causal"], scale=scale,
                   scale_attr=ix.attr_name(p["scale"], float) if scale is not None else None)


RECOGNIZER = Recognizer(functions={F.scaled_dot_product_attention: sdpa})
