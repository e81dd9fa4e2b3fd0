"""The `cuda_inline` and `cpp` backends: `torch.utils.cpp_extension.load_inline`, made cacheable.

A candidate calls `load_inline` at import, as in KernelBench. While a candidate is imported (in the
build pool, then in the GPU worker) kernelcraft routes each call through `cached_builds`: the build
directory is keyed by a hash of everything that shapes the binary, so the worker's call finds the
pool's build done and only loads it, and ptxas reports registers, spills and shared memory.

The cache root the verifier passes is the candidate's own part of the inline cache (verify/build.py, inline_cache):
its build process is the only one that can write there, and a worker sees it read-only, so it imports the module
the finished build recorded (`BUILT`) without running ninja, and builds anything else in its private temp dir.

Where torch has no CUDA (CI, laptops) a CUDA extension cannot be linked; the build pool then
compiles each CUDA source to an object with nvcc, which checks the code and gives ptxas's figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

from kernelcraft.backends.errors import CompileError

_NOISE = re.compile(r"^\[\d+/\d+\]|^(/\S+/)?(c\+\+|g\+\+|gcc|cc|nvcc|ninja)(\s|$)|^FAILED:|^ninja: build stopped|"
                    r"^In file included from|^from \S+[:,]$|^Emitting ninja build file|^Building extension|"
                    r"^Loading extension|^Allowing ninja|^Detected CUDA files|^Using .* as PyTorch")


# The shared objects of every extension built or loaded through `cached_builds` in this process: where the verifier
# reads which kernels the candidate's own build holds (verify/elf_kernels.py, extension_kernels).
BUILT_EXTENSIONS: list[str] = []


@dataclass
class BuildRecord:
    name: str
    key: str
    seconds: float
    log: str
    object_only: bool = False


class ObjectOnlyBuild(Exception):
    """Raised after a CUDA source compiled to an object on a machine whose torch cannot link it."""


def trim_log(text: str, limit: int = 60) -> str:
    """Compiler output reduced to what a reader (or an LLM) acts on: errors, warnings, ptxas figures."""
    keep = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not _NOISE.search(ln.strip())]
    keep = [ln for ln in keep if "Compile time" not in ln and "-Wc++20-extensions" not in ln]
    if len(keep) > limit:
        keep = keep[: limit // 2] + [f"... ({len(keep) - limit} lines cut) ..."] + keep[-limit // 2:]
    return "\n".join(keep)


def ptxas_summary(text: str) -> list[dict]:
    """Per-kernel registers / spills / shared memory from `ptxas -v` output."""
    kernels, current = [], None
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '([^']+)'", line):
            current = {"kernel": m.group(1)}
            kernels.append(current)
        elif current is not None:
            if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
                current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
            if m := re.search(r"Used (\d+) registers", line):
                current["registers"] = int(m[1])
            if m := re.search(r"(\d+) bytes smem", line):
                current["smem"] = int(m[1])
    return kernels


def torch_has_cuda() -> bool:
    import torch

    return bool(torch.version.cuda) and torch.backends.cuda.is_built()


def _key(bound: dict) -> str:
    import torch

    material = {k: v for k, v in bound.items() if k not in ("build_directory", "verbose")}
    material["torch"] = torch.__version__
    material["arch"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:24]


BUILT = "kernelcraft_module.json"  # in a build directory: the module its build made, to import it without ninja


def _load_built(ext, build_dir: Path, params: dict):
    """The module a finished build in `build_dir` made, imported as load_inline would have (nothing written, no
    ninja run: the directory may be read-only), or None where there is none."""
    if params.get("is_standalone"):
        return None
    try:
        name = json.loads((build_dir / BUILT).read_text())["module"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str) or not (build_dir / f"{name}.so").is_file():
        return None
    return ext._import_module_from_library(name, str(build_dir), params.get("is_python_module", True))


def _writable(build_dir: Path) -> Path:
    """`build_dir`, created, or where the cache is read-only (a worker's: only a candidate's own build writes its part
    of it) the same name in this process's private temporary directory."""
    try:
        build_dir.mkdir(parents=True, exist_ok=True)
        probe = build_dir / f".probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
        return build_dir
    except OSError:
        private = Path(tempfile.gettempdir()) / "kernelcraft-inline" / build_dir.name
        private.mkdir(parents=True, exist_ok=True)
        return private


@contextlib.contextmanager
def cached_builds(cache_root: Path, records: list[BuildRecord], object_only: bool | None = None):
    """Route `load_inline` through a build cache keyed by source hash for the duration. A directory whose build
    finished (its module recorded) is imported from directly; where the cache cannot be written, a build goes to
    the private temporary directory."""
    import torch.utils.cpp_extension as ext

    original = ext.load_inline
    signature = inspect.signature(original)
    if object_only is None:
        object_only = not torch_has_cuda()

    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        params = dict(bound.arguments)
        key = _key(params)
        build_dir = Path(cache_root) / f"{params['name']}-{key}"
        cuda = params.get("cuda_sources")
        if not (cuda and object_only):
            start = time.perf_counter()
            module = _load_built(ext, build_dir, params)
            if module is not None:  # the build pool's (a worker's cache is read-only to it: verify/build.py)
                records.append(BuildRecord(params["name"], key, time.perf_counter() - start, ""))
                BUILT_EXTENSIONS.extend(str(p) for p in sorted(build_dir.glob("*.so"))
                                        if str(p) not in BUILT_EXTENSIONS)
                return module
        build_dir = _writable(build_dir)
        if cuda:
            params["extra_cuda_cflags"] = list(params.get("extra_cuda_cflags") or []) + ["-Xptxas=-v"]
        start = time.perf_counter()
        if cuda and object_only:
            log = compile_cuda_objects(cuda, params.get("extra_cuda_cflags") or [], build_dir)
            records.append(BuildRecord(params["name"], key, time.perf_counter() - start, log, True))
            raise ObjectOnlyBuild(log)
        params.update(build_directory=str(build_dir), verbose=False)
        log_path = build_dir / "kernelcraft_build.log"
        try:
            with _capture_fd_output(log_path):
                params["verbose"] = True  # ninja's output (ptxas -v included) goes to our log file
                module = original(**params)
        except Exception as exc:
            text = log_path.read_text(errors="replace") if log_path.exists() else ""
            raise CompileError(trim_log(text + "\n" + str(exc))) from None
        text = log_path.read_text(errors="replace")
        records.append(BuildRecord(params["name"], key, time.perf_counter() - start, trim_log(text)))
        BUILT_EXTENSIONS.extend(str(p) for p in sorted(build_dir.glob("*.so")) if str(p) not in BUILT_EXTENSIONS)
        if not params.get("is_standalone"):
            name = module.__name__ if isinstance(module, types.ModuleType) else Path(module).stem
            (build_dir / BUILT).write_text(json.dumps({"module": name}))
        return module

    ext.load_inline = load_inline
    try:
        yield
    finally:
        ext.load_inline = original


@contextlib.contextmanager
def _capture_fd_output(path: Path):
    """Send this process's fd 1 and 2 to `path` (ninja and the compilers write there directly)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def find_nvcc() -> str | None:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").exists():
            return str(Path(root) / "bin" / "nvcc")
    return shutil.which("nvcc")


def compile_cuda_objects(cuda_sources, cuda_flags: list[str], build_dir: Path) -> str:
    """nvcc -c each CUDA source against torch's headers; the log, or CompileError."""
    import torch.utils.cpp_extension as ext

    nvcc = find_nvcc()
    if nvcc is None:
        raise CompileError("nvcc not found: set CUDA_HOME to check CUDA sources on this machine")
    sources = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources)
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0").split(";")[0].replace(".", "").replace("+PTX", "")
    includes = [f"-I{p}" for p in ext.include_paths() + [sysconfig.get_paths()["include"]]]
    logs = []
    for i, text in enumerate(sources):
        src = build_dir / f"cuda_{i}.cu"
        src.write_text("#include <torch/extension.h>\n" + text)
        cmd = [nvcc, "-c", f"-arch=sm_{arch}", "-std=c++20", "-w", "-O3", *includes, *cuda_flags,
               str(src), "-o", str(src.with_suffix(".o"))]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        logs.append(trim_log(proc.stdout + proc.stderr))
        if proc.returncode != 0:
            raise CompileError(logs[-1] or f"nvcc exited with {proc.returncode}")
    return "\n".join(logs)
