"""The backends registry: every kernel language kernelcraft judges, one `Backend` each (backends/kinds/), in the
order detection tries them. The verifier, both proposers and the faces read backends here and nowhere else.

The modules beside it are the backends' own machinery: nvrtc.py (the NVRTC runtime candidates import),
cuda_inline.py (the load_inline build cache), triton_interpreter.py and triton_static.py.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from kernelcraft.backends.base import NEEDS_DEVICE, NOT_INSTALLED, Backend, code_of
from kernelcraft.backends.errors import CompileError
from kernelcraft.backends.kinds.cpp import Cpp
from kernelcraft.backends.kinds.cuda_inline import CudaInline
from kernelcraft.backends.kinds.cuda_nvrtc import CudaNvrtc
from kernelcraft.backends.kinds.cute import Cute
from kernelcraft.backends.kinds.gluon import Gluon
from kernelcraft.backends.kinds.helion import Helion
from kernelcraft.backends.kinds.tilelang import TileLang
from kernelcraft.backends.kinds.torch import Torch
from kernelcraft.backends.kinds.triton import Triton

# Detection order: the first whose `detect` claims a source is its backend (torch claims what none other does).
# Gluon and Helion before Triton: their sources import triton too. CuTe DSL and TileLang import neither.
BACKENDS: dict[str, Backend] = {b.name: b for b in (CudaNvrtc(), Gluon(), Helion(), Cute(), TileLang(), Triton(),
                                                    CudaInline(), Cpp(), Torch())}
# The backend a model is asked for when a run names none, by the first device's type.
DEFAULT_FOR_MODELS = {"cuda": "cuda_nvrtc", "cpu": "triton"}


def detect_backend(source: str) -> str:
    """Name of the backend a candidate's source uses, from what it imports and calls."""
    code = code_of(source)
    return next(b.name for b in BACKENDS.values() if b.detect(code))


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}") from None


def names(promptable: bool = False) -> list[str]:
    """The backends' names in registry order; `promptable`: only those a model can be asked for."""
    return [n for n, b in BACKENDS.items() if b.promptable or not promptable]


def declared_kernels(source: str) -> set[str]:
    """The names of the kernels `source` defines, in any backend's language."""
    return set().union(*(b.declared_kernels(source) for b in BACKENDS.values()))


@contextlib.contextmanager
def importing(build_cache: Path, records: list, source: str = ""):
    """Around importing a candidate: every backend's build set-up (backends.base.Backend.importing), each distinct
    one once. All of them, not only the detected backend's: a candidate may reach a backend in ways detection does
    not read (an aliased load_inline), and its build still goes through the cache and is recorded."""
    hooks: dict = {}
    for backend in BACKENDS.values():
        hooks.setdefault(type(backend).importing, backend)
    with contextlib.ExitStack() as stack:
        for backend in hooks.values():
            stack.enter_context(backend.importing(build_cache, records, source))
        yield


def prepare_process() -> None:
    """Ready this process to run candidates of any backend (before the first is imported)."""
    for backend in BACKENDS.values():
        backend.prepare_process()


def worker_env(device_type: str) -> dict[str, str]:
    """The environment every backend asks the verifier's workers on a `device_type` device to start with."""
    env: dict[str, str] = {}
    for backend in BACKENDS.values():
        env.update(backend.worker_env(device_type))
    return env


def launch_modules(module) -> set[str]:
    """The modules, besides the candidate's `module`, whose Triton launches are the candidate's (every backend's)."""
    return set().union(*(b.launch_modules(module) for b in BACKENDS.values()))


def compiler_errors() -> tuple[str, ...]:
    """Every backend's exceptions that say their cause themselves ("module.Class" prefixes)."""
    return tuple(dict.fromkeys(e for b in BACKENDS.values() for e in b.compiler_errors))


def compiler_packages() -> tuple[str, ...]:
    """Every backend's compiler packages, whose frames an error's message to a model leaves out."""
    return tuple(dict.fromkeys(p for b in BACKENDS.values() for p in b.compiler_packages))


def compiles(device_index: int | None) -> list[dict]:
    """What every backend compiled in this process since the last call (backends.base.Backend.compiles)."""
    return [row for b in BACKENDS.values() for row in b.compiles(device_index)]


__all__ = ["BACKENDS", "Backend", "CompileError", "DEFAULT_FOR_MODELS", "NEEDS_DEVICE", "NOT_INSTALLED",
           "compiler_errors", "compiler_packages", "compiles", "declared_kernels", "detect_backend", "get_backend",
           "importing", "launch_modules", "names", "prepare_process", "worker_env"]
