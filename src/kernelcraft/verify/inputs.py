"""Inputs drawn fresh for every check: a secret seed, the problem's own `get_inputs()` run on the
device the check runs on, then one of several value distributions.

A problem's `get_inputs()` says what the inputs are (shapes, dtypes, integer ranges, signs); the
distributions vary the values around that so a candidate cannot lean on one of them (randn's zero
mean, unit scale): small scales expose a dropped or misplaced epsilon, large ones overflow and
cancellation. Every transform keeps each element's sign, so a problem that needs positive
inputs (a log, a sqrt) still gets them. A problem may restrict them with a module-level
`INPUT_DISTRIBUTIONS = [...]`.

One-signed inputs (KernelBench's `torch.rand`) hide reduced precision: every product in a sum is positive,
the operands' rounding errors average out while the sum grows, and bf16 operands of a K = 2^17 matmul are
off by 1e-5 to 7e-5 of the output, inside a 1e-4 tolerance, under every distribution above (mixed_scale's
100x included). Where every floating input is one-signed and the problem names no distributions of its own,
`spread` takes `offset`'s place (`precision_rotation`): each magnitude scaled down by its own factor, from
1 to 10^-16, so a sum is carried by a few of its terms and an operand's rounding is a rounding of the
output (bf16: 1.5e-3 to 5e-3 of an element; TF32: 1.5e-4 to 8e-4; fp32: a few ulps). The factor's exponent is
−16·u^(1/3) (u uniform), not −16·u: with a uniform exponent the largest terms of a K-long sum crowd within a
decade of each other, ~K/512 of them, and their roundings average out (bf16 operands at K = 2^17: 1e-4 to 3e-4
of an element, so about one draw in 30 passed strict's 1e-4). With the cube root a few terms carry the sum at
any K (P(factor > 10^-y) = (y/16)^3). The values stay where
the problem's own distribution puts them ([0, 1) for torch.rand: only scaled down), signs and zeros kept.
`perturbed` moves each element by up to 1%, or by up to a few units of its own roundoff (`ulps`): fp32 and
float64 runs of the reference on such inputs sample its own rounding (check.compare_exact); the first land
the exact output afresh on fp32's grid, the second keep an ill-conditioned element as ill-conditioned as
the drawn one (a softmax's near tie, which a 1% move of the inputs takes elsewhere).
"""

from __future__ import annotations

import copy
import math
import secrets

import torch

from kernelcraft.verify.memory import slices

DISTRIBUTIONS = ("natural", "offset", "mixed_scale", "uniform", "small_scale", "large_scale")
SPREAD = "spread"  # not in the default rotation: see precision_rotation; a problem may name it
KNOWN = DISTRIBUTIONS + (SPREAD,)
SPREAD_DECADES = 16.0  # at most: half the dtype's range of magnitudes, so products stay representable
SPREAD_TAIL = 3.0  # the exponent −decades·u^(1/SPREAD_TAIL): few large magnitudes, whatever the length of a sum


def fresh_seed() -> int:
    return secrets.randbits(62)


def distributions_for(module) -> tuple[str, ...]:
    allowed = tuple(getattr(module, "INPUT_DISTRIBUTIONS", DISTRIBUTIONS))
    unknown = set(allowed) - set(KNOWN)
    if unknown:
        raise ValueError(f"INPUT_DISTRIBUTIONS names unknown distributions {sorted(unknown)}")
    return allowed or ("natural",)


def one_signed(inputs: list) -> bool:
    """Whether every floating tensor input has one sign (zeros aside), and there is one."""
    floats = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel()]

    def signs(x: torch.Tensor) -> tuple[bool, bool]:
        flags = torch.stack([torch.stack([(s < 0).any(), (s > 0).any()]) for (s,) in slices(x)]).any(dim=0)
        below, above = flags.tolist()
        return below, above

    return bool(floats) and not any(all(signs(x)) for x in floats)


def precision_rotation(module, distributions: tuple[str, ...], inputs: list) -> tuple[str, ...]:
    """The trials' distributions once a draw of the inputs is seen: `spread` in `offset`'s place where every
    floating input is one-signed and the problem names no distributions of its own (an `offset` of one-signed
    values is a mild per-element scale, which `mixed_scale` covers)."""
    if hasattr(module, "INPUT_DISTRIBUTIONS") or SPREAD in distributions or not one_signed(inputs):
        return distributions
    return tuple(SPREAD if d == "offset" else d for d in distributions)


PERTURBATION = 2.0 ** -7  # relative, at most: moves an ill-conditioned output across its rounding grid
NUDGE_ULPS = 16  # a nudge: up to this many units of an element's roundoff, where its conditioning stays as drawn


def perturbed(inputs: list, generator: torch.Generator, relative: float = PERTURBATION,
              ulps: int | None = None) -> list:
    """Copies of the floating tensor inputs with every element multiplied by its own factor in (1 − relative,
    1 + relative), or with `ulps`, (1 − ulps·eps, 1 + ulps·eps) for the input's dtype (signs and zeros kept; the
    other inputs as they are): a problem next to the drawn one, where the reference's rounding lands afresh. An
    fp32 run and a float64 run on it give one sample of that rounding (judge.Case.rounding_noise)."""
    out = []
    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            out.append(x)
            continue
        if ulps is not None:
            relative = ulps * torch.finfo(x.dtype).eps
        y = torch.empty_like(x)
        for part, into in slices(x, y):
            wide = torch.float64 if part.dtype == torch.float64 else torch.float32  # a float64 nudge needs float64
            draw = torch.rand(part.shape, generator=generator, device=part.device, dtype=wide)
            factor = 1 + relative * (2 * draw - 1)
            into.copy_(part * factor.to(part.dtype))
        out.append(y)
    return out


def has_floating(inputs: list) -> bool:
    """Whether a nudge of `inputs` moves anything (token ids, masks and sizes are not nudged)."""
    return any(isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() for x in inputs)


def nudged(model: torch.nn.Module, generator: torch.Generator, ulps: int | None = None) -> torch.nn.Module:
    """A copy of `model` with every floating parameter nudged as `perturbed` nudges an input, never by more than
    PERTURBATION: the model next to the drawn one, for a problem whose inputs carry no float to nudge (a language
    model's token ids), where the reference's rounding lands afresh. Its buffers (masks, rotary tables) are kept."""
    near = copy.deepcopy(model)
    with torch.no_grad():
        for p in near.parameters():
            if p.is_floating_point() and p.numel():
                steps = None if ulps is None or ulps * torch.finfo(p.dtype).eps > PERTURBATION else ulps
                p.copy_(perturbed([p], generator, ulps=steps)[0])
    return near


def draw_inputs(module, device: str, seed: int, distribution: str = "natural") -> list:
    """The problem's inputs for `seed`, on `device`, with values from `distribution`.

    The values are changed in place, a slice at a time: a KernelBench input can be 8 GB, and whole-tensor
    temporaries would hold several times that while the inputs are drawn."""
    devices = [torch.device(device).index or 0] if torch.device(device).type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        with torch.device(device):
            inputs = list(module.get_inputs())
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
        generator = torch.Generator(device=device).manual_seed(seed ^ 0x5DEECE66D)
        return [_transform(x, distribution, generator) for x in inputs]


def unshared(x: torch.Tensor) -> bool:
    """Whether no two elements of `x` share memory: each dimension of more than one element strides past all the
    smaller ones it spans (a transpose or a slice: yes; an expand: no)."""
    span = 1
    for size, stride in sorted(((n, st) for n, st in zip(x.shape, x.stride()) if n > 1), key=lambda d: d[1]):
        if stride < span:
            return False
        span = stride * size
    return True


def _own(x: torch.Tensor) -> torch.Tensor:
    """A copy of `x` in memory of its own: with `x`'s strides where its elements share none, else contiguous."""
    if not unshared(x):
        return x.clone(memory_format=torch.contiguous_format)
    return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(x)


def _mean_square(x: torch.Tensor) -> float:
    return sum(float(torch.linalg.vector_norm(s, dtype=torch.float64) ** 2) for (s,) in slices(x)) / max(1, x.numel())


def _transform(x, distribution: str, g: torch.Generator):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or distribution == "natural":
        return x
    if distribution not in KNOWN:
        raise ValueError(f"unknown distribution {distribution!r}")
    if x.numel() == 0:
        return x
    # the drawn tensor is ours: changed in place (a view into another input's storage is copied first, into its
    # own memory of the same strides: a problem that draws a transposed or sliced layout keeps it)
    x = _own(x) if x._base is not None else x
    device = x.device

    def scalar() -> float:
        return float(torch.rand((), generator=g, device=device))

    if distribution == "small_scale":  # one scale for the whole tensor, 0.001x to 0.03x: where an eps matters
        return x.mul_(10 ** (scalar() * 1.5 - 3))
    if distribution == "large_scale":  # 30x to 1000x: where overflow and cancellation show
        return x.mul_(10 ** (scalar() * 1.5 + 1.5))
    if distribution == "offset" and bool((x < 0).any()) and bool((x > 0).any()):
        # a shift of up to two standard deviations, where signs are free
        mean = sum(float(s.sum(dtype=torch.float64)) for (s,) in slices(x)) / x.numel()
        std = max((_mean_square(x) - mean ** 2) * x.numel() / max(1, x.numel() - 1), 0.0) ** 0.5
        return x.add_((scalar() * 4 - 2) * max(std, 1e-3))
    rms = max(_mean_square(x) ** 0.5, 1e-3) if distribution == "uniform" else 0.0
    decades = min(SPREAD_DECADES, math.log10(torch.finfo(x.dtype).max) / 2)
    for (part,) in slices(x):
        work = part.float()
        noise = torch.rand(part.shape, generator=g, device=device)
        if distribution == "mixed_scale":  # every element its own scale, 0.01x to 100x
            work = work * 10 ** (noise * 4 - 2)
        elif distribution == "uniform":  # magnitudes uniform in (0, 2·rms), signs kept
            work = torch.where(work < 0, -1.0, 1.0) * noise * 2 * rms
        elif distribution == SPREAD:  # every magnitude scaled down by its own factor, 1 to 10^-decades
            work = work * 10 ** (-decades * noise ** (1 / SPREAD_TAIL))
        else:  # offset for one-signed inputs: each magnitude grows by up to 2x, the sign kept
            work = work * (1 + noise)
        part.copy_(work)
    return x


# -- changes in place between timed calls ----------------------------------------------------------------
#
# A candidate timed on the same inputs call after call could return an output it cached, keyed on what it
# can see of them (pointer, shape, a few values, a checksum), or correct its last output where only part of an
# input changed (a low-rank update of a product). So before every timed call the inputs change in place, as a
# seed drawn just before it decides (never known to the candidate in advance): on about one call in four
# (FRESH_SHARE) every element of every floating input changes (fully fresh inputs); on the others one span along
# each tensor's longest dimension changes, of a length drawn anew each time (1/64 to 1/2 of it) at a random place.
# Sampled timed outputs are checked against the reference on the inputs as they were at that call (the
# supervisor replays the seeds), and a candidate whose fully fresh calls are slower than the others is caught
# (`stateful_output`, verify/judge.py); the outside clock (outside.outside_clock) runs on fresh inputs only.

FRESH_SHARE = 0.25


def mutation_kind(module) -> str:
    """`scale` (values multiplied, signs kept) where the problem admits scaled inputs; else `roll` (values moved
    along the dimension: the values themselves, and any structure they have, stay)."""
    return "scale" if "mixed_scale" in distributions_for(module) else "roll"


def mutate_inputs(inputs: list, seed: int, kind: str) -> bool:
    """Change every floating tensor input in place, as `seed` and `kind` decide (see above). Whether the change
    was a fully fresh one (every element)."""
    import random

    rng = random.Random(seed)
    fresh = rng.random() < FRESH_SHARE

    def factor() -> float:  # 2^(±0.35…0.5): a change of a quarter or more, never a drift to overflow
        return 2 ** (rng.choice((-1, 1)) * rng.uniform(0.35, 0.5))

    def change(span) -> None:
        if kind == "scale":
            # positives and negatives scaled apart, so a sum over the span moves even for zero-mean data
            up, down = factor(), factor()
            span.mul_(torch.where(span > 0, up, down).to(span.dtype))
        elif span.size(dim) > 1:
            span.copy_(span.roll(rng.randrange(1, span.size(dim)), dims=dim))

    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            continue
        if x.dim() == 0:
            if kind == "scale":
                x.mul_(factor())
            continue
        dim = max(range(x.dim()), key=lambda d: x.size(d))
        size = x.size(dim)
        if fresh:  # every element: spans of a 32nd (the temporaries stay small) covering the dimension
            length = max(2, size // 32)
            for start in range(0, size, length):
                change(x.narrow(dim, start, min(length, size - start)))
            continue
        length = max(1, size // rng.choice((2, 4, 8, 16, 32, 64)))
        change(x.narrow(dim, rng.randrange(0, size - length + 1), length))
    return fresh
