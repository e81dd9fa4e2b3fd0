"""A candidate: a KernelBench-format source defining `ModelNew`, and the backend it uses."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from kernelcraft.backends import detect_backend, get_backend
from kernelcraft.errors import CandidateError
from kernelcraft.problems.problem import ProblemError, read_source

EXAMPLES = Path(__file__).parent / "examples"


@dataclass
class Candidate:
    source: str = field(repr=False)
    name: str = "candidate"
    backend: str = ""  # detected from the source when empty
    # its first call compiles a whole model (apply's model under torch.compile): that call is given the load timeout,
    # not the run timeout (set by kernelcraft's own callers, never read from the source)
    compiles: bool = False
    # False: the attribution check (which kernels one call launched, the candidate's own among them) is not made. Set
    # by kernelcraft's own callers, never read from the source, for a model apply writes whose work runs as CUDA
    # graphs (a replay launches nothing the check could see) or that holds no kernel of its own (torch.compile of the
    # model): its kernels were each attributed in their region's verdict, and its time is the model's, end to end
    attribute: bool = True
    # The time (time.time()) past which its caller has no use for the verdict (a run's wall budget ends there): a
    # wait for the device's lock, held by another process, gives up then and the verdict is a verifier_error
    # (device_busy). Set by kernelcraft's own callers; None: wait as long as it takes
    wait_until: float | None = None

    def __post_init__(self):
        self.backend = self.backend or detect_backend(self.source)
        get_backend(self.backend)

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @classmethod
    def from_file(cls, path: str | Path, backend: str = "") -> "Candidate":
        """A candidate file, or `example:NAME` for one of the examples bundled with kernelcraft."""
        if str(path).startswith("example:"):
            name = str(path).split(":", 1)[1]
            path = EXAMPLES / f"{name}.py"
            if not path.exists():
                known = ", ".join(sorted(p.stem for p in EXAMPLES.glob("*.py")))
                raise CandidateError(f"no bundled example {name!r}; there are: {known}")
        path = Path(path)
        try:
            source = read_source(path, "candidate")
        except ProblemError as exc:
            raise CandidateError(str(exc)) from None
        if "ModelNew" not in source:
            raise CandidateError(f"candidate {path} defines no ModelNew class")
        return cls(source, path.stem, backend)
