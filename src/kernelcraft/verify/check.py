"""Is a candidate's output the reference's? Form first (type, shape, dtype, layout), then values.

Error is measured against the output's own magnitude: |out − ref| / (|ref| + rms(ref)), so a
constant or all-zeros answer fails even where the outputs are tiny, and NaN or Inf never passes.
Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

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


def compare(out: torch.Tensor, ref: torch.Tensor, policy: Policy) -> Comparison:
    if not (out.is_floating_point() or out.is_complex()):
        mismatched = int((out != ref).sum())
        if mismatched:
            return Comparison(False, math.inf, "mismatch", f"{mismatched} of {out.numel()} elements differ")
        return Comparison(True, 0.0)
    if out.numel() == 0:
        return Comparison(True, 0.0)
    bad = (~torch.isfinite(out)).sum().item()
    ref_bad = ~torch.isfinite(ref)
    if bad:
        where = "elements the reference also has non-finite" if bool(ref_bad.any()) else "elements"
        return Comparison(False, math.inf, "non_finite", f"{bad} NaN/Inf {where} in the output")
    o, r = out.float(), ref.float()
    scale = (torch.linalg.vector_norm(r, dtype=torch.float64) / math.sqrt(r.numel())).item()
    err = ((o - r).abs() / (r.abs() + scale)) if scale > 0 else (o - r).abs()
    worst = err.max().item()
    tol = policy.tolerance(ref.dtype)
    if worst <= tol:
        return Comparison(True, worst)
    index = int(err.argmax())
    where = tuple(int(i) for i in torch.unravel_index(torch.tensor(index), tuple(out.shape))) if out.dim() else ()
    share = (err > tol).float().mean().item()
    detail = (f"max relative error {worst:.3g} > {tol:g} ({policy.name}) at index {list(where)}: got "
              f"{o.flatten()[index].item():.6g}, expected {r.flatten()[index].item():.6g}; "
              f"{share:.2%} of elements out of tolerance")
    return Comparison(False, worst, "mismatch", detail)
