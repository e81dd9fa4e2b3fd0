"""The supervisor of one device: the trusted side of every evaluation on it.

It draws the inputs (secret seeds, several distributions), keeps a private copy, lends the inputs to
a fresh worker, takes the outputs back, and only then computes the reference from the private copy
and compares. A worker serves one candidate and is killed after it; the next one is spawned while
the current candidate runs, so a crash, a hang or a sticky CUDA error costs only that candidate.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.multiprocessing

from kernelcraft import hardware
from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.problems.cost import Cost, compute_cost
from kernelcraft.verify.baselines import BaselineStore
from kernelcraft.verify.build import BuildOutcome
from kernelcraft.verify.check import check_form, compare
from kernelcraft.verify.inputs import distributions_for, draw_inputs, fresh_seed
from kernelcraft.verify.policy import Policy, get_policy
from kernelcraft.verify.process import WorkerDied, WorkerProcess, WorkerTimeout
from kernelcraft.verify.result import Result
from kernelcraft.verify.timing import TimingConfig


@dataclass
class VerifyConfig:
    policy: str = "strict"
    trials: int = 5
    small: bool = False  # apply the problems' SMALL_SIZES
    compile_baseline: bool = True
    timing: TimingConfig = field(default_factory=TimingConfig)
    load_timeout: float = 300.0
    run_timeout: float = 60.0
    baseline_timeout: float = 600.0
    standby_workers: int = 2  # spawned ahead, so a worker's start-up (torch import, CUDA init) overlaps work
    cache_dir: Path = Path.home() / ".cache" / "kernelcraft"


@dataclass
class _Reference:
    module: object
    model: torch.nn.Module
    cost: Cost


class Supervisor:
    def __init__(self, device: str, config: VerifyConfig, baselines: BaselineStore):
        self.device = torch.device(device)
        if self.device.type == "cpu":
            # CPU tensors travel through named shared memory (the default passes file descriptors
            # over a side channel keyed to multiprocessing's own process tree, which the worker is not in).
            torch.multiprocessing.set_sharing_strategy("file_system")
        self.config = config
        self.policy: Policy = get_policy(config.policy)
        self.baselines = baselines
        self.init_seed = fresh_seed()
        self.references: dict[str, _Reference] = {}
        self.lock = threading.Lock()  # one evaluation at a time on a device
        if self.device.type == "cuda":
            props = torch.cuda.get_device_properties(self.device)
            self.device_name, self.l2_bytes = props.name, props.L2_cache_size
            self.spec = hardware.spec_for(props.name)
            self.arch_list = f"{props.major}.{props.minor}"
        else:
            self.device_name, self.l2_bytes, self.spec, self.arch_list = "cpu", 0, None, "9.0"
        self.worker_env = {"KERNELCRAFT_CACHE": str(config.cache_dir)}
        if self.device.type == "cuda":
            self.worker_env["CUDA_VISIBLE_DEVICES"] = str(self._physical_index())
        else:
            self.worker_env.update(CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET="1")
        self.standby: list[WorkerProcess] = []
        self.stripped_env: list[str] = []
        self.restarts = 0

    def _physical_index(self) -> str:
        import os

        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        index = self.device.index or 0
        return visible.split(",")[index] if visible else str(index)

    @property
    def worker_device(self) -> str:
        return "cuda:0" if self.device.type == "cuda" else "cpu"  # the worker sees one GPU

    def _take_worker(self) -> WorkerProcess:
        worker = self.standby.pop(0) if self.standby else WorkerProcess(self.worker_env)
        while len(self.standby) < self.config.standby_workers:  # they warm up while this one works
            self.standby.append(WorkerProcess(self.worker_env))
        self.stripped_env = worker.stripped
        return worker

    def close(self) -> None:
        for worker in self.standby:
            worker.kill()
        self.standby = []

    # -- the reference side ---------------------------------------------------------------------

    def reference(self, problem: Problem) -> _Reference:
        key = f"{problem.sha}-{self.config.small}"
        if key not in self.references:
            module = problem.load(small=self.config.small)
            cost = compute_cost(module)
            devices = [self.device.index or 0] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.init_seed)
                model = module.Model(*module.get_init_inputs())
            self.references[key] = _Reference(module, model.to(self.device).eval(), cost)
        return self.references[key]

    def _reference_outputs(self, ref: _Reference, inputs: list) -> list:
        with torch.no_grad():
            out = ref.model(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    # -- one evaluation -------------------------------------------------------------------------

    def evaluate(self, problem: Problem, candidate: Candidate, build: BuildOutcome | None) -> Result:
        with self.lock:
            start = time.perf_counter()
            result = Result(problem.name, candidate.name, candidate.backend, device=self.device_name,
                            policy=self.policy.name, versions={"torch": torch.__version__})
            try:
                self._evaluate(problem, candidate, build, result)
            finally:
                result.wall_seconds = round(time.perf_counter() - start, 3)
            return result

    def _evaluate(self, problem, candidate, build, result: Result) -> None:
        if build is not None:
            result.compile_seconds, result.compile_log = round(build.seconds, 3), build.log
            result.kernels_resources = build.resources
            if not build.ok:
                result.fail("compile_error", "compile_failed", build.log.splitlines()[0] if build.log else "")
                return
            if build.object_only:
                result.fail("rejected", "backend_needs_cuda", "the CUDA sources compiled (objects only), "
                            "but this torch has no CUDA, so the candidate cannot run here")
                return
        if self.device.type not in ("cuda",) and candidate.backend in ("cuda_nvrtc", "cuda_inline"):
            result.fail("rejected", "backend_needs_cuda", f"a {candidate.backend} candidate needs a CUDA device")
            return
        ref = self.reference(problem)
        result.flops, result.bytes = ref.cost.flops, ref.cost.bytes
        worker = self._take_worker()
        try:
            worker.ready()
            if self._load(worker, problem, candidate, result) and self._check(worker, ref, result):
                self._time(worker, problem, ref, result)
        except WorkerTimeout as exc:
            result.fail("timeout", "timeout", f"{exc} (the worker was killed)")
        except WorkerDied as exc:
            result.fail("runtime_error", "worker_crashed", str(exc))
            self.restarts += 1
        finally:
            worker.kill()
        if not result.reasons:
            result.status, result.correct = "ok", True

    def _load(self, worker, problem, candidate, result) -> bool:
        reply = worker.ask({"op": "load", "problem_source": problem.source, "candidate_source": candidate.source,
                            "device": self.worker_device, "init_seed": self.init_seed,
                            "small": self.config.small, "build_cache": str(self.config.cache_dir / "inline"),
                            "arch_list": self.arch_list}, self.config.load_timeout)
        if "error" in reply:
            if reply.get("compile_error"):
                result.compile_log = (result.compile_log + "\n" + reply["error"]).strip()
                result.fail("compile_error", "compile_failed", reply["error"].splitlines()[0])
            else:
                result.fail("runtime_error", reply.get("reason", "load_failed"),
                            reply.get("traceback") or reply["error"])
            return False
        if reply["nvrtc"]:
            from kernelcraft.backends.cuda_inline import ptxas_summary

            result.compile_seconds = round(sum(r["seconds"] for r in reply["nvrtc"]), 4)
            result.compile_log = "\n".join(r["log"] for r in reply["nvrtc"] if r["log"])
            result.kernels_resources = ptxas_summary(result.compile_log)
        return True

    def _check(self, worker, ref: _Reference, result: Result) -> bool:
        distributions = distributions_for(ref.module)
        poison = [(s.shape, s.dtype) for s in ref.cost.outputs]
        for trial in range(self.config.trials):
            seed, dist = fresh_seed(), distributions[trial % len(distributions)]
            result.seeds.append(seed)
            inputs = draw_inputs(ref.module, str(self.device), seed, dist)
            private = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            reply = worker.ask({"op": "run", "inputs": inputs, "poison": poison}, self.config.run_timeout)
            if "error" in reply:
                result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
                return False
            if "aliases" in reply:
                result.fail("rejected", "output_aliases_input",
                            f"output(s) {reply['aliases']} share memory with an input")
                return False
            outputs = reply["outputs"]
            if not self._inputs_unchanged(inputs, private, result):
                return False
            expected = self._reference_outputs(ref, private)
            if not all(torch.isfinite(e).all() for e in expected if e.is_floating_point()):
                result.notes.append(f"trial {trial}: the reference is not finite under '{dist}' inputs; skipped")
                continue
            if not self._judge(outputs, expected, result, f"trial {trial} ({dist})"):
                return False
            result.trials += 1
            del outputs, expected, inputs, private
        if result.trials == 0:
            result.fail("runtime_error", "reference_not_finite", "no trial had a finite reference output")
            return False
        return True

    def _inputs_unchanged(self, inputs, private, result) -> bool:
        for i, (x, p) in enumerate(zip(inputs, private)):
            if isinstance(x, torch.Tensor) and not torch.equal(x, p) and not _equal_nan(x, p):
                result.fail("rejected", "inputs_modified", f"input {i} was changed by the candidate")
                return False
        return True

    def _judge(self, outputs, expected, result: Result, label: str) -> bool:
        problem = check_form(outputs, expected, self.device)
        if problem:
            result.fail("incorrect", problem[0], f"{label}: {problem[1]}")
            return False
        worst = 0.0
        for i, (out, ref) in enumerate(zip(outputs, expected)):
            cmp = compare(out, ref, self.policy)
            worst = max(worst, cmp.max_rel_error)
            if not cmp.ok:
                result.max_rel_error = max(result.max_rel_error or 0.0, cmp.max_rel_error)
                result.fail("incorrect", cmp.reason, f"{label}, output {i}: {cmp.detail}")
                return False
        result.max_rel_error = max(result.max_rel_error or 0.0, worst)
        result.trial_errors.append({"trial": label, "max_rel_error": worst})
        return True

    def _time(self, worker, problem: Problem, ref: _Reference, result: Result) -> None:
        key = BaselineStore.key(problem.sha, self.device_name, torch.__version__, self.policy.name, self.config.small)
        cached = self.baselines.get(key)
        if cached is None or (self.config.compile_baseline and cached[1] is None):
            try:
                cached = self._measure_baselines(problem)
                self.baselines.put(key, *cached)
            except (RuntimeError, WorkerDied, WorkerTimeout) as exc:
                result.notes.append(f"no baseline: {exc}")
                cached = (None, None)
        else:
            result.baseline_cached = True
        result.eager, result.compiled = cached
        seed = fresh_seed()
        t = self.config.timing
        # The reference is timed again beside the candidate, interleaved, as a control: the same
        # GPU state for both. Speedups use the clean baseline; a control far from it is reported.
        reply = worker.ask({"op": "time", "seed": seed, "names": ["candidate", "eager"], "config": t,
                            "l2_bytes": self.l2_bytes}, t.budget_s * 4 + self.config.run_timeout * 2)
        if "error" in reply:
            result.fail("runtime_error", "candidate_raised", reply.get("traceback") or reply["error"])
            return
        result.runtime = reply["timings"]["candidate"]
        result.eager_control = reply["timings"]["eager"]
        # The outputs of the last timed round must be right too (a candidate that behaves while
        # checked and cuts corners while timed is caught here).
        inputs = draw_inputs(ref.module, str(self.device), seed + reply["last_round"])
        expected = self._reference_outputs(ref, inputs)
        if not self._judge(reply["outputs"], expected, result, "timed round"):
            result.reasons[-1:] = ["timing_output_mismatch"]
            result.status = "incorrect"
            return
        if reply["event_ms"] > reply["wall_ms"] * 1.05 + 1.0:
            result.fail("rejected", "timing_mismatch", f"events summed {reply['event_ms']:.2f} ms inside "
                        f"{reply['wall_ms']:.2f} ms of synchronised wall time")
            return
        ms = result.runtime.median_ms
        if result.eager and abs(result.eager_control.median_ms / result.eager.median_ms - 1) > 0.15:
            result.notes.append(f"baseline_drift: eager timed beside the candidate took "
                                f"{result.eager_control.median_ms:.4g} ms, the clean baseline "
                                f"{result.eager.median_ms:.4g} ms")
        if result.eager:
            result.speedup_eager = round(result.eager.median_ms / ms, 4)
        if result.compiled:
            result.speedup_compile = round(result.compiled.median_ms / ms, 4)
        if self.spec is not None:
            math_kind = "fp16" if any(s.dtype in (torch.float16, torch.bfloat16) for s in ref.cost.inputs) \
                else ("tf32" if self.policy.allow_tf32 and ref.cost.matmul_flops else "fp32")
            floor_ms = hardware.roofline_seconds(self.spec, ref.cost.flops, ref.cost.bytes, math_kind) * 1e3
            result.roofline_ms = round(floor_ms, 5)
            result.roofline_fraction = round(floor_ms / ms, 4)

    def _measure_baselines(self, problem: Problem):
        worker = WorkerProcess(self.worker_env)
        try:
            worker.ready()
            reply = worker.ask({"op": "load", "problem_source": problem.source, "candidate_source": None,
                                "device": self.worker_device, "init_seed": self.init_seed,
                                "small": self.config.small, "build_cache": str(self.config.cache_dir / "inline"),
                                "arch_list": self.arch_list}, self.config.load_timeout)
            if "error" in reply:
                raise RuntimeError(f"the reference of {problem.name} failed to load: {reply['error']}")
            names = ["eager", "compile"] if self.config.compile_baseline else ["eager"]
            reply = worker.ask({"op": "time", "seed": fresh_seed(), "names": names, "config": self.config.timing,
                                "l2_bytes": self.l2_bytes}, self.config.baseline_timeout)
            if "error" in reply:
                raise RuntimeError(f"timing the reference of {problem.name} failed: {reply['error']}")
            return reply["timings"]["eager"], reply["timings"].get("compile")
        finally:
            worker.kill()


def _equal_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.is_floating_point() and a.shape == b.shape and bool(torch.equal(a.nan_to_num(0.5), b.nan_to_num(0.5)))
