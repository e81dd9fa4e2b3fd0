"""Is a candidate's output the reference's? Form first (type, shape, dtype, layout), then values.

Error is measured against the output's own magnitude: |out − ref| / (|ref| + rms(ref)), so a
constant or all-zeros answer fails even where the outputs are tiny, and NaN or Inf never passes.
Integer and boolean outputs must match exactly.

Where torch's own fp32/fp16 output is not a good enough reference (an ill-conditioned output: a sum
that cancels to rounding noise, a near-one-hot softmax), and under a policy with the `precision` rule for
every fp32 output of a trial, `compare_exact` judges the candidate against a float64 reference, element by
element: within the tolerance of the element itself, or within `policy.rounding_factor` times the
reference's own rounding at that element (`rounding`: torch's fp32 error there, the largest of several
runs), or under `policy.noise_floor` units of roundoff of the output's rms. An allowance taken over the
whole output would admit an estimate of the function wherever any element is ill-conditioned; one per
element admits rounding only where rounding is.
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


def worst_rounding(torch_out: torch.Tensor, exact: torch.Tensor) -> float:
    """Torch's worst absolute error against float64 over the whole output."""
    return _worst(torch_out, exact, 0.0)[0]


def rounding(sample: torch.Tensor, exact: torch.Tensor, into: torch.Tensor | None = None) -> torch.Tensor:
    """The reference's own rounding at every element: |sample − exact| (fp32, a slice at a time) for an fp32 run of
    the reference (`sample`), or the larger of that and `into`, in place. A NaN error (a run gone unstable there)
    counts as infinite."""
    fresh = into is None
    if fresh:
        into = torch.empty(exact.shape, dtype=torch.float32, device=exact.device)
    for noise, s, x in _slices(into, sample, exact):
        err = (s.to(torch.float64) - x.to(torch.float64)).abs().nan_to_num(nan=math.inf).to(torch.float32)
        if fresh:
            noise.copy_(err)
        else:
            torch.maximum(noise, err, out=noise)
    return into


TYPICAL_QUANTILE = 0.75
TYPICAL_SAMPLE = 1 << 20


def _typical_rounding(noise: torch.Tensor | None, torch_out: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """The reference's typical rounding over the output: the TYPICAL_QUANTILE of its rounding at up to TYPICAL_SAMPLE
    elements drawn at random (`noise` per element, else torch's own error). An element where the reference happens
    to be exact because the exact value is lost in rounding (a ReLU of a sum that cancels: torch's clamped, an
    honest order's rounding landing on the other side) says nothing of the rounding there; the output's typical
    rounding does. It is allowed only where float64's value is itself below it: elsewhere an estimate must be as
    close as the reference's own rounding at that element."""
    numel = exact.numel()
    if numel == 0:
        return torch.zeros((), dtype=torch.float64, device=exact.device)
    picks = torch.randint(numel, (min(numel, TYPICAL_SAMPLE),), device=exact.device)
    if noise is not None:
        values = noise.reshape(-1)[picks].to(torch.float64)
    else:
        values = (torch_out.reshape(-1)[picks].to(torch.float64) - exact.reshape(-1)[picks].to(torch.float64)).abs()
    values = values.nan_to_num(nan=0.0, posinf=0.0)
    k = max(1, int(TYPICAL_QUANTILE * values.numel()))
    return values.kthvalue(k).values


def compare_exact(out: torch.Tensor, torch_out: torch.Tensor, exact: torch.Tensor, policy: Policy,
                  noise: torch.Tensor | float | None = None, runs: int = 1) -> Comparison:
    """The candidate against a float64 reference (`exact`), element by element: |out − exact| beyond
    `policy.rounding_factor` times the reference's own rounding at that element must be within the policy's
    tolerance of |exact| + a floor of `policy.noise_floor` units of roundoff of the output's rms (at most the rms).

    The reference's own rounding: `noise`, per element (`rounding` over `runs` fp32 runs of the reference), or by
    default torch's own error at that element (`torch_out`, one run: it can be near zero by chance, so a failure
    on it alone is worth sampling again); a float is one allowance for every element (the whole output's)."""
    tol = policy.tolerance(torch_out.dtype)
    factor = policy.rounding_factor
    rms = _rms_on_device(exact)
    # the unit roundoff of the math the policy admits (TF32's where it admits TF32), and never more than the rms
    # (what `compare` allows): for fp16/bf16 outputs that is the rms
    tf32 = policy.allow_tf32 and torch_out.dtype == torch.float32
    unit = 2.0 ** -11 if tf32 else torch.finfo(torch_out.dtype).eps / 2
    floor = rms * min(1.0, policy.noise_floor * unit / tol)
    zero = torch.zeros((), dtype=torch.float64, device=out.device)
    tops, where, plain, own, over, seen = [], [], zero, zero, zero.to(torch.int64), 0
    per_element = isinstance(noise, torch.Tensor)
    typical = zero if isinstance(noise, float) else _typical_rounding(noise if per_element else None, torch_out, exact)
    for o, t, x, *n in _slices(out, torch_out, exact, *([noise] if per_element else [])):
        o, t, x = o.to(torch.float64), t.to(torch.float64), x.to(torch.float64)
        diff, mine = (o - x).abs(), (t - x).abs()
        allowed = n[0].to(torch.float64) if per_element else (mine if noise is None else noise)
        if not isinstance(allowed, float):  # where float64 is itself below the output's typical rounding, that
            allowed = torch.where(x.abs() <= typical, torch.maximum(allowed, typical), allowed)
        err = ((diff - factor * allowed).clamp_min(0) / (x.abs() + floor)).reshape(-1)
        tops.append(err.max())
        where.append(err.argmax() + seen)
        over = over + (err > tol).sum()
        plain = torch.maximum(plain, (diff / (x.abs() + rms)).max())  # the error as `compare` measures it
        own = torch.maximum(own, (mine / (x.abs() + rms)).max())
        seen += err.numel()
    worst, flat, (over,) = _read(torch.stack(tops), torch.stack(where), [over])
    plain, own = (math.inf if math.isnan(v) else v for v in torch.stack([plain, own]).tolist())
    if per_element:
        source = "torch's own error there" if runs == 1 else f"the largest error of {runs} fp32 runs there"
    else:
        source = "torch's own error there" if noise is None else f"torch's worst error over the output, {noise:.3g}"
    summary = (f"against float64, element by element: the candidate's error {plain:.3g} of the output's magnitude, "
               f"torch's own {own:.3g}; allowed {tol:g} of each element, or {factor:g}x the reference's own rounding "
               f"({source}), or {policy.noise_floor:g} ulps of the output's rms")
    if worst <= tol:
        return Comparison(True, worst, detail=summary)
    index, got = _at(out, flat)
    _, expected = _at(exact, flat)
    _, torch_there = _at(torch_out, flat)
    return Comparison(False, worst, "mismatch", f"{summary}; {worst:.3g} > {tol:g} ({policy.name}) beyond the "
                      f"reference's rounding at index {index}: got {got:.6g}, float64 {expected:.6g}, torch "
                      f"{torch_there:.6g}; {over / out.numel():.2%} of elements out of tolerance")


# -- a reference seen at secret places: the outside clock's calls ------------------------------------------------

@dataclass
class Sampled:
    """A floating reference output seen at secret flat positions, with its whole rms and whether it is finite
    everywhere: what `compare_sampled` needs to judge a candidate's output there later, without the reference kept
    (device tensors, nothing read)."""
    positions: torch.Tensor
    values: torch.Tensor
    rms: torch.Tensor
    finite: torch.Tensor


def sample_reference(ref: torch.Tensor, positions: torch.Tensor) -> Sampled:
    finite = torch.stack([torch.isfinite(r).all() for (r,) in _slices(ref)]).all()
    return Sampled(positions, ref.reshape(-1)[positions].clone(), _rms_on_device(ref), finite)


def compare_sampled(out: torch.Tensor, sampled: Sampled, policy: Policy) -> Comparison:
    """`compare`'s rule at the sampled positions only: |out − ref| / (|ref| + rms(ref)), the rms over the whole
    reference. One sync."""
    got = out.reshape(-1)[sampled.positions]
    if got.numel() == 0:
        return Comparison(True, 0.0)
    tol = policy.tolerance(sampled.values.dtype)
    bad = (~torch.isfinite(got)).sum()
    tops, where, over = _errors(got, sampled.values, sampled.rms, tol=tol)
    worst, _, (bad, over) = _read(tops, where, [bad, over])
    n = got.numel()
    if bad:
        return Comparison(False, math.inf, "non_finite", f"{bad} NaN/Inf of {n} elements checked at secret places")
    if worst <= tol:
        return Comparison(True, worst)
    return Comparison(False, worst, "mismatch", f"max relative error {worst:.3g} > {tol:g} ({policy.name}) at "
                      f"{over} of {n} elements checked at secret places")
