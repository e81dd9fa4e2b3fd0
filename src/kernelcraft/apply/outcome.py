"""What an apply produced, the nouns the engine, the store, the report and the export share: each region's outcome
(`RegionOutcome`: its run, its best kernel's verdict and whether it went into the model) and the apply's
(`ApplyOutcome`: the profile, the regions, the end-to-end verdicts of the model with its kernels, eager and
compiled, and the model's times), and the files an apply writes beside them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from kernelcraft.apply.plan import amdahl
from kernelcraft.apply.profile import Profile
from kernelcraft.apply.times import FINAL_COMPILED_KERNELS, FINAL_KERNELS
from kernelcraft.errors import KernelcraftError
from kernelcraft.propose.builtin.family import written_by
from kernelcraft.records import ApplyRecord
from kernelcraft.result import Result

MODEL_FILE = "model_new.py"  # the model with its kernels
COMPILED_FILE = "model_new_compiled.py"  # the same under torch.compile, the kernels custom ops (settle.py)
GRAPHS_FILE = "model_compile_graphs.py"  # torch.compile of the model as it was, with CUDA graphs (cuda_graphs.py)
MANIFEST = "apply.json"


class ApplyError(KernelcraftError):
    """An apply that cannot go on (a model that cannot be captured), said in one line."""


@dataclass
class RegionOutcome:
    name: str
    kind: str
    share: float  # of the model's time (profile)
    ms: float  # its standalone PyTorch time
    status: str  # replaced | slower | no_kernel | not_covered | skipped | dropped
    reason: str = ""
    run_id: str | None = None
    minutes: float | None = None  # its part of the budget
    result: Result | None = None  # its best kernel's verdict, where its run found a correct one
    source: str = field(default="", repr=False)  # that kernel's file
    like: str = ""  # the first region of its problem, whose run and kernel it shares ("": its own)
    wrong_in_model: bool = False  # dropped because the model with its kernel was not correct
    stored_move: dict | None = field(default=None, repr=False)  # `move` as stored, where the source is not

    @property
    def move(self) -> dict | None:
        """The built-in engineer's family and parameters, from its kernel's header (None: another proposer's)."""
        return written_by(self.source) if self.source else self.stored_move

    @property
    def speedup(self) -> float | None:
        return self.result.speedup_eager if self.result else None

    @property
    def speedup_compile(self) -> float | None:
        """Its kernel's speed over torch.compile of the region (None where that was not timed)."""
        return self.result.speedup_compile if self.result else None

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("result", "source", "stored_move")}
        d["speedup_eager"] = self.speedup
        d["speedup_compile"] = self.speedup_compile
        d["kernel_ms"] = self.result.runtime_ms if self.result else None
        d["eager_ms"] = self.result.eager_ms if self.result else None  # the verifier's, beside its kernel's
        # the device's own times (the work queued ahead, no host time): what a kernel saves inside CUDA graphs
        runtime, compiled = (self.result.runtime, self.result.compiled) if self.result else (None, None)
        d["kernel_device_ms"] = runtime.device_ms if runtime else None
        d["compile_device_ms"] = compiled.device_ms if compiled else None
        d["result"] = self.result.to_dict() if self.result else None
        d["move"] = self.move
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RegionOutcome":
        """The region `to_dict` stored (its kernel's source is not stored: `move` stands for it)."""
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name not in ("result", "source")}
        return cls(**kw, result=_result(d.get("result")), stored_move=d.get("move"))


@dataclass
class CompiledForm:
    """The model with its kernels under torch.compile (reassemble.py's compiled form): the regions whose kernels went
    in (those faster than torch.compile of their region), its end-to-end verdict and its file (where correct)."""
    regions: list[str]
    verdict: Result | None = None
    file: str | None = None
    graphs: bool = False  # replaying CUDA graphs (cuda_graphs.py)

    def to_dict(self) -> dict:
        return {"regions": self.regions, "end_to_end": self.verdict.to_dict() if self.verdict else None,
                "model_file": self.file, "cuda_graphs": self.graphs}

    @classmethod
    def from_dict(cls, d: dict) -> "CompiledForm":
        return cls(list(d["regions"]), _result(d.get("end_to_end")), d.get("model_file"), bool(d.get("cuda_graphs")))


@dataclass
class ApplyOutcome:
    apply_id: str
    model: str
    method: str  # how the graph was captured: fx or export
    device: str
    status: str  # done | failed
    profile: Profile | None
    regions: list[RegionOutcome]
    end_to_end: Result | None = None  # the reassembled model's verdict (None: nothing replaced)
    # the model's times by the verifier's method: eager, torch.compile of it as it is, with its kernels (where they
    # went in), and the model apply gives back, the fastest of those ("final": times.py's FINAL_*)
    times: dict | None = None
    model_file: str | None = None
    compiled: CompiledForm | None = None  # None where no kernel beat torch.compile of its region
    # torch.compile of the model as it was with CUDA graphs, verified like a candidate (cuda_graphs.py): None where the
    # model is not host-bound under torch.compile on a GPU
    compile_graphs: Result | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def replaced(self) -> list[RegionOutcome]:
        return [r for r in self.regions if r.status == "replaced"]

    @property
    def replaced_share(self) -> float:
        """The share of the model's time its replaced regions took. Regions timed alone can sum to more than the
        model (each pays its own launches and cold cache), so the shares are scaled down to sum to one then."""
        return sum(r.share for r in self.replaced) / max(1.0, sum(r.share for r in self.regions))

    @property
    def final_regions(self) -> list[str]:
        """The regions whose kernels are in the model apply gives back: the eager form's replaced ones, or the compiled
        form's; none where the final model is the model as it was or torch.compile's."""
        final = (self.times or {}).get("final")
        if final == FINAL_KERNELS:
            return [r.name for r in self.replaced]
        if final == FINAL_COMPILED_KERNELS and self.compiled is not None:
            return list(self.compiled.regions)
        return []

    @property
    def final_share(self) -> float:
        """The share of the model's time its final model's kernels took (scaled as `replaced_share`)."""
        names = set(self.final_regions)
        return sum(r.share for r in self.regions if r.name in names) / max(1.0, sum(r.share for r in self.regions))

    @property
    def amdahl_bound(self) -> float:
        """The model's speedup were the optimized regions free: what Amdahl allows."""
        tried = {r.name: r.share for r in self.regions if r.status not in ("skipped", "not_covered")}
        return amdahl(tried, {n: float("inf") for n in tried}) if tried else 1.0

    @property
    def expected(self) -> float:
        """The model's speedup predicted from the replaced regions' own speedups and shares."""
        return amdahl({r.name: r.share for r in self.regions}, {r.name: r.speedup for r in self.replaced})

    @property
    def speedup_eager(self) -> float | None:
        """The model with its kernels over eager, where correct end to end (1.0 where nothing was replaced)."""
        e = self.end_to_end
        return e.speedup_eager if e and e.correct else (1.0 if not self.replaced else None)

    @property
    def speedup_compile(self) -> float | None:
        e = self.end_to_end
        return e.speedup_compile if e and e.correct else None

    def to_dict(self) -> dict:
        e = self.end_to_end
        return {"apply_id": self.apply_id, "model": self.model, "method": self.method, "device": self.device,
                "status": self.status, "error": self.error, "model_file": self.model_file, "notes": self.notes,
                "profile": asdict(self.profile) if self.profile else None,
                "regions": [r.to_dict() for r in self.regions],
                "replaced_share": self.replaced_share, "amdahl_bound": _finite(self.amdahl_bound),
                "final_regions": self.final_regions, "final_share": self.final_share,
                "expected_speedup": _finite(self.expected),
                "end_to_end": e.to_dict() if e else None,
                "compiled": self.compiled.to_dict() if self.compiled else None, "times": self.times,
                "compile_graphs": self.compile_graphs.to_dict() if self.compile_graphs else None,
                "speedup_eager": self.speedup_eager, "speedup_compile": self.speedup_compile,
                "final": self.times["final"] if self.times else None}


    @classmethod
    def from_dict(cls, d: dict) -> "ApplyOutcome":
        """The outcome `to_dict` stored, as far as its apply got (what it derives, such as the shares and the
        speedups, is derived again; a field an older kernelcraft did not store takes its default)."""
        return cls(d["apply_id"], d["model"], d.get("method") or "", d.get("device") or "", d.get("status") or "failed",
                   Profile.from_dict(d["profile"]) if d.get("profile") else None,
                   [RegionOutcome.from_dict(r) for r in d.get("regions") or []],
                   end_to_end=_result(d.get("end_to_end")), times=d.get("times"), model_file=d.get("model_file"),
                   compiled=CompiledForm.from_dict(d["compiled"]) if d.get("compiled") else None,
                   compile_graphs=_result(d.get("compile_graphs")), notes=list(d.get("notes") or []),
                   error=d.get("error"))

    @classmethod
    def of(cls, record: ApplyRecord) -> "ApplyOutcome | None":
        """A stored apply's outcome, as far as it got; None where it stopped before its first summary."""
        return cls.from_dict(record.summary) if record.summary else None


def _result(d: dict | None) -> Result | None:
    return Result.from_dict(d) if d else None


def _finite(x: float) -> float | None:
    return x if x != float("inf") else None
