"""The verifier's verdict written for a proposer to read: short, specific, in the order a kernel
engineer would look (did it build, is it right, how fast, where the time went)."""

from __future__ import annotations

import re

LOG_LINES = 30  # compiler output kept (the end of the log, where the first error usually is not)
MESSAGE_CHARS = 1500  # of a message that is not a traceback
_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')
CANDIDATE_FILE = "candidate.py"  # the name the worker gives the candidate's source


def render(result: dict | None, parse_error: str | None = None, profile: dict | None = None) -> str:
    """`result` is a Result.to_dict(); `parse_error` says why an answer gave no kernel at all; `profile` a
    Profile.to_dict() of the kernel (hardware counters, with --profile), whose summary ends the feedback."""
    if parse_error:
        return (f"Your answer could not be used: {parse_error.replace('_', ' ')}. Answer with exactly one "
                "```python code block holding the whole file that defines class ModelNew.")
    if result is None:
        return "This kernel was not evaluated."
    if result["status"] == "verifier_error":
        return ("This kernel could not be judged: the verifier failed on its own side (not a fault of the kernel): "
                f"{(result.get('message') or '')[:500]}")
    lines = [f"Status: {result['status']}" + (f" ({', '.join(result['reasons'])})" if result.get("reasons") else "")]
    if result.get("message"):
        lines.append(_message(result["message"]))
    if result["status"] == "compile_error" and result.get("compile_log"):
        log = _compile_log(result["compile_log"])
        lines.append("Compiler output:\n" + log)
    if result.get("max_rel_error") is not None:
        lines.append(f"Largest relative error: {result['max_rel_error']:.3g} (policy {result.get('policy')})")
    runtime = result.get("runtime_ms")
    if runtime is not None:
        parts = [f"Runtime: {runtime:.4f} ms"]
        for label, base in (("PyTorch eager", "eager"), ("torch.compile", "compile")):
            if result.get(f"{base}_ms"):
                speedup = result.get(f"speedup_{base}")  # absent when a later check failed the kernel
                parts.append(f"{label} {result[f'{base}_ms']:.4f} ms" + (f" ({speedup:.2f}x)" if speedup else ""))
        if result.get("roofline_fraction") is not None:
            parts.append(f"{100 * result['roofline_fraction']:.0f}% of the roofline bound")
        lines.append("; ".join(parts))
    kernels = sorted(result.get("kernels") or [], key=lambda k: -k.get("device_us", 0))
    if kernels:
        total = sum(k.get("device_us", 0) for k in kernels) or 1.0
        lines.append("Kernels that ran (share of device time):")
        for k in kernels[:6]:
            who = "yours" if k.get("custom") else "library"
            lines.append(f"  {k['name'][:90]}  {100 * k.get('device_us', 0) / total:.0f}%  x{k.get('calls', 1)}  ({who})")
    for res in (result.get("kernels_resources") or [])[:4]:
        lines.append("ptxas: " + ", ".join(f"{k}={v}" for k, v in res.items()))
    if profile and profile.get("summary"):
        lines.append("Hardware counters (times are ncu's: each kernel replayed, caches flushed):\n" + profile["summary"])
    return "\n".join(lines)


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
    lines = text[text.rindex(_TRACEBACK):].splitlines()[1:]  # the last traceback of a chain: the one raised
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
    exception = "\n".join(lines[exception_at:]).strip() or "(no exception line)"
    own = [f for f in frames if _FRAME.match(f[0]).group("path").endswith("/" + CANDIDATE_FILE)]
    shown = []
    for frame in own[-8:]:
        m = _FRAME.match(frame[0])
        shown.append(f'  File "{CANDIDATE_FILE}", line {m.group("line")}, in {m.group("fn")}')
        shown.extend(frame[1:])
    where = ("In your file (most recent call last):\n" + "\n".join(shown)) if shown else \
        "(raised outside your file: in a library your kernel called)"
    return f"Message: {exception[:MESSAGE_CHARS]}\n{where}"
