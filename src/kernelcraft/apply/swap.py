"""`kernelcraft.apply(model, DIR)`: a live model run with the kernels an apply wrote to DIR.

DIR/model_new.py (engine.py writes it where the reassembled model was verified) defines `ModelNew.around(model)`,
which wraps the model given: its parameters and buffers are shared with the kernels, not copied, so the result
follows the model's weights and device. The kernels compute the model's forward in eval mode (dropout off, batch
norms on their running statistics), as it was verified, and only at the input shapes the apply cut the model at;
at other shapes the wrapped model runs as it is.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import torch.nn as nn

from kernelcraft.apply.engine import MODEL_FILE, ApplyError


def swap(model: nn.Module, directory: str | Path) -> nn.Module:
    """`model` with the kernels of the apply written to `directory` swapped in (a new module wrapping it)."""
    path = Path(directory) / MODEL_FILE
    if not path.is_file():
        raise ApplyError(f"{path} does not exist: kernelcraft apply writes it when the model with its kernels was "
                         "verified faster (see apply.json there for what happened)")
    if model.training:
        raise ApplyError("the model is in training mode; the kernels compute its eval-mode forward (dropout off, "
                         "batch norms on running statistics): call model.eval() first")
    text = path.read_text()
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
    try:
        return module.ModelNew.around(model)
    except (RuntimeError, AttributeError) as exc:
        raise ApplyError(f"{path}'s kernels do not fit this model: {exc}") from None
