"""The worker: the only process that runs a candidate's code. One worker serves one candidate.

Started by a supervisor (`python -m kernelcraft.verify.worker ADDRESS`, the channel's key on stdin), or
forked by its fork server (verify/forkserver.py) with the imports done, it loads the problem and the candidate, then answers requests: run the candidate on inputs the
supervisor sends (CUDA IPC on a GPU, shared memory on the CPU) and hand back its outputs; time the
candidate beside the reference. It never sees a reference output or a correctness seed: those stay
with the supervisor, which judges what comes back.

Over 400 lines on purpose: this is the one process that runs candidate code, and everything it does there is
kept in one file so that it can be read whole.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Client
from pathlib import Path


def _import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import_problem(path: Path, source: str, sizes: dict):
    """The problem as a module, its size constants set as the supervisor resolved them (never re-derived here)."""
    import types

    from kernelcraft.problems.problem import exec_problem

    module = types.ModuleType("kernelcraft_problem")
    module.__file__ = str(path)
    sys.modules["kernelcraft_problem"] = module
    exec_problem(source, str(path), module, sizes)
    return module


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A C++ frame a TVM-built compiler's message carries ('  File "/project/src/x.cc", line 9, in f'): not the model's
_NATIVE_FRAME = re.compile(r'^\s*File "[^"]*\.(?:cc|cpp|h|pxi)", line \d+')
_ERROR_LINE = re.compile(r"\berror\b[^:]*:\s*\S", re.I)  # "…(22): error: identifier …", not "Compilation error:"
MESSAGE_LINES = 40


def _said(exc: BaseException) -> str:
    """An exception's message as a model reads it: no terminal colours, no C++ frames, at most MESSAGE_LINES lines.
    A longer one (a compiler's output after the whole generated source, say) keeps its first line and its lines
    that say `error`, each with the two after it (the code quoted and the caret)."""
    lines = [ln for ln in _ANSI.sub("", str(exc)).strip("\n").splitlines() if not _NATIVE_FRAME.match(ln)]
    if len(lines) <= MESSAGE_LINES:
        return "\n".join(lines)
    keep = sorted({j for i, ln in enumerate(lines[1:], 1) if _ERROR_LINE.search(ln) for j in range(i, i + 3)
                   if j < len(lines)})
    if keep:
        shown = [lines[0], f"[{len(lines)} lines; those that say error:]"] + [lines[j] for j in keep]
        return "\n".join(shown[:MESSAGE_LINES + 2])
    return "\n".join(lines[:MESSAGE_LINES]) + f"\n[... {len(lines) - MESSAGE_LINES} more lines]"


def _trimmed_traceback(exc: BaseException, limit: int = 25) -> str:
    """What a model is shown of an error in its code. A kernel compiler's error that says its cause (the kernel's
    line, a caret, why: backends' `compiler_errors`) is that message after the candidate's line that reached it; an
    error raised inside a kernel language's compiler package (`compiler_packages`) is the candidate's own frames,
    a count of the compiler's, the frame that raised and the message; any other, the traceback's last lines."""
    from kernelcraft import backends

    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if Path(f.filename).name == "candidate.py"]
    qualname = f"{type(exc).__module__}.{type(exc).__name__}"
    if qualname.startswith(backends.compiler_errors()):
        where = f'File "candidate.py", line {own[-1].lineno}, in {own[-1].name}\n' if own else ""
        return f"{where}{type(exc).__name__}: {_said(exc)}".rstrip()
    packages = backends.compiler_packages()
    inside = [f for f in frames if any(f"/{p}/" in f.filename or f.filename.startswith(f"python/{p}/")
                                       for p in packages)]
    if own and inside:
        start = frames.index(own[0])
        shown = [f'File "candidate.py", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}' for f in own]
        if frames[-1] is not own[-1]:
            after = frames[frames.index(own[-1]) + 1:]
            python = [f for f in after if f.filename.endswith(".py")] or after
            shown.append(f"[{len(frames) - start - len(own)} frames of the compiler, the last:]")
            shown.append(f'File "{python[-1].filename}", line {python[-1].lineno}, in {python[-1].name}')
        return "\n".join(shown) + f"\n{type(exc).__name__}: {_said(exc)}"
    lines = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return "\n".join(lines[-limit:])


class CandidateFault(Exception):
    """Raised from inside the candidate's own code (its import, constructor or call): its __cause__."""


def _guarded(fn):
    """`fn` with what it raises marked as the candidate's: the harness's own faults are told apart."""
    def call(*args):
        try:
            return fn(*args)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - everything the candidate raises is a finding (an
            raise CandidateFault() from exc     # exit too: said as the candidate's, not as the worker dying)
    return call


class Worker:
    def __init__(self, conn):
        import torch

        self.conn = conn
        self.torch = torch
        self.held = None  # outputs lent to the supervisor, kept alive until the next request

    def serve(self) -> None:
        from kernelcraft.verify import ipc

        while True:
            try:
                # the supervisor's CUDA inputs, opened on this process's one GPU (verify/ipc.py)
                request = ipc.loads(self.conn.recv_bytes(), 0 if self.torch.cuda.is_available() else None)
            except EOFError:
                return
            self.held = None
            op = request.pop("op")
            if op != "spin" and getattr(self, "device", None) is not None and self.device.type == "cuda":
                self.torch.cuda.ipc_collect()  # outputs the supervisor has let go of are freed now (not in a timed spin)
            if op == "exit":
                return
            try:
                reply = getattr(self, f"do_{op}")(**request)
            except Exception as exc:  # noqa: BLE001 - reported, never raised: the supervisor judges it
                reply = self._fault(exc)
            request = None  # drop the lent inputs now, so the supervisor may free them
            self.conn.send(reply)

    def _fault(self, exc: Exception) -> dict:
        """The reply for an exception. Out of memory outside the candidate's code is the harness's; inside
        it, the candidate's, with the device's memory at that moment. Every other error is the candidate's
        (a CUDA error its kernel caused may surface in the harness's next call)."""
        torch = self.torch
        own = isinstance(exc, CandidateFault)
        cause = exc.__cause__ if own and exc.__cause__ is not None else exc
        if own and cause.__traceback__ is not None and cause.__traceback__.tb_next is not None:
            cause = cause.with_traceback(cause.__traceback__.tb_next)  # from the candidate's call, not our wrapper
        reply = {"error": f"{type(cause).__name__}: {_said(cause)}", "traceback": _trimmed_traceback(cause),
                 "compile_error": type(cause).__name__ in ("CompileError", "ObjectOnlyBuild"),
                 "exit": isinstance(cause, SystemExit)}
        if isinstance(cause, torch.OutOfMemoryError):
            reply["oom"] = "candidate" if own else "harness"
            reply["memory"] = self._memory()
        return reply

    def _release(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.empty_cache()

    def _memory(self) -> dict:
        torch = self.torch
        if getattr(self, "device", None) is None or self.device.type != "cuda":
            return {}
        free, total = torch.cuda.mem_get_info(self.device)
        return {"free": free, "total": total, "worker_reserved": torch.cuda.memory_reserved(self.device),
                "worker_peak_reserved": torch.cuda.max_memory_reserved(self.device)}

    # -- requests -------------------------------------------------------------------------------

    def do_load(self, problem_source, candidate_source, device, init_seed, sizes, build_cache, arch_list,
                gpu_memory_fraction=1.0, exact_fp32=True):
        torch = self.torch
        from kernelcraft import backends
        from kernelcraft.verify.policy import set_exact_fp32

        began, marks = time.perf_counter(), {}  # where the load's time goes (the supervisor's `load.*` phases)
        set_exact_fp32(exact_fp32)  # the policy's fp32 math for all torch work here (the baselines are timed here)
        self.device = torch.device(device)
        self.candidate_source = candidate_source
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.cuda.set_per_process_memory_fraction(gpu_memory_fraction, self.device)
        marks["device"] = time.perf_counter() - began
        here = Path.cwd()
        (here / "problem.py").write_text(problem_source)
        self.problem = _import_problem(here / "problem.py", problem_source, sizes)
        init_inputs = self.problem.get_init_inputs()
        self.reference = self._build(self.problem.Model, init_inputs, init_seed)
        marks["reference"] = time.perf_counter() - began - sum(marks.values())
        self.candidate = self.call = None
        self._fns = {}
        records: list = []
        if candidate_source is not None:
            path = here / "candidate.py"
            path.write_text(candidate_source)
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
            with backends.importing(Path(build_cache), records, candidate_source):
                module = _guarded(_import_file)(path, "kernelcraft_candidate")
                marks["import"] = time.perf_counter() - began - sum(marks.values())
                if not hasattr(module, "ModelNew"):
                    return {"error": "the candidate defines no ModelNew class", "reason": "no_model_new"}
                self.candidate = _guarded(self._build)(module.ModelNew, init_inputs, init_seed)
                marks["build"] = time.perf_counter() - began - sum(marks.values())
            self.call = _guarded(self.candidate)
        return {"ok": True, "compiles": self._own_compiles(), "marks_s": marks,
                "inline": [{"seconds": r.seconds, "log": r.log} for r in records]}

    def _build(self, cls, init_inputs, seed):
        torch = self.torch
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            model = cls(*init_inputs)
        return model.to(self.device).eval() if isinstance(model, torch.nn.Module) else model

    def do_run(self, inputs, poison):
        torch = self.torch
        self._poison(poison)
        with torch.no_grad():
            out = self.call(*inputs)
        if self.device.type == "cuda":
            _guarded(torch.cuda.synchronize)(self.device)  # an error from its kernels is the candidate's
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        strange = [f"{i}: {type(o).__module__}.{type(o).__qualname__}" for i, o in enumerate(outputs)
                   if type(o) is not torch.Tensor]
        if strange:  # never pickled: a class of the candidate's own has no business in the supervisor
            return {"not_tensor": strange}
        aliases = [i for i, o in enumerate(outputs) if isinstance(o, torch.Tensor) and _shares_memory(o, inputs)]
        if aliases:
            return {"aliases": aliases}
        # copied into memory of the harness's own: a call may hand back memory it overwrites on its next call (a
        # CUDA graph's pool, a buffer it keeps), and two calls' outputs compared must be two calls' work
        outputs = [o.clone() for o in outputs]
        if self.device.type == "cuda":
            _guarded(torch.cuda.synchronize)(self.device)
        self.held = outputs
        reply = {"outputs": outputs}
        compiled = self._own_compiles()
        if compiled:  # a just-in-time language's kernels, compiled inside this call: their time apart from it
            reply["compiles"] = compiled
        return reply

    def _own_compiles(self) -> list[dict]:
        """What the backends compiled since last asked, of the candidate's own code: a compile that names the module
        of its function (Triton's) counts where that is the candidate's or one its language generated for it."""
        from kernelcraft import backends
        from kernelcraft.verify.attribution import CANDIDATE_MODULE

        rows = backends.compiles((self.device.index or 0) if self.device.type == "cuda" else None)
        if not any(r.get("module") is not None for r in rows):
            return rows
        module = sys.modules.get(CANDIDATE_MODULE)
        own = {CANDIDATE_MODULE} | (backends.launch_modules(module) if module is not None else set())
        return [r for r in rows if r.get("module") is None or r["module"] in own]

    def _poison(self, specs) -> None:
        """Fill freed allocator blocks of the outputs' sizes with NaN, so unwritten output shows."""
        torch = self.torch
        if self.device.type != "cuda":
            return
        blocks = []
        for shape, dtype in specs:
            t = torch.empty(shape, dtype=dtype, device=self.device)
            t.fill_(float("nan") if t.is_floating_point() else -1)
            blocks.append(t)
        torch.cuda.synchronize(self.device)
        del blocks

    def do_profile(self, inputs):
        """Which kernels one call runs, and which of them the candidate's own code launched or built (GPU: the
        profiler beside the candidate's recorded launches and its extensions' kernels; CPU: Triton launches counted).
        The candidate's module is the one do_load imports its file as (attribution.CANDIDATE_MODULE)."""
        from kernelcraft.backends import cuda_inline
        from kernelcraft.backends import declared_kernels, get_backend, launch_modules
        from kernelcraft.verify.attribution import CANDIDATE_MODULE, count_triton_launches, profile_call

        declared = declared_kernels(self.candidate_source or "")
        module = sys.modules.get(CANDIDATE_MODULE)  # and the modules its kernels' language generated for them
        own = frozenset({CANDIDATE_MODULE} | (launch_modules(module) if module is not None else set()))
        if self.device.type == "cuda":
            return {"attribution": profile_call(self.call, inputs, declared, list(cuda_inline.BUILT_EXTENSIONS),
                                                own).to_dict()}
        if not get_backend("triton").declared_kernels(self.candidate_source or ""):
            return {"attribution": None, "note": "kernel attribution: on the CPU only Triton launches can be "
                                                 "counted; not checked for this candidate"}
        with self.torch.no_grad():
            return {"attribution": count_triton_launches(self.call, inputs, declared, own).to_dict()}

    def do_stage(self, sets, slots):
        """Hold the supervisor's input sets and output slots for the outside clock (`do_spin`): its memory, lent
        once, whose values it rewrites (this process frozen) before every spin."""
        self.staged = (sets, slots)
        return {"ok": True}

    def do_unstage(self):
        self.staged = None
        return {"ok": True}

    def do_spin(self, order: list[int]):
        """One call on each staged input set in the supervisor's `order`, back to back, each output copied into its
        set's slot, then a device-wide sync. The supervisor times this from outside, copies the slots inside its
        clock and checks them itself: nothing this process says about the spin is believed."""
        torch = self.torch
        sets, slots = self.staged
        with torch.no_grad():
            for i in order:
                inputs, slot = sets[i], slots[i]
                out = self.call(*inputs)
                outputs = list(out) if isinstance(out, (tuple, list)) else [out]
                if len(outputs) != len(slot):
                    return {"error": f"a call returned {len(outputs)} outputs, {len(slot)} expected",
                            "reason": "output_count"}
                for output, into in zip(outputs, slot):
                    into.copy_(output)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return {"ok": True}

    def _timed_fns(self, names) -> dict:
        """The callables to time by name, built once per worker (torch.compile compiles on first call)."""
        torch = self.torch
        for name in names:
            if name not in self._fns:
                fn = (self.call if name == "candidate" else self.reference if name == "eager"
                      else torch.compile(self.reference))
                self._fns[name] = _no_grad(torch, fn)
        return {n: self._fns[n] for n in names}

    def do_warm(self, seed, names):
        """Call each callable once (torch.compile compiles here): before the device's timing lock is taken."""
        from kernelcraft.verify.inputs import draw_inputs

        inputs = draw_inputs(self.problem, str(self.device), seed)
        for fn in self._timed_fns(names).values():
            fn(*inputs)
        if self.device.type == "cuda":
            _guarded(self.torch.cuda.synchronize)(self.device)
        return {"ok": True}

    def do_time(self, seed, names, config, l2_bytes, keep=1):
        torch = self.torch
        from kernelcraft.verify.inputs import draw_inputs, mutate_inputs, mutation_kind
        from kernelcraft.verify.timing import time_interleaved

        kind = mutation_kind(self.problem)
        self._release()
        run = time_interleaved(self._timed_fns(names),
                               lambda r: draw_inputs(self.problem, str(self.device), seed + r),
                               self.device, config, l2_bytes, mutate=lambda xs, s: mutate_inputs(xs, s, kind),
                               sample="candidate" if "candidate" in names else None, keep=keep)
        samples = []
        for sample in run.samples:
            outputs = list(sample.outputs) if isinstance(sample.outputs, (tuple, list)) else [sample.outputs]
            if any(type(o) is not torch.Tensor for o in outputs):
                return {"error": "a timed call returned something other than plain tensors", "reason": "output_not_tensor"}
            samples.append({"round": sample.round, "mutations": sample.mutations, "outputs": outputs,
                            "device_only": sample.device_only})
        self.held = samples
        reply = {"timings": run.timings, "samples": samples, "rounds": run.rounds, "mutations": run.mutations,
                 "wall_ms": run.wall_ms, "event_ms": run.event_ms, "memory": self._memory(), "split": run.split}
        run = None
        self._release()  # what the timing cached goes back, so the supervisor can check the samples
        return reply


def _no_grad(torch, fn):
    def call(*args):
        with torch.no_grad():
            return fn(*args)
    return call


def _shares_memory(out, inputs) -> bool:
    import torch

    if not out.numel():
        return False
    lo = out.untyped_storage().data_ptr()
    hi = lo + out.untyped_storage().nbytes()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.numel():
            xlo = x.untyped_storage().data_ptr()
            if xlo < hi and lo < xlo + x.untyped_storage().nbytes():
                return True
    return False


def _warm_profiler(torch) -> None:
    """Start CUPTI once now (about a second), while this worker waits on standby, not mid-evaluation."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]):
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()


def _end_with_parent(poll: float = 0.5) -> None:
    """End this worker (and whatever the candidate started in its group) once its supervisor is gone: a supervisor
    killed outright (a lost cluster actor, `kill -9`) cannot kill its workers, and a candidate still running would
    go on holding the device."""
    supervisor = int(os.environ.get("KERNELCRAFT_SUPERVISOR_PID") or os.getppid())  # gone before we look: caught

    def alive() -> bool:
        try:
            os.kill(supervisor, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # there, though not ours to signal (a user namespace): alive
            return True
        return True

    def watch() -> None:
        while alive():
            time.sleep(poll)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _pin_cores() -> None:
    """Every thread of this process on the cores its supervisor gives all its workers, baseline workers too
    (`KERNELCRAFT_CPU_CORES`): a candidate that raises its thread count inside its own call gains no core the
    baselines did not have. Threads started later inherit it; one that widens its own is found from outside
    (containment.affinity_widened)."""
    cores = os.environ.get("KERNELCRAFT_CPU_CORES")
    if not cores:
        return
    cpus = {int(c) for c in cores.split(",")}
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass


def main() -> None:
    address = sys.argv[1]
    key = bytes.fromhex(sys.stdin.readline().strip())
    sys.stdin.close()
    run(address, key, "spawn")


def run(address: str, key: bytes, start: str) -> None:
    """Start up, connect to the supervisor at `address` with `key`, serve it, exit. A spawned worker comes here
    from `main`; one forked by the fork server (verify/forkserver.py) with its imports already done."""
    _pin_cores()
    _end_with_parent()
    # where a start-up's time goes (seconds since the supervisor spawned this process), so a slow start can be told
    # apart: the interpreter and the package's imports (torch among them), CUDA's initialisation, CUPTI's
    spawned = float(os.environ.get("KERNELCRAFT_SPAWNED_AT") or time.time())
    marks = {"imports": time.time() - spawned}
    import torch
    import torch.multiprocessing

    torch.multiprocessing.set_sharing_strategy("file_system")
    info = {"ready": True, "pid": os.getpid(), "torch": str(torch.__version__), "threads": torch.get_num_threads(),
            "start": start}
    if torch.cuda.is_available():  # before connecting: a standby worker is warm when it is taken
        torch.cuda.init()
        torch.empty(1, device="cuda")
        marks["cuda_init"] = time.time() - spawned
        info["device"] = torch.cuda.get_device_name()
        _warm_profiler(torch)
        marks["profiler"] = time.time() - spawned
    import kernelcraft.verify.inputs  # noqa: F401
    import kernelcraft.verify.timing  # noqa: F401
    from kernelcraft.backends import prepare_process

    prepare_process()  # each backend's set-up before any candidate (on a CPU: Triton's interpreter made ready)
    marks["ready"] = time.time() - spawned
    info["start_marks_s"] = {k: round(v, 4) for k, v in marks.items()}

    conn = Client(address, family="AF_UNIX", authkey=key)
    conn.send(info)
    Worker(conn).serve()
    conn.close()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks and threads are not ours to wait on


if __name__ == "__main__":
    main()
