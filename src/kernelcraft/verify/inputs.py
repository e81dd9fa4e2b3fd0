"""Inputs drawn fresh for every check: a secret seed, the problem's own `get_inputs()` run on the
device the check runs on, then one of several value distributions.

A problem's `get_inputs()` says what the inputs are (shapes, dtypes, integer ranges, signs); the
distributions vary the values around that so a candidate cannot lean on one of them (randn's zero
mean, unit scale): small scales expose a dropped or misplaced epsilon, large ones overflow and
cancellation. Every transform keeps each element's sign, so a problem that needs positive
inputs (a log, a sqrt) still gets them. A problem may restrict them with a module-level
`INPUT_DISTRIBUTIONS = [...]`.
"""

from __future__ import annotations

import secrets

import torch

from kernelcraft.verify.memory import slices

DISTRIBUTIONS = ("natural", "offset", "mixed_scale", "uniform", "small_scale", "large_scale")


def fresh_seed() -> int:
    return secrets.randbits(62)


def distributions_for(module) -> tuple[str, ...]:
    allowed = tuple(getattr(module, "INPUT_DISTRIBUTIONS", DISTRIBUTIONS))
    unknown = set(allowed) - set(DISTRIBUTIONS)
    if unknown:
        raise ValueError(f"INPUT_DISTRIBUTIONS names unknown distributions {sorted(unknown)}")
    return allowed or ("natural",)


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


def _mean_square(x: torch.Tensor) -> float:
    return sum(float(torch.linalg.vector_norm(s, dtype=torch.float64) ** 2) for (s,) in slices(x)) / max(1, x.numel())


def _transform(x, distribution: str, g: torch.Generator):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or distribution == "natural":
        return x
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r}")
    if x.numel() == 0:
        return x
    # the drawn tensor is ours: changed in place (a view into another input's storage is copied first)
    x = x.clone() if x._base is not None else x
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
    for (part,) in slices(x):
        work = part.float()
        noise = torch.rand(part.shape, generator=g, device=device)
        if distribution == "mixed_scale":  # every element its own scale, 0.01x to 100x
            work = work * 10 ** (noise * 4 - 2)
        elif distribution == "uniform":  # magnitudes uniform in (0, 2·rms), signs kept
            work = torch.where(work < 0, -1.0, 1.0) * noise * 2 * rms
        else:  # offset for one-signed inputs: each magnitude grows by up to 2x, the sign kept
            work = work * (1 + noise)
        part.copy_(work)
    return x


# -- changes in place between timed calls ----------------------------------------------------------------
#
# A candidate timed on the same inputs call after call could return an output it cached, keyed on what it
# can see of them (pointer, shape, a few values, a checksum). So before every timed call a few inputs'
# values change in place, in a span at a random place along each tensor's longest dimension, and sampled
# timed outputs are checked against the reference on the inputs as they were at that call. The change is a
# function of a seed drawn just before it (never known to the candidate in advance); the supervisor replays
# the seeds to rebuild the inputs.

def mutation_kind(module) -> str:
    """`scale` (span values multiplied, signs kept) where the problem admits scaled inputs; else `roll`
    (span values moved along the dimension: the values themselves, and any structure they have, stay)."""
    return "scale" if "mixed_scale" in distributions_for(module) else "roll"


def mutate_inputs(inputs: list, seed: int, kind: str) -> None:
    """Change every floating tensor input in place, as `seed` and `kind` decide (see above)."""
    import random

    rng = random.Random(seed)

    def factor() -> float:  # 2^(±0.35…0.5): a change of a quarter or more, never a drift to overflow
        return 2 ** (rng.choice((-1, 1)) * rng.uniform(0.35, 0.5))

    for x in inputs:
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
            continue
        if x.dim() == 0:
            if kind == "scale":
                x.mul_(factor())
            continue
        dim = max(range(x.dim()), key=lambda d: x.size(d))
        length = max(1, x.size(dim) // 32)
        span = x.narrow(dim, rng.randrange(0, x.size(dim) - length + 1), length)
        if kind == "scale":
            # positives and negatives scaled apart, so a sum over the span moves even for zero-mean data
            up, down = factor(), factor()
            span.mul_(torch.where(span > 0, up, down).to(span.dtype))
        elif length > 1:
            span.copy_(span.roll(rng.randrange(1, length), dims=dim))
