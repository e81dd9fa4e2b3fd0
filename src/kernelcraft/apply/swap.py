"""`kernelcraft.apply(model, DIR)`: a live model run with the kernels an apply wrote to DIR.

DIR/model_new.py (engine.py writes it where the reassembled model was verified) defines `ModelNew.around(model)`,
which wraps the model given: its parameters and buffers are shared with the kernels, not copied, so the result
follows the model's weights and device. The kernels compute the model's forward in eval mode (dropout off, batch
norms on their running statistics), as it was verified, and only at the input shapes the apply cut the model at;
at other shapes the wrapped model runs as it is.

The model given back is the apply's final one (DIR/apply.json's `final`): where torch.compile of the model as it
was ran faster than its kernels, or nothing was replaced and torch.compile ran faster than eager, it is
`torch.compile(model)` (`torch.compile(model, mode="reduce-overhead")` where that, CUDA graphs, was the faster); where
the model compiled with its kernels ran fastest, it is that (DIR/model_new_compiled.py: torch.compile around the
kernels, each a custom op, replaying CUDA graphs where the apply chose them). `use="kernels"` asks for the eager
model with its kernels, `use="compiled"` for the compiled one, whichever was faster.

`model` is the model the apply's file gave: its `Model` (KernelBench's form), or, for a file defining `model` and
`example_inputs`, that module itself (wrapped as the problem's `Model` holds it, nothing copied). Without CUDA the
kernels' Triton runs in its interpreter, as the verifier ran them on a CPU: `kernelcraft.apply` turns it on where
triton was not yet imported (kernelcraft/__init__.py), and says what to set where it was.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import torch.nn as nn

import torch

from kernelcraft.apply.adapter import SHIM_NAME, as_problem_model
from kernelcraft.apply.outcome import COMPILED_FILE, MANIFEST, MODEL_FILE, ApplyError
from kernelcraft.apply.times import FINAL_COMPILE, FINAL_COMPILE_GRAPHS, FINAL_COMPILED_KERNELS
from kernelcraft.backends import prepare_process

USES = ("final", "kernels", "compiled")


def swap(model: nn.Module, directory: str | Path, use: str = "final") -> nn.Module:
    """`model` as the apply written to `directory` gives it back: with its kernels swapped in (a new module wrapping
    it, compiled where that was the faster), or torch.compile(model) where that was the faster (`use="final"`, the
    default); `use="kernels"`: the eager model with its kernels, `use="compiled"`: the compiled one, whichever was
    faster."""
    if use not in USES:
        raise ApplyError(f"use={use!r}: use one of {', '.join(USES)}")
    final = _final(Path(directory)) if use == "final" else None
    compiled = use == "compiled" or final == FINAL_COMPILED_KERNELS
    path = Path(directory) / (COMPILED_FILE if compiled else MODEL_FILE)
    if final in (FINAL_COMPILE, FINAL_COMPILE_GRAPHS):
        if model.training:
            raise ApplyError("the model is in training mode; the apply measured its eval-mode forward: call "
                             "model.eval() first")
        return torch.compile(model, mode="reduce-overhead") if final == FINAL_COMPILE_GRAPHS else torch.compile(model)
    if not path.is_file():
        raise ApplyError(f"{path} does not exist: kernelcraft apply writes it when the model with its kernels"
                         f"{' under torch.compile' if compiled else ''} was verified correct (see apply.json there "
                         "for what happened)")
    if model.training:
        raise ApplyError("the model is in training mode; the kernels compute its eval-mode forward (dropout off, "
                         "batch norms on running statistics): call model.eval() first")
    text = path.read_text()
    prepare_process()  # each backend readied (where Triton's interpreter runs them, on every Triton release)
    if "triton.jit" in text and not torch.cuda.is_available() and not _triton_runs_here():
        raise ApplyError("the kernels are Triton's and this machine has no CUDA: they run in Triton's interpreter, "
                         "which must be on before triton is imported. Set TRITON_INTERPRET=1 in the environment "
                         "(`TRITON_INTERPRET=1 python …`), or reach kernelcraft.apply before anything imports triton")
    name = "kernelcraft_applied_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # Triton and dataclasses look kernels' modules up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    # a model file's apply: the user's own module, as their file gave it, or the problem's Model (from any load of
    # the problem's file: not this module's class) holding it
    forms = [as_problem_model(module.Model, model), model] if hasattr(module, SHIM_NAME) and \
        not isinstance(model, module.Model) else [model]
    failed = None
    for form in forms:
        try:
            return module.ModelNew.around(form)
        except (RuntimeError, AttributeError) as exc:
            failed = failed or exc
    raise ApplyError(f"{path}'s kernels do not fit this model: {failed}") from None


def _triton_runs_here() -> bool:
    """Whether a Triton kernel runs on this machine's CPU: Triton's interpreter, on since before triton was imported
    (a kernel reducing with tl.sum, whose combine function triton made as it was imported, is run to see)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _total(x_ptr, out_ptr, BLOCK: tl.constexpr):
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK)), 0))

    out = torch.empty(1)
    try:
        _total[(1,)](torch.ones(4), out, BLOCK=4)
    except Exception:  # noqa: BLE001 - no driver, or the interpreter turned on after triton's import
        return False
    return out.item() == 4.0


def _final(directory: Path) -> str | None:
    """The final model the apply written to `directory` chose (None where its manifest does not say)."""
    try:
        return (json.loads((directory / MANIFEST).read_text()).get("times") or {}).get("final")
    except (OSError, ValueError):
        return None
