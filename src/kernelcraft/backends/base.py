"""What a backend is: the behaviour one kernel language has in kernelcraft, each in one place.

A backend says how its source is recognised (`detect`), where it can run (`unavailable`), whether its build runs
ahead in the CPU build pool (`prebuild`), what to set up around a candidate's import (`importing`: the build pool
and the worker both import the candidate under it) and in a process before any candidate runs (`prepare_process`),
what its workers' environment holds (`worker_env`), which generated modules' launches are the candidate's
(`launch_modules`), how the launches of a runtime of its own are counted (`recorded_launches`, `carries`), which of
its compiler's errors say their cause (`compiler_errors`, `compiler_packages`), what it compiled (`compiles`), which
kernels a source declares (`declared_kernels`, read by the static check and by kernel attribution), and what a model
is told about writing it (`prompt`). Each backend is one subclass in backends/kinds/, listed once in
backends/__init__.py's registry.

Nothing here decides a verdict from inside the candidate's process: the worker that imports a candidate runs these
hooks, and what they report (compile times, logs) is description, not evidence of correctness or speed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
from pathlib import Path
from typing import ClassVar, ContextManager

PROMPTS = Path(__file__).parent / "prompts"


def code_of(source: str) -> str:
    """A candidate's source with its comments removed: what `Backend.detect` reads."""
    return re.sub(r"#[^\n]*", "", source)

# The reason a verdict carries when a candidate's backend cannot run on the device it was given ...
NEEDS_DEVICE = "backend_needs_cuda"
# ... and when a package the backend imports is not installed where the verifier runs.
NOT_INSTALLED = "backend_unavailable"


class Backend:
    """One kernel language. Subclasses set the class attributes and override the hooks they need."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for listings and help
    devices: ClassVar[tuple[str, ...]]  # device types its kernels run on ("cuda", "cpu")
    # Builds that take seconds (a C++/CUDA toolchain) run in the CPU build pool ahead of the GPU; the others
    # compile at import inside the worker in well under a second.
    prebuild: ClassVar[bool] = False
    packages: ClassVar[tuple[str, ...]] = ()  # top-level Python packages its candidates import
    extra: ClassVar[str | None] = None  # the kernelcraft extra that installs them (`pip install 'kernelcraft[…]'`)
    # A candidate whose only kernels are a build of its own (a load_inline extension) has a kernel of its own
    # even where no kernel declaration can be read from its Python source.
    build_is_kernel: ClassVar[bool] = False
    # Modules of this package a candidate of this backend may import (the static guards forbid the rest).
    runtime_modules: ClassVar[frozenset[str]] = frozenset()
    # Exceptions (by "module.Class" prefix) its compiler raises that say the cause themselves, the kernel's line
    # and why: a model is shown that message and the candidate's line that reached it, not the compiler's frames.
    compiler_errors: ClassVar[tuple[str, ...]] = ()
    # Packages whose frames, between the candidate's line and an error raised inside them, a model is spared.
    compiler_packages: ClassVar[tuple[str, ...]] = ()
    # Whether `recorded_launches` counts each launch (True), or only that a kernel may have launched: then more
    # calls of a name than its count do not disqualify it (attribution's rule 3).
    exact_launch_counts: ClassVar[bool] = True

    def detect(self, code: str) -> bool:
        """Whether `code` (a candidate's source, comments removed) is written in this backend."""
        return False

    def unavailable(self, device_type: str) -> tuple[str, str] | None:
        """Why this backend's candidates cannot run on a `device_type` device here, as (reason, message); None
        when they can."""
        if device_type not in self.devices:
            wanted = " or ".join(d.upper() for d in self.devices)
            return NEEDS_DEVICE, f"a {self.name} candidate needs a {wanted} device"
        missing = [p for p in self.packages if importlib.util.find_spec(p) is None]
        if missing:
            how = f" (pip install 'kernelcraft[{self.extra}]')" if self.extra else ""
            return NOT_INSTALLED, f"a {self.name} candidate needs {', '.join(missing)}, not installed here{how}"
        return None

    def declared_kernels(self, source: str) -> set[str]:
        """The names of the kernels `source` defines in this backend's language."""
        return set()

    def importing(self, build_cache: Path, records: list, source: str = "") -> ContextManager:
        """Set up around importing a candidate (its build happens then): `build_cache` is the candidate's own part of
        the build cache, `records` collects what was built, `source` is the candidate's."""
        return contextlib.nullcontext()

    def prepare_process(self) -> None:
        """Set up a process that will run candidates of this backend, before any of them is imported."""

    def worker_env(self, device_type: str) -> dict[str, str]:
        """Environment the verifier's workers on a `device_type` device start with, for this backend's candidates."""
        return {}

    def recorded_launches(self, counts: dict[str, int]) -> ContextManager:
        """For its duration, count in `counts` (kernel name -> launches) the kernels this language's own runtime
        launches: for a language whose launches go neither through Triton's JIT nor kernelcraft's NVRTC runtime
        (verify/attribution.py reads them). A language whose count is a bound, not exact, says so in
        `exact_launch_counts`."""
        return contextlib.nullcontext(counts)

    def carries(self, kernel_name: str, declared: set[str]) -> bool:
        """Whether a kernel this language's runtime launched, by its compiled name, is one the candidate's source
        declares (`declared`: every backend's `declared_kernels`): launched by the candidate's runtime calls is not
        enough, since those may run a library's kernels in the same language."""
        return kernel_name in declared

    def launch_modules(self, module) -> set[str]:
        """Modules besides the candidate's own (`module`) whose Triton kernels, launched, are the candidate's: code
        its kernels' language generated for them."""
        return set()

    def compiles(self, device_index: int | None) -> list[dict]:
        """What this process compiled for this backend since the last call (at import, or at a just-in-time
        language's first call): each {seconds, log, cached, resources}, and `kernels` where the compiler names them."""
        return []

    def prompt(self) -> str:
        """What a model is told about writing kernels in this backend (backends/prompts/<name>.txt)."""
        path = PROMPTS / f"{self.name}.txt"
        if not path.exists():
            raise ValueError(f"a model is not asked for {self.name} kernels: there is no prompt for that backend")
        return path.read_text().strip()

    @property
    def promptable(self) -> bool:
        return (PROMPTS / f"{self.name}.txt").exists()

    def __repr__(self) -> str:
        return f"<backend {self.name}>"
