"""A model given as a Python file exposing the model and example inputs, made a KernelBench-format problem that the
rest of kernelcraft reads (`Model`, `get_inputs`, `get_init_inputs`).

The file defines `model` (an nn.Module, or a function of no arguments returning one) and `example_inputs` (a
tensor, a list or tuple of tensors, or a function of no arguments returning those). The problem written beside the
apply's output is that file's text followed by a shim: `Model()` is a deep copy of the model with the weights it
had when the apply began (saved to a .pt beside the problem and loaded by every copy, so the reference and the
reassembled model a verifier builds hold the same ones: the user's, trained or not), `get_inputs()` draws random
tensors of the example inputs' shapes and dtypes. The verifier draws no weights of its own for such a model: its
weights are the model's.
"""

from __future__ import annotations

import types
from pathlib import Path

import torch
import torch.nn as nn

from kernelcraft.apply.extract import tensor_meta
from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem, load_problem
from kernelcraft.problems.problem import exec_problem

KERNELBENCH_NAMES = ("Model", "get_inputs", "get_init_inputs")
SHIM_NAME = "_KC_STATE"  # a name the shim defines: a module that has it was written from a model file (swap.py)

_SHIM = '''

# -- written by kernelcraft apply: the model and example inputs above as a KernelBench-format problem ------------
import copy as _kc_copy

import torch as _kc_torch

_KC_STATE = {state!r}  # the model's weights when the apply began
_KC_INPUTS = {inputs!r}  # the example inputs: (shape, dtype, for integers one past the largest value seen)


class Model(_kc_torch.nn.Module):
    def __init__(self):
        super().__init__()
        given = model if isinstance(model, _kc_torch.nn.Module) else model()
        self.model = _kc_copy.deepcopy(given)
        self.model.load_state_dict(_kc_torch.load(_KC_STATE, map_location=_kc_torch.get_default_device(),
                                                  weights_only=True))

    def forward(self, {args}):
        return self.model({args})


def get_inputs():
    return [_kc_random(shape, dtype, high) for shape, dtype, high in _KC_INPUTS]


def get_init_inputs():
    return []


def _kc_random(shape, dtype, high):
    dtype = getattr(_kc_torch, dtype)
    if dtype == _kc_torch.bool:
        return _kc_torch.rand(shape) < 0.5
    if dtype.is_floating_point:
        return _kc_torch.randn(shape, dtype=dtype)
    return _kc_torch.randint(0, max(high, 1), shape, dtype=dtype)
'''


def as_problem_model(problem_model: type, model: nn.Module) -> nn.Module:
    """`model` (the user's own module, its weights as they are now) as an instance of the shim's `Model`, which holds
    it as `.model`: what a reassembled model's `ModelNew.around` reads the tensors through. Nothing is copied."""
    wrapped = problem_model.__new__(problem_model)
    nn.Module.__init__(wrapped)
    wrapped.model = model
    return wrapped.train(model.training)


class ModelFileError(KernelcraftError):
    """A model file that is neither KernelBench-format nor a model with example inputs, said in one line."""


def is_model_file(path: Path) -> bool:
    """A Python file that defines `model` and `example_inputs` rather than KernelBench's three names."""
    try:
        if path.suffix != ".py" or not path.is_file():
            return False
    except OSError:  # source text passed where a path may be: not a file
        return False
    names = _defined(path.read_text())
    return not set(KERNELBENCH_NAMES) <= names and {"model", "example_inputs"} <= names


def model_problem(path: str | Path, out_dir: str | Path) -> Problem:
    """`path`'s model and example inputs as a problem file in `out_dir` (its weights in a .pt beside it)."""
    path, out = Path(path).resolve(), Path(out_dir).resolve()
    source = path.read_text()
    module = types.ModuleType(f"kernelcraft_model_{path.stem}")
    module.__file__ = str(path)
    try:
        exec_problem(source, str(path), module, {})
        given = module.model() if callable(module.model) and not isinstance(module.model, nn.Module) \
            else module.model
        inputs = module.example_inputs() if callable(module.example_inputs) else module.example_inputs
    except Exception as exc:  # noqa: BLE001 - the user's file: whatever it raises is said in one line
        raise ModelFileError(f"{path}: building its model and example inputs failed: {type(exc).__name__}: "
                             f"{(str(exc).splitlines() or [''])[0]}") from None
    if not isinstance(given, nn.Module):
        raise ModelFileError(f"{path}: `model` is a {type(given).__name__}, not an nn.Module (or a function "
                             "returning one)")
    inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs) if isinstance(inputs, (list, tuple)) \
        else None
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ModelFileError(f"{path}: `example_inputs` must be a tensor, or a list or tuple of tensors (or a function "
                             "returning one)")
    out.mkdir(parents=True, exist_ok=True)
    state = out / f"{path.stem}_state.pt"
    torch.save({k: v.detach().cpu() for k, v in given.state_dict().items()}, state)
    meta = [tensor_meta(x) for x in inputs]
    args = ", ".join(f"x{i}" for i in range(len(inputs)))
    problem_path = out / f"{path.stem}.py"
    problem_path.write_text(source.rstrip("\n") + "\n" + _SHIM.format(
        state=str(state), inputs=tuple((m.shape, m.dtype, m.high) for m in meta), args=args))
    return load_problem(problem_path)


def _defined(source: str) -> set[str]:
    """The names a file binds at module level (read from its syntax tree, not run)."""
    import ast

    from kernelcraft import syntax

    try:
        tree = syntax.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return names
