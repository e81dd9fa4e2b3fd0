"""The verifier actor: one per device of the cluster, in a Ray worker process of that device's node.

It owns a verifier of one device, exactly as a single machine's: its supervisor spawns the worker subprocesses
that run candidate code (isolation, containment, the device's timing lock), and its build pool compiles ahead on
the node's CPUs. The actor's own process never imports or runs a candidate. Ray sets CUDA_VISIBLE_DEVICES to the
GPU it granted, so the actor's device is always `cuda:0` (or the CPU).
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProblemSpec:
    """A problem as it travels to another node: its name, the path it was read from, and its source (the path is
    used where it holds that same source; elsewhere the source is written to a file of the actor's own)."""

    name: str
    path: str
    source: str

    @classmethod
    def of(cls, problem) -> "ProblemSpec":
        return cls(problem.name, str(problem.path), problem.source)


class VerifierActor:
    """The actor's class; `cluster/pool.py` makes it remote with the device's resources."""

    def __init__(self, kind: str, config, threads: int | None = None):
        """`threads`: torch's intra-op threads here (Ray starts actors with OMP_NUM_THREADS=1; a GPU actor's
        supervisor, reference and checks, had the node's share of cores on one machine)."""
        import torch

        from kernelcraft.verify import Verifier

        if threads:
            torch.set_num_threads(threads)
        self.kind = kind
        self.verifier = Verifier("cuda:0" if kind == "cuda" else "cpu", config)
        self._problems: dict[str, object] = {}
        self._dir = Path(tempfile.mkdtemp(prefix="kernelcraft-actor-"))

    def info(self) -> dict:
        """Where this actor judges: the Ray node, its host, the device's name, the process."""
        import ray
        import torch

        context = ray.get_runtime_context()
        return {"node": context.get_node_id(), "host": socket.gethostname(), "pid": os.getpid(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "device": torch.cuda.get_device_name(0) if self.kind == "cuda" else "cpu"}

    def problem(self, spec: ProblemSpec):
        from kernelcraft.problems import load_problem

        key = hashlib.sha256(f"{spec.name}\0{spec.path}\0{spec.source}".encode()).hexdigest()
        if key not in self._problems:
            path = Path(spec.path)
            try:
                same = path.is_file() and path.read_text() == spec.source
            except OSError:
                same = False
            if not same:  # another node, or the file changed since: the source the driver holds
                path = self._dir / key[:16] / path.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(spec.source)
            problem = load_problem(path)
            problem.name = spec.name
            self._problems[key] = problem
        return self._problems[key]

    def admit(self, spec: ProblemSpec):
        return self.verifier.admit(self.problem(spec))

    def target(self, spec: ProblemSpec):
        return self.verifier.target(self.problem(spec))

    def evaluate(self, spec: ProblemSpec, candidate):
        """One candidate's Result. Called from several of the actor's threads at once: the verifier takes them
        in order on its one device while the next one's build runs ahead in its pool."""
        return self.verifier.evaluate(self.problem(spec), candidate)

    def busy_seconds(self) -> float:
        return self.verifier.busy_seconds()

    def close(self) -> None:
        self.verifier.close()
