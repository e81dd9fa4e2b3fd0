"""Profile one call of a candidate, or of the reference, under Nsight Compute, in a subprocess.

ncu starts the target (target.py) in a private directory, with the worker's scrubbed environment (no
keys or tokens), in a process group of its own (a timeout kills ncu, the target and what it started) and
under the worker's resource limits; not in the worker's network and mount namespaces (ncu and its target
have not been tried inside them: in a run, only kernels the verifier has passed are profiled). So a candidate's
target could read the trusted caches' key: it is deleted after each (verify/trust.py, burn_key). The device's lock is held exclusively while ncu runs: its replays would
disturb another process's timing, and theirs its counters.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from kernelcraft.candidate import Candidate
from kernelcraft.problems import Problem
from kernelcraft.verify.profile.ncu import ProfileError, command, find_ncu, ncu_version, parse_raw, run_command, tool_error
from kernelcraft.verify.profile.summary import Profile, summarize

TIMEOUT_S = 300.0


def check_device(device: str) -> None:
    """ProfileError("no_gpu") unless `device` is a CUDA device that torch can see."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        where = "none is visible here" if device.startswith("cuda") else f"the device given is {device}"
        raise ProfileError("no_gpu", f"hardware counters need a CUDA GPU; {where}")
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise ProfileError("no_gpu", f"{device}: only {torch.cuda.device_count()} GPU(s) visible")


class Profiler:
    """Profiles on one device. ncu is looked up first: a machine without it is told so before anything else."""

    def __init__(self, device: str = "cuda", cache_dir: Path | None = None, timeout: float = TIMEOUT_S,
                 device_lock: bool = True):
        self.ncu = find_ncu()
        check_device(device)
        import torch

        from kernelcraft.verify.devicelock import DeviceLock, device_key

        self.device = torch.device(device if ":" in device else "cuda:0")
        props = torch.cuda.get_device_properties(self.device)
        self.arch_list = f"{props.major}.{props.minor}"
        self.cache_dir = Path(cache_dir) if cache_dir else Path.home() / ".cache" / "kernelcraft"
        self.timeout = timeout
        self.lock = DeviceLock(device_key(self.device)) if device_lock else None
        self._version: str | None = None

    @property
    def version(self) -> str:
        if self._version is None:
            self._version = ncu_version(self.ncu)
        return self._version

    def _physical_index(self) -> str:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        index = self.device.index or 0
        return visible.split(",")[index] if visible else str(index)

    def run(self, problem: Problem, candidate: Candidate | None, sizes: dict | None = None,
            exact_fp32: bool = True) -> Profile:
        """One call of `candidate` (None: the reference) at `sizes` (the problem's module constants), profiled.
        Raises ProfileError with a one-line reason when no profile can be had."""
        from kernelcraft.backends import declared_kernels
        from kernelcraft.verify.build import inline_cache
        from kernelcraft.verify.containment import Limits, preexec
        from kernelcraft.verify.process import worker_environment

        spec = {"problem_source": problem.source, "candidate_source": candidate.source if candidate else None,
                "sizes": {n: repr(v) for n, v in (sizes or {}).items()}, "init_seed": 0, "input_seed": 1,
                "build_cache": str(inline_cache(self.cache_dir, candidate.source if candidate else "", self.arch_list)),
                "arch_list": self.arch_list, "exact_fp32": exact_fp32}
        target = "candidate" if candidate else "reference"
        with tempfile.TemporaryDirectory(prefix="kernelcraft-ncu-") as tmp:
            here = Path(tmp)
            (here / "spec.json").write_text(json.dumps(spec))
            env, _ = worker_environment({"CUDA_VISIBLE_DEVICES": self._physical_index(), "TMPDIR": tmp,
                                         "KERNELCRAFT_CACHE": str(self.cache_dir),
                                         "TORCH_CUDA_ARCH_LIST": self.arch_list, "TRITON_CACHE_AUTOTUNING": "1"})
            cmd = command(self.ncu, [sys.executable, "-m", "kernelcraft.verify.profile.target", str(here / "spec.json")])
            if self.lock is not None:
                with self.lock.held(shared=False):
                    done = run_command(cmd, here, env, self.timeout, preexec(Limits()))
            else:
                done = run_command(cmd, here, env, self.timeout, preexec(Limits()))
            if candidate is not None:  # it ran outside the namespaces: it could have read the caches' key
                from kernelcraft.verify.trust import burn_key

                burn_key()
            outcome_path = here / "target.json"
            outcome = json.loads(outcome_path.read_text()) if outcome_path.exists() else None
            log_tail = _tail(here / "target.log")
        output = done.stdout + "\n" + done.stderr
        problem_of_tool = tool_error(output)
        if problem_of_tool is not None and problem_of_tool.reason == "counters_not_permitted":
            raise problem_of_tool
        if outcome is not None and "error" in outcome:
            raise ProfileError("target_failed", f"the {target} failed under ncu: {outcome['error'].splitlines()[0]}")
        launches = parse_raw(done.stdout)
        if not launches:  # an ==ERROR== about one kernel among others that were profiled is not fatal
            if problem_of_tool is not None:
                raise problem_of_tool
            if outcome is None:
                raise ProfileError("ncu_failed", f"ncu exited with status {done.returncode} and no result"
                                   + (f"; the target's last output: {log_tail}" if log_tail else ""))
            raise ProfileError("no_kernels", f"ncu saw no kernel in the profiled call of the {target} "
                                             "(its work ran as copies or on the host)")
        declared = declared_kernels(candidate.source) if candidate else set()
        return summarize(launches, declared, target, candidate.name if candidate else problem.name, problem.name,
                         self.version)


def _tail(path: Path, chars: int = 400) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return " ".join(text[-chars:].split())
