"""Is a candidate's output the reference's? Form first (type, shape, dtype, layout), then values.

Error is measured against the output's own magnitude: |out − ref| / (|ref| + rms(ref)), so a
constant or all-zeros answer fails even where the outputs are tiny, and NaN or Inf never passes.
Integer and boolean outputs must match exactly.

Where torch's own fp32/fp16 output is not a good enough reference (an ill-conditioned output: a sum
that cancels to rounding noise, a near-one-hot softmax), `compare_exact` judges the candidate against a
float64 reference instead, allowing it `policy.rounding_factor` times torch's own worst error there.
Every pass works over slices of the outputs, so the temporaries stay small whatever the output's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernelcraft.verify.memory import slices as _slices
from kernelcraft.verify.policy import Policy


@dataclass
class Comparison:
    ok: bool
    max_rel_error: float
    reason: str = ""
    detail: str = ""


def check_form(outputs: list, expected: list, device: torch.device) -> tuple[str, str] | None:
    """(reason, detail) for the first output whose form is wrong, else None."""
    if len(outputs) != len(expected):
        return "output_count", f"returned {len(outputs)} outputs, the reference returns {len(expected)}"
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        if type(out) is not torch.Tensor:
            return "output_not_tensor", f"output {i} is a {type(out).__name__}, not a plain torch.Tensor"
        if out.layout != torch.strided or out.is_sparse or out.is_nested or out.is_meta:
            return "output_layout", f"output {i} has layout {out.layout}; a dense strided tensor is required"
        if out.device != device:
            return "output_device", f"output {i} is on {out.device}, expected {device}"
        if tuple(out.shape) != tuple(ref.shape):
            return "output_shape", f"output {i} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}"
        if out.dtype != ref.dtype:
            return "output_dtype", f"output {i} has dtype {out.dtype}, expected {ref.dtype}"
        if out.numel() and not _dense(out):
            return "output_layout", f"output {i} has overlapping or gapped strides {out.stride()}"
    return None


def _dense(t: torch.Tensor) -> bool:
    """Every element has its own place and no place is skipped (any order of dims)."""
    expected = 1
    for d in sorted(range(t.dim()), key=lambda d: (t.stride(d), t.size(d))):
        if t.size(d) == 1:
            continue
        if t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def _rms_on_device(ref: torch.Tensor) -> torch.Tensor:
    """The root mean square of `ref` as a 0-d float64 tensor on its device (no sync)."""
    squares = sum(torch.linalg.vector_norm(r, dtype=torch.float64) ** 2 for (r,) in _slices(ref))
    return torch.sqrt(squares / ref.numel())


def _errors(out: torch.Tensor, ref: torch.Tensor, scale, allowance: float = 0.0, tol: float = math.inf):
    """|out − ref| (less `allowance`) over |ref| + scale, slice by slice, in float64 where either side is float64,
    else fp32; `scale` a float or a 0-d tensor (0: the plain difference). Device tensors, nothing read: each
    slice's largest error, the flat index of its first occurrence, and the count of elements over `tol`."""
    dtype = torch.float64 if torch.float64 in (out.dtype, ref.dtype) else torch.float32
    scale = torch.as_tensor(scale, dtype=dtype, device=out.device)
    tops, where, over, seen = [], [], torch.zeros((), dtype=torch.int64, device=out.device), 0
    for o, r in _slices(out, ref):
        o, r = o.to(dtype), r.to(dtype)
        diff = (o - r).abs()
        if allowance:
            diff = (diff - allowance).clamp_min(0)
        err = diff / torch.where(scale > 0, r.abs() + scale, torch.ones_like(r))
        err = err.reshape(-1)
        tops.append(err.max())
        where.append(err.argmax() + seen)
        if math.isfinite(tol):
            over += (err > tol).sum()
        seen += err.numel()
    return torch.stack(tops), torch.stack(where), over


def _read(tops: torch.Tensor, where: torch.Tensor, counts: list[torch.Tensor]) -> tuple[float, int, list[int]]:
    """One sync: the largest error over the slices, its flat index (the first slice's that reaches it) and the
    `counts`. A NaN error (the reference infinite where the output is finite) counts as infinite: never a pass."""
    n = tops.numel()
    values = torch.cat([tops.double(), where.double(), torch.stack(counts).double()]).tolist()
    errors = [math.inf if math.isnan(t) else t for t in values[:n]]
    best = max(range(n), key=lambda i: (errors[i], -i))
    return errors[best], int(values[n + best]), [int(v) for v in values[2 * n:]]


def _worst(out: torch.Tensor, ref: torch.Tensor, scale, allowance: float = 0.0, tol: float = math.inf):
    """(largest error, flat index of it, elements over `tol`)."""
    tops, where, over = _errors(out, ref, scale, allowance, tol)
    worst, flat, (over,) = _read(tops, where, [over])
    return worst, flat, over


def _at(t: torch.Tensor, flat: int) -> tuple[list[int], float]:
    """The index and value of the `flat`-th element in _slices' order (the order the errors were seen in)."""
    seen = 0
    for (piece,) in _slices(t):
        if flat < seen + piece.numel():
            local = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat - seen), tuple(piece.shape)))
            value = piece[local].item() if piece.dim() else piece.item()
            where = list(local)
            if piece.dim() and piece.shape != t.shape:  # shift back along the sliced dimension
                dim = next(d for d in range(t.dim()) if piece.size(d) != t.size(d))
                offset = piece.storage_offset() - t.storage_offset()
                where[dim] += offset // t.stride(dim) if t.stride(dim) else 0
            return where, value
        seen += piece.numel()
    return [], float("nan")


def compare(out: torch.Tensor, ref: torch.Tensor, policy: Policy) -> Comparison:
    """Every figure the verdict needs is computed on the device and read back in one sync."""
    if not (out.is_floating_point() or out.is_complex()):
        mismatched = int(sum((o != r).sum() for o, r in _slices(out, ref)))
        if mismatched:
            return Comparison(False, math.inf, "mismatch", f"{mismatched} of {out.numel()} elements differ")
        return Comparison(True, 0.0)
    if out.numel() == 0:
        return Comparison(True, 0.0)
    tol = policy.tolerance(ref.dtype)
    bad = sum((~torch.isfinite(o)).sum() for (o,) in _slices(out))
    ref_bad = sum((~torch.isfinite(r)).sum() for (r,) in _slices(ref))
    tops, where, over = _errors(out, ref, _rms_on_device(ref), tol=tol)
    worst, flat, (bad, ref_bad, over) = _read(tops, where, [bad, ref_bad, over])
    if bad:
        where_text = "elements the reference also has non-finite" if ref_bad else "elements"
        return Comparison(False, math.inf, "non_finite", f"{bad} NaN/Inf {where_text} in the output")
    if worst <= tol:
        return Comparison(True, worst)
    where_at, got = _at(out, flat)
    _, expected = _at(ref, flat)
    detail = (f"max relative error {worst:.3g} > {tol:g} ({policy.name}) at index {where_at}: got "
              f"{got:.6g}, expected {expected:.6g}; {over / out.numel():.2%} of elements out of tolerance")
    return Comparison(False, worst, "mismatch", detail)


def compare_exact(out: torch.Tensor, torch_out: torch.Tensor, exact: torch.Tensor, policy: Policy) -> Comparison:
    """The candidate against a float64 reference (`exact`), allowed `policy.rounding_factor` times torch's own
    worst error against it on the same inputs (`torch_out`), on top of the policy's tolerance."""
    tol = policy.tolerance(torch_out.dtype)
    scale = _rms_on_device(exact)
    own, _, _ = _worst(torch_out, exact, 0.0)  # torch's worst absolute error
    allowance = policy.rounding_factor * own
    worst, flat, over = _worst(out, exact, scale, allowance, tol)
    plain, _, _ = _worst(out, exact, scale)
    torch_rel, _, _ = _worst(torch_out, exact, scale)
    summary = (f"against float64: the candidate's relative error {plain:.3g}, torch's own {torch_rel:.3g} "
               f"(allowance {policy.rounding_factor:g}x torch's worst absolute error, {own:.3g})")
    if worst <= tol:  # its error is the part beyond the allowance: within the tolerance, as for any pass
        return Comparison(True, worst, detail=summary)
    where, got = _at(out, flat)
    _, expected = _at(exact, flat)
    return Comparison(False, plain, "mismatch", f"{summary}; {worst:.3g} > {tol:g} ({policy.name}) beyond the "
                      f"allowance at index {where}: got {got:.6g}, float64 {expected:.6g}; "
                      f"{over / out.numel():.2%} of elements out of tolerance")
