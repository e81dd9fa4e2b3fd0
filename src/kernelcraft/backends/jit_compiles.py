"""The compiles a just-in-time language makes in a worker, timed apart from its calls.

Triton (and Gluon and Helion, which compile through it), the CuTe DSL and TileLang compile a kernel at its first
call, not at import: the call's time holds the compile. Each of those backends installs a recorder around its
compiler in the worker (Triton's own compilation listener; a timer around the CuTe DSL's compile pipeline and
around TileLang's lowering and NVCC build) when a candidate of its language is imported, and its `compiles()`
hands back what was compiled since it was last asked: the worker reports them after the call that compiled them,
and the supervisor adds them to the result's compile time (verify/judge.py `record_compiles`). Their kernels'
registers and shared memory come from the profiler (verify/attribution.py `launch_resources`), the same for every
language. Like every record made in the candidate's process, it describes; it decides no verdict.
"""

from __future__ import annotations

import functools
import time


class CompileLog:
    """One backend's compiles in this process, not yet reported."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.installed: set[str] = set()

    def add(self, seconds: float, kernels: list[str], cached: bool = False, resources: list[dict] | None = None,
            log: str = "", module: str | None = None) -> None:
        """`module`: the Python module the compiled function was defined in, where known (the worker keeps the
        candidate's own: torch.compile's kernels compile through Triton in the same process)."""
        self.rows.append({"seconds": round(seconds, 6), "log": log, "cached": cached, "kernels": list(kernels),
                          "resources": resources or [], "module": module})

    def drain(self) -> list[dict]:
        rows, self.rows = self.rows, []
        return rows

    def timed(self, cls, attr: str, kernels) -> None:
        """Time every call of `cls.attr` from now on in this process, its compiled kernels named by
        `kernels(self_, result)`; once a process."""
        key = f"{cls.__module__}.{cls.__qualname__}.{attr}"
        if key in self.installed:
            return
        self.installed.add(key)
        original = getattr(cls, attr)
        log = self

        @functools.wraps(original)
        def compile_timed(self_, *args, **kwargs):
            began = time.perf_counter()
            out = original(self_, *args, **kwargs)  # one that raised compiled nothing
            try:
                names = kernels(self_, out)
            except Exception:  # noqa: BLE001 - a name it cannot read is left out, the time kept
                names = []
            log.add(time.perf_counter() - began, names)
            return out

        setattr(cls, attr, compile_timed)


def listen_to_triton(log: CompileLog) -> None:
    """Record Triton's compiles through its compilation listener (its own timer, in microseconds, and whether the
    compile was a cache hit), chained to any listener set before; once a process. A Triton without the listener
    (before 3.4) records nothing."""
    if "triton" in log.installed:
        return
    try:
        from triton import knobs
    except ImportError:
        return
    compilation = getattr(knobs, "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return
    log.installed.add("triton")
    previous = compilation.listener

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        name = metadata.get("name") if isinstance(metadata, dict) else None
        function = getattr(getattr(src, "fn", None), "fn", None)  # an ASTSource's JITFunction's Python function
        log.add(times.total / 1e6, [name] if name else [], cached=bool(cache_hit),
                module=getattr(function, "__module__", None) or "")
        if previous is not None:
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    compilation.listener = listener
