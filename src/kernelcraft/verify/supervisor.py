"""The supervisor of one device: the trusted side of every evaluation on it. (Past 400 lines for a reason: the
trusted side is kept in one module to be read as a whole, as the next paragraphs say.)

It draws the inputs (secret seeds, several distributions), fingerprints them with a secret key, lends
them to a fresh worker, takes the outputs back, and only then computes the reference from the inputs
(the fingerprint proves them unchanged) and compares. A worker serves one candidate and is killed after
it; the next one is started while the current candidate runs, so a crash, a hang or a sticky CUDA error costs
only that candidate (the workers' life: workers.py). Before any of that, a problem's memory need is checked
against the device (`admit`), and work on the device holds the device's lock across processes (`device_phase`).

The trusted side of an evaluation is kept in this one module, to be read as a whole (how the verifier is set up
lives in config.py; how workers start and end in workers.py, process.py and forkserver.py; the judging in judge.py;
the timing in speed.py).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import os
import threading
import time
from dataclasses import dataclass

import psutil
import torch
import torch.multiprocessing

from kernelcraft import hardware
from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.problems.cost import Cost, compute_cost
from kernelcraft.problems.sizes import Sizes, module_constants, resolve_sizes
from kernelcraft.result import INTERRUPTED, Result, Status
from kernelcraft.target import Target
from kernelcraft.verify import judge, speed
from kernelcraft.backends import declared_kernels, get_backend
from kernelcraft.backends import worker_env as backend_env
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildOutcome, inline_cache
from kernelcraft.verify.config import VerifyConfig
from kernelcraft.verify.devicelock import DeviceBusy, DeviceLock, device_key
from kernelcraft.verify.guards import static_findings
from kernelcraft.verify.inputs import fresh_seed
from kernelcraft.verify.memory import MemoryNeed, ProblemTooLarge, check_fits, release_cache
from kernelcraft.verify.phases import PhaseClock
from kernelcraft.verify.policy import Policy, get_policy
from kernelcraft.verify.process import UnsafeReply, WorkerDied, WorkerLimit, WorkerTimeout
from kernelcraft.verify.workers import Workers

LOAD_STEPS = ("device", "reference", "import", "build")  # the parts of a worker's load it reports (worker.do_load)
# The time past which the evaluation in progress (on this thread) may not wait for the device's lock
# (Candidate.wait_until): a run's wall budget bounds its waits on other processes.
_WAIT_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar("wait_until", default=None)


# A problem whose evaluation needs more than this share of the device waits for the last worker's exit (its
# memory back) before its candidate loads; a smaller one loads while that worker exits.
LOAD_BESIDE_EXITING = 0.25
# Baselines measured beside evaluations (`Supervisor.target`) take at most this share of the device's memory together,
# and a problem needing more than it is judged or measured with none beside it.
BASELINES_BESIDE = 0.25


@dataclass
class _Reference:
    module: object
    model: torch.nn.Module | None  # built on the device when a candidate of the problem is judged
    cost: Cost
    sizes: Sizes
    ignored: list[str]  # override names this problem does not define
    need: MemoryNeed


def goes_beside(device_type: str, device_lock: bool, beside: int, need: int, total: int) -> bool:
    """Whether a target's baselines are measured beside evaluations (`Supervisor.target`): on a GPU, with the
    device lock keeping timings exclusive, and with every baseline measured beside (`beside` bytes, this one's
    `need` added) within a quarter of the device's memory."""
    return device_type == "cuda" and device_lock and beside + need <= BASELINES_BESIDE * total


class Supervisor:
    def __init__(self, device: str, config: VerifyConfig, baselines: BaselineStore, on_event=None):
        self.device = torch.device(device)
        self.on_event = on_event or (lambda kind, info: None)
        if self.device.type == "cpu":
            # CPU tensors travel through named shared memory (the default passes file descriptors
            # over a side channel keyed to multiprocessing's own process tree, which the worker is not in).
            torch.multiprocessing.set_sharing_strategy("file_system")
        self.config = config
        self.policy: Policy = get_policy(config.policy)
        self.baselines = baselines
        self.init_seed = fresh_seed()
        self.references: dict[str, _Reference] = {}
        self._with_model: collections.OrderedDict[str, None] = collections.OrderedDict()  # problems whose model is built
        self.lock = threading.Lock()  # one evaluation at a time on a device
        self.beside_need = 0  # bytes the baselines measured beside evaluations may take (`target`)
        self.beside_done = threading.Condition(self.lock)
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            self.device_name, self.l2_bytes, self.total_memory = props.name, props.L2_cache_size, props.total_memory
            self.spec = hardware.spec_for(props.name)
            self.arch_list = f"{props.major}.{props.minor}"
        else:
            self.device_name, self.l2_bytes, self.spec, self.arch_list = "cpu", 0, None, "9.0"
            self.total_memory = psutil.virtual_memory().total
        self.cores: set[int] | None = None  # the cores a CPU's workers are pinned to, candidates' and baselines'
        # Triton's autotuning results are cached on disk too, so a fresh worker does not re-tune.
        self.worker_env = {"KERNELCRAFT_CACHE": str(config.cache_dir), "TRITON_CACHE_AUTOTUNING": "1",
                           **backend_env(self.device.type)}  # on a CPU: the Triton and Helion interpreters
        if self.device.type == "cuda":
            self.worker_env["CUDA_VISIBLE_DEVICES"] = str(self._physical_index())
        else:
            self.worker_env.update(CUDA_VISIBLE_DEVICES="")
            if config.cpu_threads is not None:  # baseline workers are spawned with this env too
                self.worker_env.update(OMP_NUM_THREADS=str(config.cpu_threads), MKL_NUM_THREADS=str(config.cpu_threads))
                # and pinned to the same cores: a candidate's worker has no core its baselines did not have
                self.cores = set(sorted(os.sched_getaffinity(0))[-config.cpu_threads:])
                self.worker_env["KERNELCRAFT_CPU_CORES"] = ",".join(str(c) for c in sorted(self.cores))
        self.workers = Workers(self.device, config, self.worker_env)
        self.restarts = 0  # workers lost to crashes
        self.aborted = False  # abort(): stopping, every verdict from here on "interrupted"
        self.device_lock = DeviceLock(device_key(self.device))
        self.too_large: dict[str, str] = {}  # problem key -> why it cannot be evaluated here

    def _physical_index(self) -> str:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        index = self.device.index or 0
        return visible.split(",")[index] if visible else str(index)

    @property
    def worker_device(self) -> str:
        return "cuda:0" if self.device.type == "cuda" else "cpu"  # the worker sees one GPU

    def close(self) -> None:
        self.workers.close()

    def abort(self) -> None:
        """Stop now (Ctrl-C or SIGTERM): the evaluation in progress has its workers killed and its verdict is
        `verifier_error` / `interrupted`, which never counts against the kernel (a resumed run judges it again)."""
        self.aborted = True
        self.workers.abort()

    # -- the reference side ---------------------------------------------------------------------

    def plan(self, problem: Problem) -> _Reference:
        """The problem at the sizes it runs at here, resolved once (the worker is sent these constants): its
        module, cost and memory need, nothing on the device yet. Raises ProblemTooLarge (once per problem, the
        same error after) when the device does not have the memory an evaluation of it needs."""
        key = problem.sha
        if key in self.too_large:
            raise ProblemTooLarge(self.too_large[key])
        if key not in self.references:
            overrides = self.config.sizes or {}
            sizes = resolve_sizes(problem, self.config.size, self.device.type, overrides, strict=False)
            ignored = [n for n in overrides if n not in module_constants(problem)] if overrides else []
            module = problem.load(sizes=sizes)
            cost = compute_cost(module)
            self.workers.settle()  # what is free is measured: no killed worker's memory counted as taken
            try:
                need = check_fits(problem.name, sizes.describe(), cost, self.device, self.l2_bytes,
                                  processes=2 + self.config.standby_workers)  # and the worker judging
            except ProblemTooLarge as exc:
                if not self.beside_need:
                    self.too_large[key] = str(exc)
                    raise
                while self.beside_need:  # baselines measured beside hold memory now: asked again without them
                    self.beside_done.wait()
                return self.plan(problem)
            self.references[key] = _Reference(module, None, cost, sizes, ignored, need)
        return self.references[key]

    def reference(self, problem: Problem) -> _Reference:
        """The plan with the reference model on the device. Models of the two problems judged last are kept;
        an older one is dropped (a bench of a hundred problems does not pile their weights up on the GPU)."""
        ref = self.plan(problem)
        if ref.model is None:
            devices = [self.device.index or 0] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.init_seed)
                model = ref.module.Model(*ref.module.get_init_inputs())
            ref.model = model.to(self.device).eval()
        self._with_model[problem.sha] = None
        self._with_model.move_to_end(problem.sha)
        while len(self._with_model) > 2:
            old, _ = self._with_model.popitem(last=False)
            self.references[old].model = None
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return ref

    def admit(self, problem: Problem) -> MemoryNeed:
        """Whether a problem can be evaluated here at all, before any candidate: its memory need, or
        ProblemTooLarge (a problem-level error: report it once, never as each candidate's failure)."""
        with self.lock:
            return self.plan(problem).need

    def target(self, problem: Problem) -> Target:
        """What a candidate of `problem` is measured against here: sizes, baselines, roofline floor. Baselines
        still to measure are measured beside evaluations where that is safe: their worker starts, loads and
        compiles (torch.compile, seconds of CPU) with this supervisor's lock released, the device judging
        candidates meanwhile; their timing holds the lock and the device, as a candidate's does. Safe: on a GPU
        with the device lock on (it keeps timings exclusive), and with every baseline measured beside small
        together (`goes_beside`); a larger problem is judged or measured alone."""
        with self.lock:
            self.workers.settle()
            ref = self.plan(problem)
            need = ref.need.total
            if not goes_beside(self.device.type, self.config.device_lock, self.beside_need, need, self.total_memory):
                self._alone(ref)
                return speed.measure_target(self, problem)
            self.beside_need += need
            try:
                return speed.measure_target(self, problem, unlocked=self._unlocked)
            finally:
                self.beside_need -= need
                self.beside_done.notify_all()

    def _alone(self, ref: _Reference) -> None:
        """Wait (the lock held, released while waiting) for the baselines measured beside to be done, if this
        problem is too large to share the device's memory with them."""
        while self.beside_need and ref.need.total > BASELINES_BESIDE * self.total_memory:
            self.beside_done.wait()

    @contextlib.contextmanager
    def _unlocked(self):
        self.lock.release()
        try:
            yield
        finally:
            self.lock.acquire()

    # -- one evaluation -------------------------------------------------------------------------

    def evaluate(self, problem: Problem, candidate: Candidate, build: BuildOutcome | None, ahead: int = 0,
                 build_wait: float = 0.0) -> Result:
        """Judge one candidate; `ahead` says how many more jobs follow (workers are spawned for them);
        `build_wait` is how long its job waited for its build, counted in its wall time."""
        with self.lock:
            start = time.perf_counter()
            result = Result(problem.name, candidate.name, candidate.backend, device=self.device_name,
                            policy=self.policy.name, versions={"torch": str(torch.__version__)})
            if build is not None:
                result.phases["build_wait"] = round(build_wait, 4)
            bound = _WAIT_UNTIL.set(candidate.wait_until)  # this evaluation's waits for the device's lock
            try:
                self._evaluate(problem, candidate, build, result, ahead)
            except Exception:
                if not self.aborted:  # stopping, a worker refused or killed mid-step is no fault: not judged, below
                    raise
            finally:
                _WAIT_UNTIL.reset(bound)
                result.wall_seconds = round(time.perf_counter() - start + build_wait, 3)
            if self.aborted:  # whatever the killed workers left it saying: not judged
                stopped = Result(problem.name, candidate.name, candidate.backend, device=self.device_name,
                                 policy=self.policy.name, versions=result.versions, wall_seconds=result.wall_seconds)
                return stopped.fail("verifier_error", INTERRUPTED, "stopped (Ctrl-C or SIGTERM) before its verdict: "
                                    "not judged")
            return result

    def _evaluate(self, problem, candidate, build, result: Result, ahead: int) -> None:
        if not self._admissible(problem, candidate, build, result):
            return
        try:
            self._alone(self.plan(problem))
            ref = self.reference(problem)
        except ProblemTooLarge as exc:
            result.fail("verifier_error", "problem_too_large", str(exc))
            return
        result.flops, result.bytes = ref.cost.flops, ref.cost.bytes
        result.sizes = ref.sizes.to_dict()
        if ref.ignored:
            result.notes.append(f"sizes: {', '.join(ref.ignored)} not defined by {problem.name}, not applied")
        result.memory = {"estimate": ref.need.total}
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        worker = self.workers.take(ahead)
        result.containment = worker.containment_info()
        case = judge.Case(worker, ref, result, self.policy, self.device, self.config, self.l2_bytes, self.spec,
                          self.cores, first_timeout=max(self.config.run_timeout, self.config.load_timeout)
                          if candidate.compiles else None)
        clock = PhaseClock(result.phases)
        try:
            with clock("worker_start"):
                worker.ready()
            if ref.need.total > LOAD_BESIDE_EXITING * self.total_memory:
                self.workers.settle()  # a large problem's load allocates: the last worker's memory first
            with clock("load"):
                ok = self._load(worker, problem, candidate, result)
            self.workers.settle()
            with clock("check"), self.device_phase(result, shared=True):
                ok = ok and judge.trials(case)
            with clock("attribution"), self.device_phase(result, shared=True):
                ok = ok and (not self.config.attribution or not candidate.attribute
                             or judge.attribution(case, self.config.allow_library))
                if ok and self.config.attribution and not candidate.attribute:
                    result.notes.append("kernel attribution: not checked, as its caller asked (a model kernelcraft "
                                        "wrote, run as CUDA graphs or with no kernel of its own)")
            if ok:
                with clock("time"):
                    speed.time_candidate(self, case, problem)
        except WorkerTimeout as exc:
            result.fail("timeout", "timeout", f"{exc} (the worker's process group was killed)")
        except UnsafeReply as exc:
            result.fail("rejected", "unsafe_reply", f"{exc}: the reply was refused unread")
        except WorkerLimit as exc:
            result.fail(exc.status, exc.reason, f"{exc} (the worker's process group and tree were killed)")
        except WorkerDied as exc:
            result.fail("runtime_error", "early_exit" if exc.exitcode == 0 else "worker_crashed", str(exc))
            self.restarts += 1
        except judge.HarnessFault as exc:
            result.fail("verifier_error", exc.reason, str(exc))
        except DeviceBusy as exc:  # not the candidate's doing: not judged, said so
            result.fail("verifier_error", "device_busy", f"{exc}: not judged")
        except torch.OutOfMemoryError as exc:  # in this process: the harness's own allocation
            result.fail("verifier_error", "harness_oom", f"out of memory in the harness (the supervisor), not the "
                        f"candidate: {str(exc).splitlines()[0]}")
        finally:
            self.workers.retire(worker)
            if self.device.type == "cuda":
                release_cache(self.device)
                result.memory["supervisor_peak_reserved"] = torch.cuda.max_memory_reserved(self.device)
        if result.status is None:
            result.status, result.correct = Status.OK, True

    def _admissible(self, problem: Problem, candidate: Candidate, build: BuildOutcome | None, result: Result) -> bool:
        """What can be decided before any candidate code runs: its source (the problem's own statements it
        carries unchanged are the user's, not read for rules), its build, its backend."""
        if self.config.static_guards:
            for finding in static_findings(candidate.source, trusted=problem.source):
                result.fail("rejected", finding.reason, f"static check: the candidate {finding.detail}")
            backend = get_backend(candidate.backend)
            if not declared_kernels(candidate.source) and not backend.build_is_kernel and candidate.attribute:  # not asked of a model kernelcraft wrote with no kernel (Candidate)
                result.fail("rejected", "no_custom_kernel", "the candidate declares no kernel of its own "
                            "(no __global__ function, no @triton.jit function, no load_inline build)")
            if result.failed:
                return False
        unavailable = get_backend(candidate.backend).unavailable(self.device.type)
        if unavailable:  # before any build
            result.fail("rejected", *unavailable)
            return False
        if build is not None:
            result.compile_seconds, result.compile_log = round(build.seconds, 3), build.log
            result.kernels_resources = build.resources
            if not build.ok:
                result.fail("compile_error", "compile_failed", build.log.splitlines()[0] if build.log else "")
                return False
            if build.object_only:
                result.fail("rejected", "backend_needs_cuda", "the CUDA sources compiled (objects only), "
                            "but this torch has no CUDA, so the candidate cannot run here")
                return False
        return True

    def _load(self, worker, problem, candidate, result) -> bool:
        worker.freeze_between = True  # from its candidate's import on, it runs only inside a request (process.py)
        reply = worker.ask(self._load_request(problem, candidate.source), self.config.load_timeout)
        if "error" in reply:
            if reply.get("compile_error"):
                result.compile_log = (result.compile_log + "\n" + reply["error"]).strip()
                result.fail("compile_error", "compile_failed", reply["error"].splitlines()[0])
            else:
                result.fail("runtime_error", reply.get("reason", "load_failed"), reply.get("traceback") or reply["error"])
            return False
        marks = reply.get("marks_s")
        for step in LOAD_STEPS:  # the worker's own split of its load: a diagnosis only, never a verdict
            seconds = marks.get(step) if isinstance(marks, dict) else None
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                result.phases[f"load.{step}"] = round(float(seconds), 4)
        judge.record_compiles(result, reply["compiles"])  # what the backends compiled at import (NVRTC's kernels)
        return True

    def _load_request(self, problem: Problem, candidate_source: str | None) -> dict:
        return {"op": "load", "problem_source": problem.source, "candidate_source": candidate_source,
                "device": self.worker_device, "init_seed": self.init_seed,
                "sizes": self.plan(problem).sizes.constants,
                "build_cache": str(inline_cache(self.config.cache_dir, candidate_source or "", self.arch_list)),
                "arch_list": self.arch_list,
                "gpu_memory_fraction": self._worker_fraction(problem), "exact_fp32": not self.policy.allow_tf32}

    def _worker_fraction(self, problem: Problem) -> float:
        """The worker's share of the GPU: the configured one, or what the problem's timing needs if more."""
        fraction = self.config.gpu_memory_fraction
        ref = self.references.get(problem.sha)
        if ref is not None and self.device.type == "cuda":
            total = torch.cuda.get_device_properties(self.device).total_memory
            fraction = max(fraction, min(0.95, (ref.need.total - ref.need.contexts) / total + 0.05))
        return fraction

    def _standby_started(self, result: Result) -> None:
        """Wait for the standby workers' starts; the wait is recorded as the phase `standby_wait`."""
        start = time.perf_counter()
        if self.workers.standby_started():
            result.phases["standby_wait"] = round(result.phases.get("standby_wait", 0.0)
                                                  + time.perf_counter() - start, 4)

    @contextlib.contextmanager
    def device_phase(self, result: Result, shared: bool = False):
        """Hold the device's lock (across processes) for the block: exclusively for timing, `shared` for other
        work on the device. The wait is recorded, and each exclusive window. A timing waits first for the standby
        workers to have started: one starting beside it would put its CUDA start and warm-up on the device."""
        if not shared:
            self._standby_started(result)
        if not self.config.device_lock:
            yield
            return
        on_wait = lambda msg: self.on_event("lock_wait", {"device": str(self.device), "message": msg})  # noqa: E731
        with self.device_lock.held(shared, on_wait, until=_WAIT_UNTIL.get()) as waited:
            result.phases["lock_wait"] = round(result.phases.get("lock_wait", 0.0) + waited, 4)
            start = time.time()
            try:
                yield
            finally:
                if not shared:
                    result.device_held.append([round(start, 4), round(time.time(), 4)])
