"""The op kinds the loss families serve, typed (Family.details). *_attr: the attribute forward reads the number
from at run time ("beta", or "crit.beta" for a loss module), None where it is a literal."""

from typing import Literal, TypedDict


class Loss(TypedDict):
    """Of the first two inputs (prediction, target), of equal shapes; param: smooth_l1's beta, huber's delta (None
    for mse, l1); reduction "none" keeps the input's shape."""

    fn: Literal["mse", "l1", "smooth_l1", "huber"]
    reduction: Literal["mean", "sum", "none"]
    param: float | None
    param_attr: str | None


class CrossEntropy(TypedDict):
    """F.cross_entropy(logits, targets) of the first two inputs: logits (N, C, *d) or (C,), int class targets (N, *d)
    or (); no class weights, no label smoothing; targets equal to ignore_index add nothing and are not counted by the
    mean (all ignored: NaN)."""

    reduction: Literal["mean", "sum", "none"]
    ignore_index: int
    ignore_index_attr: str | None


class KlDivLogits(TypedDict):
    """F.kl_div(log_softmax(a, dim), log_softmax(b, dim), reduction, log_target=True) of the first two inputs (equal
    shapes): KL(softmax(b) || softmax(a)) summed over dim, then over rows (/ a.shape[0] for batchmean, / numel for
    mean)."""

    dim: int
    reduction: Literal["batchmean", "sum", "mean"]


class KlDiv(TypedDict):
    """F.kl_div(input, b) of the first two inputs a, b (equal shapes), input = log(a) when log_input (torch.log of
    the first input, fused) else a: pointwise exp(b) * (b - input) if log_target else xlogy(b, b) - b * input (a
    target 0 adds 0), summed (/ a.shape[0] for batchmean, / numel for mean), or kept ("none")."""

    reduction: Literal["batchmean", "sum", "mean", "none"]
    log_target: bool
    log_input: bool


class TripletMargin(TypedDict):
    """F.triplet_margin_loss(a, p, n) of the first three inputs (one shape) with p = 2: per row of the last dim
    max(margin + d(a, p) - d(a, n), 0), d(x, y) = ||x - y + eps||_2 (swap: d(a, n) replaced by
    min(d(a, n), d(p, n))); mean / sum over the rows, or the rows' losses (shape a.shape[:-1])."""

    margin: float
    margin_attr: str | None
    eps: float
    eps_attr: str | None
    swap: bool
    reduction: Literal["mean", "sum", "none"]


DETAILS = {"loss": Loss, "kl_div": KlDiv, "cross_entropy": CrossEntropy, "kl_div_logits": KlDivLogits,
           "triplet_margin": TripletMargin}
