"""The built-in engineer's kernels run in Triton's interpreter when there is no GPU (TRITON_INTERPRET=1, set
here before any kernel is made)."""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def interpreted_stdlib(monkeypatch):
    """The Triton interpreter needs TRITON_INTERPRET set before triton is imported, and the shared conftest
    imports it first (through kernelcraft.verify): triton.language's own @jit functions (tl.sum, tl.max, ...)
    were then made for the compiler. Swap in interpreted twins for the test; the generated kernels themselves
    are made after the variable is set."""
    if DEVICE == "cuda":
        return
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    for module in (tl, tl.core, tl.standard, tl.math):
        for name, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                monkeypatch.setattr(module, name, InterpretedFunction(value.fn))


@pytest.fixture(autouse=True)
def exact_reference(monkeypatch):
    """On a GPU the references' convolutions run without TF32, as under the strict policy (cuDNN's default is TF32)."""
    if DEVICE == "cuda":
        monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
