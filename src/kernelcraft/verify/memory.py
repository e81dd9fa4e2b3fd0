"""The harness's device memory: what one evaluation needs, whether it fits, and input fingerprints.

KernelBench's published sizes hold 4–8 GB per tensor, so the harness keeps about one trial alive at a
time: the inputs (no private copy: a keyed fingerprint proves them unchanged), the reference's outputs,
the candidate's outputs (twice, for the determinism check) and one L2 flush buffer. `need` estimates
that from the problem's meta-device cost pass, before anything is allocated; a problem over what the
device has free is refused once, as the problem's error, never as each candidate's failure; on the CPU,
one over the host memory available (check_fits_host).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from kernelcraft.problems import ProblemError
from kernelcraft.problems.cost import Cost

GiB = 1 << 30
# A CUDA context, the profiler's buffers and allocator rounding, per process that holds one on the
# device during an evaluation (the supervisor, the worker, a standby worker).
CONTEXT_BYTES = 600 << 20
# Unused blocks the supervisor's allocator may keep between phases instead of handing them back: each hand-back
# is a device-wide sync and driver calls, which slow down when several GPUs of a host do them at once.
KEEP_CACHED = 512 << 20
FLUSH_MIN_BYTES = 256 << 20
HOST_PROCESS_BYTES = 512 << 20  # an interpreter with torch imported, on the CPU
_CHUNK = 1 << 22  # fingerprint words per step: the temporaries stay near 128 MB whatever the input


class ProblemTooLarge(ProblemError):
    """The problem cannot be evaluated on this device at these sizes (a problem-level error)."""


@dataclass
class MemoryNeed:
    """Bytes an evaluation holds on the device at its fullest (both processes together)."""

    reference: int  # the reference's forward at its peak: inputs, parameters, intermediates, outputs
    candidate_outputs: int  # two calls' outputs, held for the determinism check
    params: int  # the candidate's copy of the model's parameters
    flush: int
    contexts: int  # CUDA contexts, and the supervisor's kept cache

    @property
    def total(self) -> int:
        return self.reference + self.candidate_outputs + self.params + self.flush + self.contexts

    def describe(self) -> str:
        return (f"~{self.total / GiB:.1f} GiB (reference forward {self.reference / GiB:.1f}, candidate outputs "
                f"{self.candidate_outputs / GiB:.1f}, parameters {self.params / GiB:.1f}, flush and contexts "
                f"{(self.flush + self.contexts) / GiB:.1f})")


def need(cost: Cost, l2_bytes: int, processes: int = 3) -> MemoryNeed:
    """What one evaluation of a problem of this cost holds on the device at once.

    The trials and the timing never overlap: the trials hold the reference's peak in the supervisor and
    two outputs in the worker; the timing holds the reference's peak (eager runs beside the candidate) and
    the candidate's output and one sampled output in the worker, after the supervisor has let its trial
    memory go. Both are bounded by the same sum."""
    return MemoryNeed(reference=cost.peak_bytes, candidate_outputs=2 * cost.output_bytes,
                      params=cost.params_bytes, flush=max(2 * l2_bytes, FLUSH_MIN_BYTES),
                      contexts=processes * CONTEXT_BYTES + KEEP_CACHED)


def release_cache(device: torch.device) -> bool:
    """Hand the supervisor's unused cached blocks back to the device when they are more than KEEP_CACHED (so the
    worker can have them); True if they were handed back."""
    if device.type != "cuda" or torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) <= KEEP_CACHED:
        return False
    torch.cuda.empty_cache()
    return True


def free_bytes(device: torch.device) -> tuple[int, int]:
    """(free, total) bytes on a CUDA device, after this process has returned its cached blocks."""
    torch.cuda.empty_cache()
    return torch.cuda.mem_get_info(device)


def check_fits(name: str, sizes: str, cost: Cost, device: torch.device, l2_bytes: int,
               processes: int = 3) -> MemoryNeed:
    """The problem's need, with `processes` CUDA contexts on the device (need()); raises ProblemTooLarge when the
    device does not have it free."""
    required = need(cost, l2_bytes, processes)
    if device.type != "cuda":
        return check_fits_host(name, sizes, cost)
    free, total = free_bytes(device)
    if required.total > free:
        raise ProblemTooLarge(
            f"{name} at {sizes} needs {required.describe()} of GPU memory; {device} has "
            f"{free / GiB:.1f} GiB free of {total / GiB:.1f} GiB (run it smaller with --sizes, or on a larger GPU)")
    return required


def check_fits_host(name: str, sizes: str, cost: Cost) -> MemoryNeed:
    """On the CPU: the same need in host memory, with no CUDA context nor L2 flush but the memory of two processes
    (the supervisor and the worker judging: no standby worker on a CPU); raises ProblemTooLarge when this machine
    has less available (psutil: free plus reclaimable), before anything is allocated."""
    import psutil

    required = MemoryNeed(reference=cost.peak_bytes, candidate_outputs=2 * cost.output_bytes,
                          params=cost.params_bytes, flush=0, contexts=2 * HOST_PROCESS_BYTES)
    memory = psutil.virtual_memory()
    if required.total > memory.available:
        raise ProblemTooLarge(
            f"{name} at {sizes} needs {required.describe()} of host memory; this machine has "
            f"{memory.available / GiB:.1f} GiB available of {memory.total / GiB:.1f} GiB (run it smaller with "
            "--size small or --sizes, or on a machine with more memory)")
    return required


# -- work a slice at a time ------------------------------------------------------------------------------

SLICE = 1 << 24  # elements per slice: temporaries of a slice stay near 64–128 MB


def slices(*tensors: torch.Tensor):
    """Matching views of same-shaped tensors, a slice of the largest dimension at a time (no copies; the same
    slices for the same shape, so work that draws random numbers slice by slice is reproducible)."""
    t = tensors[0]
    if t.dim() == 0 or t.numel() <= SLICE:
        yield tensors
        return
    dim = max(range(t.dim()), key=lambda d: t.size(d))
    step = max(1, SLICE // max(1, t.numel() // t.size(dim)))
    for start in range(0, t.size(dim), step):
        length = min(step, t.size(dim) - start)
        yield tuple(x.narrow(dim, start, length) for x in tensors)


# -- fingerprints: inputs proven unchanged without a private copy --------------------------------------

def new_key() -> tuple[int, int, int]:
    """A secret mixing key: the candidate cannot build a change that keeps a fingerprint it cannot compute."""
    return secrets.randbits(62) | 1, secrets.randbits(62), secrets.randbits(62) | 1


def fingerprint(values: list, key: tuple[int, int, int]) -> list[int | None]:
    """A keyed 64-bit digest of every byte of each tensor's storage (None for non-tensors), the digests of one
    device read back together."""
    found: dict[int, int] = {}
    by_device: dict[torch.device, list[int]] = {}
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            by_device.setdefault(v.device, []).append(i)
    for indices in by_device.values():
        digests = torch.stack([digest(values[i], key, i) for i in indices]).tolist()
        for i, d in zip(indices, digests):
            found[i] = d ^ values[i].untyped_storage().nbytes()
    return [found.get(i) for i in range(len(values))]


def digest(t: torch.Tensor, key: tuple[int, int, int], salt: int = 0) -> torch.Tensor:
    """The keyed digest of a tensor's storage as a 0-d tensor on its device (read it when convenient: no sync)."""
    storage = t.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
    words = raw.view(torch.int32) if raw.numel() % 4 == 0 else raw
    a, b, c = key
    total = torch.zeros((), dtype=torch.int64, device=t.device)
    for start in range(0, words.numel(), _CHUNK):
        part = words[start:start + _CHUNK].to(torch.int64)
        index = torch.arange(start, start + part.numel(), dtype=torch.int64, device=t.device)
        mix = (index * a) ^ (b + salt)  # int64 arithmetic wraps: a position-keyed pseudo-random weight
        mix = (mix ^ (mix >> 29)) * c
        total += (part * mix).sum()
    return total
