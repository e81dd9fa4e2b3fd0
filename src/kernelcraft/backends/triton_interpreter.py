"""Triton's interpreter (TRITON_INTERPRET=1, Triton kernels on the CPU) made to run this package's kernels on
every Triton release the package takes.

Triton 3.6's interpreter turns a scalar into a Python int with `int(array)`. Its scalars are 1-element arrays,
which numpy 2 refuses to convert, so a kernel that loops `for tile in range(tl.program_id(0), n,
tl.num_programs(0))` (most of the built-in engineer's) raises there; later releases squeeze the array first.
`make_ready()` applies that same fix in this process, before any kernel runs: the verifier's workers call it on a
CPU, and so does loading an apply's kernels into a live model."""

from __future__ import annotations

import os

_FIXED = "_kernelcraft_squeezes_scalars"


def make_ready() -> bool:
    """Where Triton's interpreter is on and importable, make its scalars convert to ints; True if it is on."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or getattr(patch, _FIXED, False):
        return True

    def patch_with_squeeze(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    setattr(patch_with_squeeze, _FIXED, True)
    interpreter._patch_lang_tensor = patch_with_squeeze
    return True
