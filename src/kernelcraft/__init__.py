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

        return importlib.import_module(f"kernelcraft.{name}")
    raise AttributeError(f"module 'kernelcraft' has no attribute {name!r}")


__all__ = ["__version__", *_API, *_NOUNS]
