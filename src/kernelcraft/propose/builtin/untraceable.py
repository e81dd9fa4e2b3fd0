"""Why torch.fx could not trace a reference, in words: the shapes of its trace errors that come from the
forward's Python (a traced value used as a number, in control flow, as a slice bound, iterated over), each
said as what the forward does, so the built-in engineer can tell the user what it cannot cover."""

from __future__ import annotations

# (a fragment of the error's message, what the forward does) — the first that matches says it
_SHAPES = (
    ("cannot be interpreted as an integer",
     "its forward uses a tensor value as a Python integer (a range or a size taken from a tensor or its shape)"),
    ("not 'Proxy'", "its forward turns a tensor value into a Python number (int() or float() of a tensor or its "
                    "shape)"),
    ("cannot be used as inputs to control flow",
     "its forward branches on a tensor value (an if or while on a tensor or its shape)"),
    ("slice indices must be integers", "its forward slices with a bound computed from a tensor or its shape"),
    ("cannot be iterated", "its forward iterates over a tensor value (a for loop over it, or *args from it)"),
    ("'len' is not supported", "its forward calls len() on a tensor"),
)


def untraceable(exc: BaseException) -> str | None:
    """What the forward does that torch.fx cannot trace, in words, when `exc` (raised by fx.symbolic_trace) has
    a known shape; else, when the message names a traced value (a Proxy), that much; else None."""
    message = str(exc)
    for fragment, words in _SHAPES:
        if fragment in message:
            return words
    if "Proxy" in message:
        return "its forward uses a tensor value in a way torch.fx cannot record"
    return None
