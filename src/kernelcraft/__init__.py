"""kernelcraft: turn a PyTorch program into faster, verified custom GPU kernels.

The Python API is kernelcraft.api; `evaluate`, `optimize` and `bench` are reachable from here too
(`problems`, `report` and `export` are subpackages' names, so those live in kernelcraft.api alone).
It is imported on first use, so `import kernelcraft` stays cheap."""

__version__ = "0.1.0"

_API = ("evaluate", "optimize", "bench", "KernelcraftError", "ConfigError")


def __getattr__(name: str):
    if name in _API:
        from kernelcraft import api

        return getattr(api, name)
    if name == "api":
        import importlib

        return importlib.import_module("kernelcraft.api")
    raise AttributeError(f"module 'kernelcraft' has no attribute {name!r}")


__all__ = ["__version__", *_API]
