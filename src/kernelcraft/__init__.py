"""kernelcraft: turn a PyTorch program into faster, verified custom GPU kernels.

The Python API is kernelcraft.api; `evaluate`, `optimize` and `bench` are reachable from here too, and so are
the typed verdict they return (`Result`, its `Status`, its `Timing`s)
(`problems`, `report` and `export` are subpackages' names, so those live in kernelcraft.api alone).
`kernelcraft.apply(model, DIR)` swaps the kernels `kernelcraft apply` wrote to DIR into a live model (the
`apply` package is callable; kernelcraft.api.apply runs an apply). It is imported on first use, so
`import kernelcraft` stays cheap."""

__version__ = "0.1.0"

_API = ("evaluate", "optimize", "bench", "KernelcraftError", "ConfigError")
_NOUNS = ("Result", "Status", "Timing")  # the verifier's verdict, typed (kernelcraft/result.py)


def __getattr__(name: str):
    if name in _NOUNS:
        from kernelcraft import result

        return getattr(result, name)
    if name in _API:
        from kernelcraft import api

        return getattr(api, name)
    if name in ("api", "apply"):
        import importlib

        if name == "apply":
            _interpreter_without_cuda()
        return importlib.import_module(f"kernelcraft.{name}")
    raise AttributeError(f"module 'kernelcraft' has no attribute {name!r}")


def _interpreter_without_cuda() -> None:
    """Without CUDA, Triton kernels run in Triton's interpreter alone, which must be on before triton is imported
    (its own library functions are made then): set it, where the user has not, before the apply package imports
    triton, so an apply's kernels run in a live model on a CPU as the verifier ran them."""
    import os
    import sys

    if "triton" in sys.modules or "TRITON_INTERPRET" in os.environ:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


__all__ = ["__version__", *_API, *_NOUNS]
