"""The verifier's verdict written for a proposer to read: short, specific, in the order a kernel
engineer would look (did it build, is it right, how fast, where the time went)."""

from __future__ import annotations

import re

from kernelcraft.metrics import times
from kernelcraft.result import Result, Status

LOG_LINES = 30  # compiler output kept (the end of the log, where the first error usually is not)
MESSAGE_CHARS = 1500  # of a message that is not a traceback
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')
CANDIDATE_FILE = "candidate.py"  # the name the worker gives the candidate's source
OUTPUT_LIMIT = "output_limit"  # the parse error of an answer cut off by the output limit before its kernel ended


def render(result: Result | None, parse_error: str | None = None, *, output_limit: int | None = None,
           profile: dict | None = None) -> str:
    """`result` is the verifier's; `parse_error` says why an answer gave no kernel at all; `output_limit`
    (tokens) that the answer was cut off there, its kernel complete (judged) or not (`output_limit` error);
    `profile` a Profile.to_dict() of the kernel (hardware counters, with --profile), whose summary ends the
    feedback."""
    if parse_error == OUTPUT_LIMIT:
        limit = f"the {output_limit}-token output limit" if output_limit else "the output limit"
        return (f"Your answer hit {limit} before it ended: answer again, shorter (exactly one ```python code "
                "block holding the whole file that defines class ModelNew, with little or no prose around it; "
                "keep any reasoning brief).")
    if parse_error:
        return (f"Your answer could not be used: {parse_error.replace('_', ' ')}. Answer with exactly one "
                "```python code block holding the whole file that defines class ModelNew.")
    if result is None:
        return "This kernel was not evaluated."
    if output_limit:
        return (f"Note: your answer hit the {output_limit}-token output limit; its kernel was complete and was "
                "judged, but keep answers shorter.\n" + render(result, profile=profile))
    if result.status == Status.VERIFIER_ERROR:
        return ("This kernel could not be judged: the verifier failed on its own side (not a fault of the kernel): "
                f"{result.message[:500]}")
    lines = [f"Status: {result.status}" + (f" ({', '.join(result.reasons)})" if result.reasons else "")]
    if result.message:
        lines.append(_message(result.message))
    if result.status == Status.COMPILE_ERROR and result.compile_log:
        lines.append("Compiler output:\n" + _compile_log(result.compile_log))
    if result.max_rel_error is not None:
        lines.append(f"Largest relative error: {result.max_rel_error:.3g} (policy {result.policy})")
    if result.runtime_ms is not None:
        parts = [f"Runtime: {result.runtime_ms:.4f} ms"]
        # a speedup is absent when a later check failed the kernel
        for label, base_ms, speedup in (("PyTorch eager", result.eager_ms, result.speedup_eager),
                                        ("torch.compile", result.compile_ms, result.speedup_compile)):
            if base_ms:
                parts.append(f"{label} {base_ms:.4f} ms" + (f" ({times(speedup)})" if speedup else ""))
        if result.roofline_fraction is not None:
            parts.append(f"{100 * result.roofline_fraction:.0f}% of the roofline bound")
        lines.append("; ".join(parts))
    kernels = sorted(result.kernels, key=lambda k: -k.get("device_us", 0))
    if kernels:
        total = sum(k.get("device_us", 0) for k in kernels) or 1.0
        lines.append("Kernels that ran (share of device time):")
        for k in kernels[:6]:
            who = "yours" if k.get("custom") else "library"
            lines.append(f"  {k['name'][:90]}  {100 * k.get('device_us', 0) / total:.0f}%  x{k.get('calls', 1)}  ({who})")
    for res in result.kernels_resources[:4]:
        lines.append("ptxas: " + ", ".join(f"{k}={v}" for k, v in res.items()))
    if profile and profile.get("summary"):
        lines.append("Hardware counters (times are ncu's: each kernel replayed, caches flushed):\n" + profile["summary"])
    return "\n".join(lines)


BRIEF_CHARS = 240  # of a one-line verdict


def brief(result: Result | None, parse_error: str | None = None, limit: int = BRIEF_CHARS) -> str:
    """The verdict in one line, for lists of what a run tried: why a kernel failed, or how fast it was."""
    if parse_error:
        return f"no usable kernel in the answer ({parse_error.replace('_', ' ')})"
    if result is None:
        return "not evaluated"
    if result.correct:
        ms, speedup = result.runtime_ms, result.speedup_eager
        return "correct" + (f", {ms:.4g} ms" if ms else "") + (f" ({times(speedup)} eager)" if speedup else "")
    head = str(result.status) + (f" ({', '.join(result.reasons)})" if result.reasons else "")
    if result.status == Status.COMPILE_ERROR and result.compile_log:
        lines = result.compile_log.strip().splitlines()
        why = next((l for l in lines if "error" in l.lower()), lines[0] if lines else "")
    elif result.max_rel_error is not None and result.status == Status.INCORRECT:
        why = f"largest relative error {result.max_rel_error:.3g}"
    else:
        message = result.message.strip()
        why = _exception(message) if _TRACEBACK in message else (message.splitlines() or [""])[0]
    return f"{head}: {' '.join(why.split())}"[:limit] if why else head


def _compile_log(log: str) -> str:
    """The lines that name errors first, then the tail, within LOG_LINES."""
    lines = log.strip().splitlines()
    errors = [l for l in lines if "error" in l.lower()]
    keep = errors[:LOG_LINES // 2] + [l for l in lines[-LOG_LINES // 2:] if l not in errors]
    return "\n".join(keep[:LOG_LINES])


def _message(text: str) -> str:
    """A message as a model should read it. A Python traceback is given as its exception first, then the
    frames in the candidate's own file: the harness's and the libraries' frames only hide the cause, and a
    cut from the top would drop the exception at its end."""
    if _TRACEBACK not in text:
        return f"Message: {text[:MESSAGE_CHARS]}"
    frames, exception = _traceback(text)
    own = [f for f in frames if _FRAME.match(f[0]).group("path").endswith("/" + CANDIDATE_FILE)]
    shown = []
    for frame in own[-8:]:
        m = _FRAME.match(frame[0])
        shown.append(f'  File "{CANDIDATE_FILE}", line {m.group("line")}, in {m.group("fn")}')
        shown.extend(frame[1:])
    where = ("In your file (most recent call last):\n" + "\n".join(shown)) if shown else \
        "(raised outside your file: in a library your kernel called)"
    return f"Message: {exception[:MESSAGE_CHARS]}\n{where}"


def _traceback(text: str) -> tuple[list[list[str]], str]:
    """The frames (each its lines) and the exception of the last traceback in `text` (of a chain, the one
    raised)."""
    lines = text[text.rindex(_TRACEBACK):].splitlines()[1:]
    frames: list[list[str]] = []
    exception_at = len(lines)
    for i, line in enumerate(lines):
        if _FRAME.match(line):
            frames.append([line])
        elif line.startswith("    ") and frames:
            frames[-1].append(line)
        elif frames and line.strip():
            exception_at = i
            break
    return frames, "\n".join(lines[exception_at:]).strip() or "(no exception line)"


def _exception(text: str) -> str:
    return _traceback(text)[1]
