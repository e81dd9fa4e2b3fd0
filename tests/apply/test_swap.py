"""`kernelcraft.apply(model, DIR)`: the model an apply gives back. Where its final model is torch.compile's (faster
than its kernels, or nothing replaced and torch.compile faster than eager) it is torch.compile(model), unless the
kernels are asked for; a bad `use`, a model in training mode and a directory with no kernels are one clear error.
(The kernels themselves swapped into a live model: test_engine.py's CLI test.)"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn

import kernelcraft
from kernelcraft.apply.engine import MANIFEST, ApplyError
from kernelcraft.apply.times import FINAL_COMPILE, FINAL_COMPILE_GRAPHS


def _applied(tmp_path, final: str | None):
    (tmp_path / MANIFEST).write_text(json.dumps({"status": "done", "times": {"final": final} if final else None}))
    return tmp_path


def test_a_final_torch_compile_gives_back_the_compiled_model(tmp_path):
    model = nn.Linear(4, 3).eval()
    fast = kernelcraft.apply(model, _applied(tmp_path, FINAL_COMPILE))
    assert isinstance(fast, torch._dynamo.eval_frame.OptimizedModule) and fast._orig_mod is model
    with pytest.raises(ApplyError, match="model_new.py does not exist"):  # no kernels were verified
        kernelcraft.apply(model, tmp_path, use="kernels")
    with pytest.raises(ApplyError, match="training mode"):
        kernelcraft.apply(model.train(), tmp_path)


def test_a_final_torch_compile_with_cuda_graphs_gives_back_that(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(torch, "compile", lambda model, **kwargs: asked.append(kwargs) or model)
    model = nn.Linear(4, 3).eval()
    assert kernelcraft.apply(model, _applied(tmp_path, FINAL_COMPILE_GRAPHS)) is model
    assert asked == [{"mode": "reduce-overhead"}]


@pytest.mark.parametrize("final", ["as it was", None])
def test_no_kernels_and_no_faster_compile_is_said(tmp_path, final):
    with pytest.raises(ApplyError, match="does not exist"):
        kernelcraft.apply(nn.Linear(4, 3).eval(), _applied(tmp_path, final))


def test_an_unknown_use_is_refused(tmp_path):
    with pytest.raises(ApplyError, match="use one of final, kernels"):
        kernelcraft.apply(nn.Linear(4, 3).eval(), tmp_path, use="fastest")
