"""Kernel attribution: which GPU kernels a call ran, which of them are the candidate's own, on which streams
(on the CPU: which Triton launches completed, and their share of the call's time).

A kernel is the candidate's by what the candidate's own code built and launched in the profiled call, never by its
name (hack class 29, name squatting: a never-launched kernel named like ATen's `vectorized_elementwise_kernel`, or
like a cuBLAS GEMM, declared beside a call of torch.relu or torch.matmul, read as the candidate's when a kernel was
the candidate's whenever its name carried a declared one). The worker profiles one call with torch.profiler
(CUPTI's kernels, copies and fills, and the CPU ops each was launched inside), and records meanwhile what the
candidate's code launched:

- Triton: each launch through a `JITFunction` (its `run`, which `kernel[grid](...)`, autotuning and heuristics go
  through) or a compiled kernel's `[grid]` launcher, of a function defined in the candidate's module, by the
  compiled kernel's own name (`CompiledKernel.name`: the PTX entry, the name the profiler reports);
- NVRTC: each launch through kernelcraft.backends.nvrtc's `Launcher`, by kernel name (`extern "C"`: the profiler's);
- load_inline: a launch from C++ cannot be seen from Python, so what counts is the kernels the candidate's built
  extension holds, read from its ELF file (the device names its host code registers with the CUDA runtime, which
  are its own functions' symbols too), demangled as the profiler demangles them.
- the languages with a runtime of their own (CuTe DSL's compiled functions, TileLang's kernels): each call of
  that runtime, by the compiled kernels' names, as the backend's `recorded_launches` counts them.

A kernel the profiler saw is the candidate's when (`attribute`):
1. its name is exactly a name from that evidence (not one that contains it);
2. it was not launched inside a library op (`aten::…`: the profiler links each kernel to the innermost op active
   when it was launched; cuBLAS's `ampere_sgemm_…` under `aten::mm` is the library's whatever else shares its name);
3. Triton, NVRTC and runtimes that count each launch: no more calls of that name ran than the candidate launched
   (when more did, none of them counts: which were the candidate's cannot be told);
4. extension kernels: the name also carries a kernel the source declares (`__global__`), so CUB, Thrust or ATen
   templates instantiated inside the extension stay library kernels; a language runtime's kernels likewise carry
   a kernel its source declares, by that backend's `carries` (its runtime runs a library's kernels as well).
Every other kernel (ATen, cuBLAS, cuDNN, CUTLASS, torch.compile's Triton kernels, copies and fills, and kernels
replayed from a CUDA graph, which no launch of the call made) is a library kernel. `KernelShare.evidence` says what
made a kernel the candidate's, and for a library kernel that carries a declared kernel's name, why that did not count.

What this is, and is not: the records are kept in the candidate's own process, so a determined candidate can forge
them there (write into them, patch the recorders, plant symbols in its extension), and an extension that declares
an `extern "C"` kernel under a library kernel's exact plain name and calls that library from its own C++, outside
any op, would be credited. It stops name games and careless fallbacks (a try/except around a launch that never
happens, a fast path never taken). The verdicts it decides are `no_custom_kernel` and, under `allow_library=False`,
`library_kernels` (judge.attribution_finding), and the custom fraction each result reports.

The ELF reader of built extensions is verify/elf_kernels.py.

Over 400 lines on purpose: the rules, the evidence each language's launches give them and the recorders that
gather it are read together when a rule changes; the ELF reader and the languages' own recorders
(backends/kinds/*.recorded_launches) already live apart.
"""

from __future__ import annotations

import contextlib
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelcraft.verify.elf_kernels import extension_kernels

CANDIDATE_MODULE = "kernelcraft_candidate"  # the name the worker imports the candidate's file under

# What made a kernel the candidate's (KernelShare.evidence of a custom kernel) ...
TRITON_LAUNCH, NVRTC_LAUNCH, EXTENSION_SYMBOL = "triton_launch", "nvrtc_launch", "extension_symbol"
# ... or f"{backend}_launch" for a language runtime's launch (`Launches.recorded`).
# ... and why a library kernel that carries the name of a kernel the candidate declares is not the candidate's.
NAME_ONLY = "name_only"  # nothing the candidate's code launched or built in the call has exactly its name
INSIDE_LIBRARY_OP = "inside_library_op"  # launched inside an ATen (or other library) op
CALLS_EXCEED_LAUNCHES = "calls_exceed_launches"  # more calls of that name ran than the candidate launched
# Ops whose kernels are the library's, whatever they are named (an op the candidate registers has its own namespace).
LIBRARY_OP = re.compile(r"(aten|prims|quantized|_quantized|cudnn|mkldnn|miopen|torchvision|c10d|_c10d_functional)::")

@dataclass
class KernelShare:
    name: str
    custom: bool
    calls: int
    device_us: float
    streams: list[int] = field(default_factory=list)
    # custom: what made it the candidate's (TRITON_LAUNCH, NVRTC_LAUNCH, EXTENSION_SYMBOL); a library kernel that
    # carries a declared kernel's name: why that did not count (NAME_ONLY, INSIDE_LIBRARY_OP, CALLS_EXCEED_LAUNCHES);
    # else None. Absent from records written before it existed: read it with .get("evidence").
    evidence: str | None = None
    # What the profiler's activity record says of the kernel's launch (GPU only; absent from older records):
    registers: int | None = None  # registers a thread
    shared_bytes: int | None = None  # shared memory a block, static and dynamic


@dataclass
class Attribution:
    kernels: list[KernelShare]
    custom_fraction: float  # of device time, 0..1
    streams: list[int]  # every stream a kernel ran on
    timing_stream: int
    launches: dict[str, int] = field(default_factory=dict)  # what the candidate's code launched, by kernel name
    notes: list[str] = field(default_factory=list)

    @property
    def custom_ran(self) -> bool:
        return any(k.custom for k in self.kernels)

    @property
    def library_ran(self) -> bool:
        return any(not k.custom for k in self.kernels)

    @property
    def side_streams(self) -> list[int]:
        return [s for s in self.streams if s != self.timing_stream]

    def to_dict(self) -> dict:
        """The worker's reply. The first four keys are those older records hold; `launches` and `notes` came with
        attribution by launch (readers use .get), and each kernel's `evidence` too."""
        return {"kernels": [asdict(k) for k in self.kernels], "custom_fraction": self.custom_fraction,
                "streams": self.streams, "timing_stream": self.timing_stream, "launches": dict(self.launches),
                "notes": list(self.notes)}


SHORT_NAME = 2  # declared names this short match only the kernel's own function name
_FUNCTION = re.compile(r"\s*(?:void\s+)?([A-Za-z_]\w*)")  # "k", "void k(float*)", "k<float>(…)", "k_0d1d"


def is_custom(kernel_name: str, declared: set[str]) -> bool:
    """The profiler's name carries a declared name as a whole identifier (Triton may add `_0d1d…`).

    This is what attribution went by before hack class 29: now it is necessary for an extension's kernel, and
    never enough for any kernel (see the module's docstring); the ncu profiler (verify/profile) still labels
    kernels by it. A one- or two-character name (`k`) would match a token inside many a library kernel's name
    (template arguments, parameters), so it must be the kernel's function name: the name itself, or
    the name with a Triton specialisation suffix, unqualified by any namespace."""
    function = _FUNCTION.match(kernel_name)
    function = function.group(1) if function and not kernel_name[function.end():].startswith("::") else ""
    for d in declared:
        if len(d) <= SHORT_NAME:
            if re.fullmatch(rf"{re.escape(d)}(?:_\d\w*)?", function):
                return True
        elif re.search(rf"(?<![A-Za-z0-9_]){re.escape(d)}(?:(?![A-Za-z0-9_])|(?=_\d))", kernel_name):
            return True
    return False


@dataclass(frozen=True)
class Ran:
    """One kernel (or copy, fill) the profiler saw: the op it was launched inside (the innermost), None if none."""
    name: str
    stream: int
    device_us: float
    op: str | None = None


@dataclass
class Launches:
    """What the candidate's own code launched during one call, and the kernels its built extensions hold."""
    triton: dict[str, int] = field(default_factory=dict)  # compiled kernel name -> launches
    nvrtc: dict[str, int] = field(default_factory=dict)  # kernel name -> launches
    extension: set[str] = field(default_factory=set)  # kernel names as the profiler writes them (demangled)
    recorded: dict[str, dict[str, int]] = field(default_factory=dict)  # backend -> kernel name -> launches

    def counted(self) -> dict[str, int]:
        """Launches by name, Triton's, NVRTC's and the language runtimes' together (an extension's launches cannot
        be counted)."""
        out = dict(self.triton)
        for counts in (self.nvrtc, *self.recorded.values()):
            for name, n in counts.items():
                out[name] = out.get(name, 0) + n
        return out

    def bounded(self) -> set[str]:
        """Names whose count is exact, so that more calls than it disqualify them (rule 3): all but those of a
        runtime that counts only that a kernel may have launched (`Backend.exact_launch_counts`)."""
        from kernelcraft.backends import get_backend

        loose = {name for backend, counts in self.recorded.items() if not get_backend(backend).exact_launch_counts
                 for name in counts}
        return set(self.counted()) - loose


def _claim(ran: Ran, launches: Launches, declared: set[str]) -> tuple[bool, str | None]:
    """(the candidate's?, evidence or refusal) for one kernel, before the counts are compared."""
    named = is_custom(ran.name, declared)
    if ran.name in launches.triton:
        evidence = TRITON_LAUNCH
    elif ran.name in launches.nvrtc:
        evidence = NVRTC_LAUNCH
    elif ran.name in launches.extension and named:
        evidence = EXTENSION_SYMBOL
    else:
        evidence = _runtime_launch(ran.name, launches, declared)
        if evidence is None:
            return False, NAME_ONLY if named or _runtime_carries(ran.name, launches, declared) else None
    if ran.op and LIBRARY_OP.match(ran.op):
        return False, INSIDE_LIBRARY_OP
    return True, evidence


def _runtime_launch(name: str, launches: Launches, declared: set[str]) -> str | None:
    """The evidence a language runtime's recorded launch of `name` gives, where it carries a declared kernel."""
    from kernelcraft.backends import get_backend

    for backend, counts in launches.recorded.items():
        if name in counts and get_backend(backend).carries(name, declared):
            return f"{backend}_launch"
    return None


def _runtime_carries(name: str, launches: Launches, declared: set[str]) -> bool:
    """Whether `name` carries a declared kernel by some language runtime's naming (CuTe's `kernel_cutlass_…`)."""
    from kernelcraft.backends import get_backend

    return any(get_backend(backend).carries(name, declared) for backend in launches.recorded)


def attribute(ran: list[Ran], launches: Launches, declared: set[str], timing_stream: int = -1) -> Attribution:
    """The rules of the module's docstring over what the profiler saw, grouped by (name, custom, evidence)."""
    claims = [_claim(r, launches, declared) for r in ran]
    counted, bounded = launches.counted(), launches.bounded()
    claimed: dict[str, int] = {}
    for r, (custom, _) in zip(ran, claims):
        if custom and r.name in bounded:
            claimed[r.name] = claimed.get(r.name, 0) + 1
    over = {name for name, n in claimed.items() if n > counted[name]}
    shares: dict[tuple, KernelShare] = {}
    streams: set[int] = set()
    for r, (custom, evidence) in zip(ran, claims):
        if custom and r.name in over:
            custom, evidence = False, CALLS_EXCEED_LAUNCHES
        streams.add(r.stream)
        share = shares.setdefault((r.name, custom, evidence), KernelShare(r.name[:200], custom, 0, 0.0, [], evidence))
        share.calls += 1
        share.device_us += r.device_us
        if r.stream not in share.streams:
            share.streams.append(r.stream)
    kernels = sorted(shares.values(), key=lambda k: -k.device_us)
    total = sum(k.device_us for k in kernels)
    custom_us = sum(k.device_us for k in kernels if k.custom)
    return Attribution(kernels, round(custom_us / total, 4) if total else 0.0, sorted(streams), timing_stream,
                       counted)


# Device-side events that are no kernel, copy or fill: a user annotation's span (record_function), syncs.
_NOT_KERNELS = {"gpu_user_annotation", "cuda_sync", "cuda_profiler_range"}


def profiled_kernels(events) -> tuple[list[Ran], int]:
    """(what ran on the device, the timing stream) from torch.profiler's kineto events of a call profiled with CPU
    and CUDA activities, marked by a `torch.cuda._sleep` launched first on the timing stream. Each device event
    names the op it was launched inside by `linked_correlation_id()`, the `correlation_id()` of that op's event.
    Measured on an H200 with torch 2.11+cu130 (2026-11-29): that link named no op for ATen's own relu kernel, so
    there the inside-library-op rule does not fire and the exact name and the launch counts decide."""
    from torch.autograd import DeviceType

    events = list(events)

    def activity(event) -> str:
        return str(getattr(event, "activity_type", lambda: "")())

    ops = {e.correlation_id(): e.name() for e in events
           if e.device_type() == DeviceType.CPU and activity(e) == "cpu_op" and e.correlation_id() > 0}
    ran: list[Ran] = []
    timing_stream = -1
    for event in events:
        if event.device_type() != DeviceType.CUDA or activity(event) in _NOT_KERNELS or \
                getattr(event, "is_user_annotation", lambda: False)():
            continue
        name = event.name()
        if "spin_kernel" in name and timing_stream < 0:
            timing_stream = int(event.device_resource_id())
            continue
        if name.startswith(("Memcpy", "Memset")) or "ProfilerStep" in name:
            name = f"[{name.split()[0]}]"
        linked = event.linked_correlation_id()
        ran.append(Ran(name, int(event.device_resource_id()), event.duration_ns() / 1e3,
                       ops.get(linked) if linked else None))
    return ran, timing_stream


def profile_call(fn, inputs: list, declared: set[str], extensions=(),
                 modules=frozenset({CANDIDATE_MODULE})) -> Attribution:
    """Run `fn(*inputs)` once under the CUDA profiler, recording what the candidate's code launched (Triton
    functions of `modules`, NVRTC launches), and attribute its kernels; `extensions`: the candidate's built
    extensions' shared objects (backends/cuda_inline.py's BUILT_EXTENSIONS)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    built = extension_kernels(extensions)
    torch.cuda.synchronize()
    with record_launches(modules) as launches:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, torch.no_grad():
            torch.cuda._sleep(1)  # a marker on the timing stream: its stream id is the timing stream's
            fn(*inputs)
            torch.cuda.synchronize()
    launches.extension = built
    ran, timing_stream = profiled_kernels(prof.profiler.kineto_results.events())
    attribution = attribute(ran, launches, declared, timing_stream)
    figures = launch_resources(prof)
    for share in attribution.kernels:
        share.registers, share.shared_bytes = figures.get(share.name, (None, None))
    if extensions and not built:
        attribution.notes.append("kernel attribution: no kernel was found in the candidate's built extension "
                                 f"({', '.join(Path(e).name for e in extensions)}), so none of its kernels counts")
    return attribution


def launch_resources(prof) -> dict[str, tuple[int | None, int | None]]:
    """Each kernel's registers a thread and shared memory a block, by name, as the profiler's CUDA activity records
    them (its trace's kernel events; kineto writes them into the trace, not into the events torch hands back): one
    figure for every language, whatever its compiler reports. Empty where the trace holds none."""
    import json
    import tempfile

    figures: dict[str, tuple[int | None, int | None]] = {}
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "trace.json"
        try:
            prof.export_chrome_trace(str(path))
            events = json.loads(path.read_text()).get("traceEvents", [])
        except (OSError, ValueError, RuntimeError):
            return figures
    for event in events:
        args = event.get("args") or {} if isinstance(event, dict) else {}
        if event.get("cat") != "kernel" or "registers per thread" not in args:
            continue

        def number(key):
            value = args.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        figures.setdefault(str(event.get("name", ""))[:200], (number("registers per thread"), number("shared memory")))
    return figures


@contextlib.contextmanager
def record_launches(modules=frozenset({CANDIDATE_MODULE})):
    """Record, for the duration, what the candidate's own code launches on a GPU: Triton kernels of functions
    defined in `modules` (by compiled name) and NVRTC kernels (by name). Yields the `Launches` being filled."""
    launches = Launches()
    with contextlib.ExitStack() as stack:
        if "triton.runtime.jit" in sys.modules:  # a candidate that never imported Triton launched no Triton kernel
            stack.enter_context(_triton_launches(launches.triton, frozenset(modules)))
        nvrtc = sys.modules.get("kernelcraft.backends.nvrtc")
        if nvrtc is not None:
            stack.enter_context(nvrtc.recorded_launches(launches.nvrtc))
        from kernelcraft.backends import BACKENDS
        from kernelcraft.backends.base import Backend

        for backend in BACKENDS.values():  # the languages whose runtime is their own (CuTe DSL, TileLang)
            if type(backend).recorded_launches is not Backend.recorded_launches:
                stack.enter_context(backend.recorded_launches(launches.recorded.setdefault(backend.name, {})))
        yield launches


@contextlib.contextmanager
def _patched(cls, name: str, new):
    had, original = name in cls.__dict__, cls.__dict__.get(name)
    setattr(cls, name, new)
    try:
        yield
    finally:
        if had:
            setattr(cls, name, original)
        else:
            delattr(cls, name)


@contextlib.contextmanager
def _triton_launches(counts: dict[str, int], modules: frozenset):
    """Count launches of the Triton kernels defined in `modules`: through JITFunction.run (`kernel[grid](...)`,
    the autotuner's and heuristics' launches: a warm-up launches nothing; one that raised is not counted) and
    through a compiled kernel's `[grid]` launcher, by the compiled kernel's name."""
    from triton.runtime.jit import JITFunction

    def own(jit_fn) -> bool:
        return getattr(getattr(jit_fn, "fn", None), "__module__", None) in modules

    def add(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    run = JITFunction.run

    def counted_run(self, *args, **kwargs):
        kernel = run(self, *args, **kwargs)
        if kernel is not None and not kwargs.get("warmup", False) and own(self):
            add(getattr(kernel, "name", None) or self.fn.__name__)
        return kernel

    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(JITFunction, "run", counted_run))
        compiled = getattr(sys.modules.get("triton.compiler.compiler"), "CompiledKernel", None)
        if compiled is not None and "__getitem__" in compiled.__dict__:
            getitem = compiled.__getitem__

            def counted_getitem(self, grid):
                runner = getitem(self, grid)
                if not own(getattr(getattr(self, "src", None), "fn", None)):
                    return runner

                def launch(*args, **kwargs):
                    out = runner(*args, **kwargs)
                    add(self.name)
                    return out
                return launch
            stack.enter_context(_patched(compiled, "__getitem__", counted_getitem))
        yield counts


def count_triton_launches(fn, inputs: list, declared: set[str], modules=None) -> Attribution:
    """On the CPU (Triton's interpreter): the Triton launches of one call that completed, and their share
    of the call's time.

    The interpreter runs a launch synchronously on the calling thread, so the host time inside a
    completed launch is that kernel's work, and the rest of the call (torch's own CPU ops, Python) is
    not the candidate's kernels. The custom fraction is the time inside completed launches of the
    candidate's kernels over the whole call's time: kernels defined in `modules` (the worker's: the candidate's
    module; None: any kernel whose name is declared). A kernel declared but never launched counts for nothing. A
    launch that raised is not counted at all: a candidate that catches it and computes the output with torch ran
    no kernel of its own (counting launches, that read 1.0).
    """
    import time

    from triton.runtime.interpreter import InterpretedFunction

    calls: dict[tuple[str, bool], int] = {}
    seconds: dict[tuple[str, bool], float] = {}
    original = InterpretedFunction.run

    def run(self, *args, **kwargs):
        function = getattr(self, "fn", None)
        name = getattr(function, "__name__", "triton_kernel")
        own = getattr(function, "__module__", None) in modules if modules is not None else name in declared
        start = time.perf_counter()
        out = original(self, *args, **kwargs)  # if this raises, the launch is not counted
        key = (name, own)
        seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - start
        calls[key] = calls.get(key, 0) + 1
        return out

    InterpretedFunction.run = run
    try:
        start = time.perf_counter()
        fn(*inputs)
        whole = time.perf_counter() - start
    finally:
        InterpretedFunction.run = original
    # No device on the CPU: `device_us` holds host microseconds inside the launches, and no streams exist.
    kernels = [KernelShare(name, own, n, round(seconds[name, own] * 1e6, 3), [],
                           TRITON_LAUNCH if own else NAME_ONLY if is_custom(name, declared) else None)
               for (name, own), n in sorted(calls.items())]
    custom = sum(seconds[k.name, k.custom] for k in kernels if k.custom)
    launched = {k.name: k.calls for k in kernels if k.custom}
    return Attribution(kernels, round(min(custom / whole, 1.0), 4) if whole > 0 else 0.0, [], -1, launched)
