"""The op kind the pool3d family serves, typed (Family.details)."""

from typing import Literal

from kernelcraft.propose.builtin.families.pool.ops import PoolGeometry


class Pool3d(PoolGeometry):
    """pool2d's keys lifted to 3-D, over the last three dims of x, (N, C, D, H, W) or (C, D, H, W): max/avg:
    kernel..dilation are ints (avg: dilation [1, 1, 1]), output_size None; adaptive_avg/adaptive_max: output_size
    (None keeps the input's size), the four geometry keys None. Max NaN propagates as in torch; no indices, no
    divisor_override. Output sizes: kernels.py's kc_pool3d_out."""

    pool: Literal["max", "avg", "adaptive_avg", "adaptive_max"]


DETAILS = {"pool3d": Pool3d}
