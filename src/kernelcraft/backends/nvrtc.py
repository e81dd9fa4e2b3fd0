"""The `cuda_nvrtc` backend's launch helper: compile `extern "C"` CUDA kernels with NVRTC and launch
them on torch tensors.

Candidates use it like this::

    from kernelcraft.backends.nvrtc import load_kernels
    kernels = load_kernels(SOURCE)                       # compiled once, cached by source hash
    kernels.relu(x, y, x.numel(), grid=(blocks,), block=(256,))

Arguments are converted from the kernel's own signature (parsed from the source): a tensor for a
pointer parameter, a Python number for a scalar. Launches go on torch's current CUDA stream.
Compilation needs no GPU when `arch` is given (that is how CI checks candidates).

Just past 400 lines for a reason: compiling, the signature parser and the launcher are read together by a candidate
author (one import); the parser is the part to move out when it grows.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kernelcraft.backends.errors import CompileError

# C scalar type (whitespace-normalised) -> numpy type used to pack the argument.
_SCALARS = {
    "bool": np.bool_, "char": np.int8, "signed char": np.int8, "unsigned char": np.uint8,
    "int8_t": np.int8, "uint8_t": np.uint8, "short": np.int16, "unsigned short": np.uint16,
    "int16_t": np.int16, "uint16_t": np.uint16, "int": np.int32, "signed": np.int32,
    "signed int": np.int32, "unsigned": np.uint32, "unsigned int": np.uint32, "int32_t": np.int32,
    "uint32_t": np.uint32, "long": np.int64, "long int": np.int64, "long long": np.int64,
    "long long int": np.int64, "unsigned long": np.uint64, "unsigned long long": np.uint64,
    "int64_t": np.int64, "uint64_t": np.uint64, "size_t": np.uint64, "ptrdiff_t": np.int64,
    "float": np.float32, "double": np.float64,
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|unsigned\s+)\b")
_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                     r"(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(")

_lock = threading.Lock()
_memory_cache: dict[str, "KernelModule"] = {}
# Every compilation in this process, for the verifier to report (seconds, log, cache hit).
COMPILE_RECORDS: list["CompileRecord"] = []
# While the verifier attributes one call (verify/attribution.py): kernel name -> launches made through a Launcher.
# None (nothing recorded) at every other time.
_launches: dict[str, int] | None = None


@contextlib.contextmanager
def recorded_launches(counts: dict[str, int]):
    """Count every launch through a Launcher into `counts` (kernel name -> launches) for the duration: the evidence
    that a kernel the profiler saw is one the candidate's own code launched (verify/attribution.py)."""
    global _launches
    saved, _launches = _launches, counts
    try:
        yield counts
    finally:
        _launches = saved


@dataclass
class CompileRecord:
    key: str
    seconds: float
    log: str  # NVRTC's, with ptxas -v (with a GPU driver, NVRTC may leave it empty: see KernelModule.resources)
    cached: bool
    module: "KernelModule | None" = field(default=None, repr=False)  # None when no kernel was found


@dataclass
class Param:
    name: str
    ctype: str
    pointer: bool


def parse_signatures(source: str) -> dict[str, list[Param]]:
    """Parameter lists of the `__global__` kernels in `source`, by kernel name."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    kernels: dict[str, list[Param]] = {}
    for match in _KERNEL.finditer(code):
        depth, i = 1, match.end()
        while depth and i < len(code):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            i += 1
        params = []
        for raw in filter(None, (p.strip() for p in code[match.end():i - 1].split(","))):
            if raw == "void":
                continue
            pointer = "*" in raw or "[" in raw
            words = re.sub(r"[*&\[\]]", " ", raw).split()
            name = words[-1] if len(words) > 1 else f"arg{len(params)}"
            ctype = " ".join(w for w in words[:-1] if w not in
                             ("const", "volatile", "__restrict__", "__restrict", "restrict"))
            params.append(Param(name, ctype, pointer))
        kernels[match.group(1)] = params
    return kernels


def default_arch() -> str:
    """`sm_XY` of the current CUDA device (with Hopper's `a` features), or $KERNELCRAFT_ARCH."""
    if os.environ.get("KERNELCRAFT_ARCH"):
        return os.environ["KERNELCRAFT_ARCH"]
    import torch

    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def cuda_include_dirs() -> list[str]:
    """Directories holding the CUDA headers (`cuda_fp16.h` …) that NVRTC does not bundle."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    found = [str(Path(r) / "include") for r in roots if r and (Path(r) / "include" / "cuda_fp16.h").exists()]
    if not found:
        try:
            import triton

            triton_include = Path(triton.__file__).parent / "backends" / "nvidia" / "include"
            if (triton_include / "cuda_fp16.h").exists():
                found.append(str(triton_include))
        except ImportError:
            pass
    return found[:1]


def cache_dir() -> Path:
    return Path(os.environ.get("KERNELCRAFT_CACHE", Path.home() / ".cache" / "kernelcraft")) / "nvrtc"


def compile_cubin(source: str, arch: str, options: tuple[str, ...] = ()) -> tuple[bytes, str, bool]:
    """NVRTC-compile `source` to a cubin for `arch`; returns (cubin, log, cache_hit)."""
    from cuda.core import Program, ProgramOptions

    key = hashlib.sha256("\0".join((source, arch, *options)).encode()).hexdigest()[:24]
    path = cache_dir() / f"{key}.cubin"
    if path.exists():
        return path.read_bytes(), path.with_suffix(".log").read_text(), True
    log = io.StringIO()
    program = Program(source, "c++", options=ProgramOptions(
        arch=arch, std="c++17", include_path=cuda_include_dirs() or None, ptxas_options="-v",
        diag_suppress=[177, 550], **_option_kwargs(options)))
    try:
        cubin = program.compile("cubin", logs=log).code
    except Exception as exc:  # NVRTCError carries the compiler's log in its message
        raise CompileError(_clean_log(str(exc))) from None
    finally:
        program.close()
    text = _clean_log(log.getvalue())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        path.with_suffix(".log").write_text(text)
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs a recompile
    return cubin, text, False


def _option_kwargs(options: tuple[str, ...]) -> dict:
    """The NVRTC options a candidate may ask for, as cuda.core ProgramOptions fields."""
    kwargs: dict = {}
    for opt in options:
        if opt in ("--use_fast_math", "-use_fast_math"):
            kwargs["use_fast_math"] = True
        elif opt.startswith("--maxrregcount="):
            kwargs["max_register_count"] = int(opt.split("=", 1)[1])
        elif opt.startswith("-D"):
            kwargs.setdefault("define_macro", []).append(tuple(opt[2:].split("=", 1)) if "=" in opt else opt[2:])
        elif opt == "-lineinfo":
            kwargs["lineinfo"] = True
        else:
            raise CompileError(f"unsupported NVRTC option {opt!r} (allowed: --use_fast_math, "
                               "--maxrregcount=N, -DNAME[=VALUE], -lineinfo)")
    return kwargs


def _clean_log(text: str) -> str:
    text = text.replace("\x00", "")  # NVRTC's logs end in NUL terminators
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and "Compile time" not in ln]
    return "\n".join(ln.replace("default_program", "kernel.cu") for ln in lines)


class _TorchStream:
    """Presents a torch CUDA stream through the `__cuda_stream__` protocol cuda.core reads."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@dataclass
class KernelModule:
    """Compiled kernels of one source; attribute access gives a launcher per kernel."""

    source: str
    cubin: bytes
    log: str
    signatures: dict[str, list[Param]]
    _loaded: dict = field(default_factory=dict)
    _occupancy: dict = field(default_factory=dict)  # (kernel, device, threads, shared bytes) -> blocks per SM
    _shared_allowed: set = field(default_factory=set)  # (kernel, device, dynamic shared bytes) already allowed

    def __getattr__(self, name: str):
        signatures = self.__dict__.get("signatures", {})
        if name not in signatures:
            raise AttributeError(f"no __global__ kernel named {name!r}; the source defines "
                                 f"{sorted(signatures)}")
        launchers = self.__dict__.setdefault("_launchers", {})  # one per kernel: its packers and configs kept
        if name not in launchers:
            launchers[name] = Launcher(self, name, signatures[name])
        return launchers[name]

    def __getitem__(self, name: str):
        return getattr(self, name)

    def resources(self, device_index: int) -> list[dict]:
        """Per kernel, what its code uses as the driver reports it (the code is loaded on the device): registers
        per thread, local memory per thread (stack frame and spills together), static shared memory. ptxas's
        log says more (spills apart), but on a machine with a GPU driver NVRTC may leave it empty: on an H100
        with NVRTC 13 it did for code compiled before, in the same process or an earlier one."""
        out = []
        for name, params in self.signatures.items():
            device, kernel, _ = Launcher(self, name, params)._kernel(device_index)
            device.set_current()
            attributes = kernel.attributes
            out.append({"kernel": name, "registers": attributes.num_regs, "local": attributes.local_size_bytes,
                        "smem": attributes.shared_size_bytes})
        return out

    def _kernel(self, device_index: int):
        if device_index not in self._loaded:
            from cuda.core import Device, ObjectCode

            device = Device(device_index)
            device.set_current()
            module = ObjectCode.from_cubin(self.cubin)
            self._loaded[device_index] = (device, module, {}, {})
        return self._loaded[device_index]


class Launcher:
    """One kernel's launches. What a launch needs beyond its arguments is worked out once and kept: each
    parameter's packer, and the launch configuration of each (grid, block, shared memory, cluster, cooperative)
    seen (up to `CONFIGS`), so a launch costs the host little more than the driver's call."""

    CONFIGS = 256

    def __init__(self, module: KernelModule, name: str, params: list[Param]):
        self.module, self.name, self.params = module, name, params
        self._packers = [_packer(name, p) for p in params]
        self._configs: dict = {}

    def __call__(self, *args, grid, block, shared_mem: int = 0, stream=None, cluster=None, cooperative=False):
        """Launch on torch's current stream. `grid` counts blocks, as CUDA's <<<grid, block>>> does, also when
        `cluster` (blocks per thread-block cluster, sm_90+) is given; each grid dim must then be a multiple of
        the cluster's. `cooperative`: a cooperative launch, which fails rather than start a grid whose blocks
        cannot all be resident at once (kernels that wait for one another across blocks need that)."""
        import torch
        from cuda.core import launch

        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments "
                            f"({', '.join(p.ctype + ' ' + p.name for p in self.params)}), got {len(args)}")
        device_index = next((a.get_device() for a in args if isinstance(a, torch.Tensor)), -1)
        if device_index < 0:  # no tensor, or the first on the CPU (its packer says so)
            device_index = torch.cuda.current_device()
        packed = [pack(a, device_index) for pack, a in zip(self._packers, args)]  # refuses a tensor elsewhere
        device, kernel, streams = self._kernel(device_index)
        if shared_mem > 48 * 1024 and (self.name, device_index, shared_mem) not in self.module._shared_allowed:
            _allow_dynamic_shared(kernel, device_index, shared_mem)
            self.module._shared_allowed.add((self.name, device_index, shared_mem))
        handle = stream.cuda_stream if stream is not None else torch._C._cuda_getCurrentRawStream(device_index)
        cuda_stream = streams.get(handle)
        if cuda_stream is None:
            cuda_stream = streams[handle] = device.create_stream(_TorchStream(handle))
        key = (_key(grid), _key(block), shared_mem, _key(cluster), cooperative)
        config = self._configs.get(key)
        if config is None:
            if len(self._configs) >= self.CONFIGS:
                self._configs.clear()
            config = self._configs[key] = _config(grid, block, shared_mem, cluster, cooperative)
        launch(cuda_stream, config, kernel, *packed)
        if _launches is not None:  # the verifier is attributing this call: the name is the profiler's (extern "C")
            _launches[self.name] = _launches.get(self.name, 0) + 1

    def blocks_per_sm(self, block, shared_mem: int = 0, device=None) -> int:
        """How many blocks of `block` threads (and `shared_mem` dynamic bytes) one multiprocessor holds at
        once: the occupancy the kernel's registers and shared memory allow."""
        import torch

        index = None if device is None else torch.device(device).index
        device_index = torch.cuda.current_device() if index is None else index
        threads = 1
        for d in _dims(block):
            threads *= d
        key = (self.name, device_index, threads, shared_mem)
        if key not in self.module._occupancy:  # asked on every forward: the driver is asked once
            _, kernel, _ = self._kernel(device_index)
            if shared_mem > 48 * 1024:  # the occupancy of a kernel not yet allowed that much is 0
                _allow_dynamic_shared(kernel, device_index, shared_mem)
            self.module._occupancy[key] = int(kernel.occupancy.max_active_blocks_per_multiprocessor(threads, shared_mem))
        return self.module._occupancy[key]

    def _kernel(self, device_index: int):
        device, module, kernels, streams = self.module._kernel(device_index)
        kernel = kernels.get(self.name)
        if kernel is None:
            kernel = kernels[self.name] = module.get_kernel(self.name)
        return device, kernel, streams


def _packer(kernel: str, param: Param):
    """How one parameter's argument is packed for a launch on a device (its index): a tensor's address for a
    pointer (it must be on that device), an address as it is; a scalar as the numpy type of its C type (a
    one-element tensor's value); a scalar of another C type (a struct) only as a numpy scalar given."""
    import torch

    if param.pointer:
        def pointer(value, device_index: int):
            if isinstance(value, torch.Tensor):
                if not value.is_cuda or value.get_device() != device_index:
                    raise ValueError(f"{kernel}({param.name}): tensor on {value.device}, "
                                     f"kernel launches on cuda:{device_index}")
                return np.uint64(value.data_ptr())
            if isinstance(value, int):
                return np.uint64(value)
            raise TypeError(f"{kernel}({param.name}): pointer parameter needs a tensor, "
                            f"got {type(value).__name__}")
        return pointer
    kind = _SCALARS.get(" ".join(param.ctype.split()))
    if kind is None:
        def other(value, _device_index: int):
            if isinstance(value, np.generic):
                return value
            raise TypeError(f"{kernel}({param.name}): parameter type {param.ctype!r} is not a "
                            "plain scalar; pass a numpy scalar of the right size")
        return other

    def scalar(value, _device_index: int):
        return kind(value.item() if isinstance(value, torch.Tensor) else value)
    return scalar


def _key(value):
    """A grid, block or cluster as a dict key: 4, (4,) and [4] as one."""
    return value if value is None else (value,) if isinstance(value, int) else tuple(value)


def _config(grid, block, shared_mem: int, cluster, cooperative: bool):
    from cuda.core import LaunchConfig

    extra = {"is_cooperative": True} if cooperative else {}
    if cluster is None:
        return LaunchConfig(grid=_dims(grid), block=_dims(block), shmem_size=shared_mem, **extra)
    grid_dims, cluster_dims = _clusters(grid, cluster)  # cuda.core counts the grid in clusters when a cluster is given
    return LaunchConfig(grid=grid_dims, cluster=cluster_dims, block=_dims(block), shmem_size=shared_mem, **extra)


def _dims(value) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,)
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise ValueError(f"grid and block take 1 to 3 positive sizes, got {value!r}")
    return dims


def _clusters(grid, cluster) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the grid in clusters, the cluster's dims) for a grid given in blocks."""
    blocks, per = _dims(grid), _dims(cluster)
    per = per + (1,) * (len(blocks) - len(per))
    if len(per) != len(blocks) or any(b % c for b, c in zip(blocks, per)):
        raise ValueError(f"grid {blocks} (in blocks) is not a whole number of clusters {per}")
    return tuple(b // c for b, c in zip(blocks, per)), per


def _allow_dynamic_shared(kernel, device_index: int, nbytes: int) -> None:
    from cuda.bindings import driver

    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    (err,) = driver.cuKernelSetAttribute(attribute, nbytes, kernel.handle, device_index)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot allow {nbytes} bytes of dynamic shared memory: {err}")


def load_kernels(source: str, options: tuple[str, ...] | list[str] = (), arch: str | None = None) -> KernelModule:
    """Compile (or fetch from cache) the kernels in `source` and return a KernelModule."""
    options = tuple(options)
    arch = arch or default_arch()
    key = hashlib.sha256("\0".join((source, arch, *options)).encode()).hexdigest()
    with _lock:
        if key in _memory_cache:
            return _memory_cache[key]
        start = time.perf_counter()
        cubin, log, cached = compile_cubin(source, arch, options)
        record = CompileRecord(key[:24], time.perf_counter() - start, log, cached)
        COMPILE_RECORDS.append(record)
        signatures = parse_signatures(source)
        if not signatures:
            raise CompileError("no __global__ kernel found in the source (kernels must be "
                               'declared extern "C" __global__ void name(...))')
        module = record.module = _memory_cache[key] = KernelModule(source, cubin, log, signatures)
        return module
