"""CUDA graphs for a host-bound model: when the apply's compiled forms replay their work as CUDA graphs, and the
baseline they are held to, torch.compile of the model as it was with CUDA graphs (its mode="reduce-overhead").

A model is host-bound where a call under torch.compile takes the host longer than its work takes the device
(`times.HOST_BOUND`): the model's ops are launched one by one from Python, and a faster kernel does not shorten the
call. Under CUDA graphs a call is one replay: the host's time goes, and what the kernels save on the device is what
the call saves (H200, bf16, 2026-11-29: BERT-base at 32 x 128 tokens took 4.54 ms under torch.compile, 2.62 ms of it
the device's, and 2.70 ms with CUDA graphs; GPT-2 small at 8 x 512 5.50 ms, 2.52 and 2.59). So where the model is
host-bound on a GPU (`wanted`):
- the compiled form with kernels (reassemble.py, `graphs=True`) replays CUDA graphs, and takes each kernel that beats
  torch.compile of its region on the device's time (settle.compiled_regions): a kernel's host time is gone there;
- torch.compile of the model with CUDA graphs is verified like any candidate (`baseline`: its own file, GRAPHS_FILE),
  timed by the same method as the others, and is one of the final models the apply can give back: a user who could
  have had it by one argument to torch.compile is never given a slower model.

Neither form is checked for kernel attribution (Candidate.attribute): a replay launches nothing the check could see,
and the baseline holds no kernel of its own; the kernels in the form were each attributed in their region's verdict.
"""

from __future__ import annotations

from pathlib import Path

from kernelcraft.apply.namespace import prefixed
from kernelcraft.apply.outcome import GRAPHS_FILE
from kernelcraft.apply.times import HOST_BOUND
from kernelcraft.candidate import Candidate
from kernelcraft.errors import KernelcraftError
from kernelcraft.problems import Problem
from kernelcraft.result import Result, Timing


def wanted(problem: Problem, verifier) -> str | None:
    """Why the apply's compiled forms replay CUDA graphs (`host_bound_compiled` on the model's torch.compile
    baseline), or None: not on a CPU, not where torch.compile is not timed (the forms are there to beat it), not
    where the model's baselines could not be taken."""
    if not verifier.config.compile_baseline or not str(verifier.devices[0]).startswith("cuda"):
        return None
    try:
        return host_bound_compiled(verifier.target(problem).compiled)
    except KernelcraftError:
        return None


def host_bound_compiled(compiled: Timing | None) -> str | None:
    """Why a model whose torch.compile baseline is `compiled` wants CUDA graphs (a call holds more host time than
    device time, by HOST_BOUND), or None (not so, or not measured: a CPU's timings have no device time)."""
    if compiled is None or not compiled.host_ms or not compiled.device_ms:
        return None
    if compiled.host_ms <= HOST_BOUND * compiled.device_ms:
        return None
    return (f"the model is host-bound under torch.compile ({compiled.host_ms:.4g} ms a call on the host, "
            f"{compiled.device_ms:.4g} ms on the device): its compiled forms replay CUDA graphs")


def baseline_source(model_source: str, model: str) -> str:
    """The file of torch.compile of the model as it was, with CUDA graphs: the model's file unchanged and a ModelNew
    compiling it (KernelcraftError where the model's file defines ModelNew itself)."""
    if "ModelNew" in prefixed(model_source, "").names:
        raise KernelcraftError(f"{model}'s file defines ModelNew: torch.compile of it cannot be written beside it")
    return model_source.rstrip("\n") + "\n\n\n" + _BASELINE.format(model=model)


_BASELINE = '''# -- written by kernelcraft apply: torch.compile of {model} above, with CUDA graphs --------------------------------
import torch as _torch


class ModelNew(_torch.nn.Module):
    """`Model` under torch.compile(mode="reduce-overhead"), inductor compiling in this process (no pool of compile
    processes left running): what it runs is recorded as CUDA graphs and replayed. Its outputs live in the graphs'
    memory until its next call, so clone what you keep past it."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.model = Model(*args, **kwargs)
        self.graph = _torch.compile(self.model, options={{"triton.cudagraphs": True, "compile_threads": 1}})

    def forward(self, *args):
        return self.graph(*args)
'''


def baseline(problem: Problem, verifier, out_dir: Path, notes: list[str], emit) -> Result | None:
    """torch.compile of the model as it was, with CUDA graphs, verified (its file written to out_dir/GRAPHS_FILE
    where correct); None where its file cannot be written (said in `notes`)."""
    try:
        text = baseline_source(problem.source, problem.name)
    except KernelcraftError as exc:
        notes.append(f"torch.compile of the model with CUDA graphs was not measured: {exc}")
        return None
    path = Path(out_dir) / GRAPHS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    emit("apply_verify", {"regions": [], "compiled": True, "graphs": True, "baseline": True})
    verdict = verifier.evaluate(problem, Candidate(text, f"{problem.name} (torch.compile, CUDA graphs)",
                                                   compiles=True, attribute=False))
    if not verdict.correct:
        notes.append(f"torch.compile of the model with CUDA graphs was judged {verdict.status}: "
                     f"{verdict.message[:300]}")
        path.unlink(missing_ok=True)
    return verdict
