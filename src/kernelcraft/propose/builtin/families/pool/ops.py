"""The op kind the pool family serves, typed (Family.details)."""

from typing import Literal, TypedDict


class PoolGeometry(TypedDict):
    """What every pooling's detail holds: its window ([H, W] or [D, H, W] ints; None for an adaptive pooling), its
    flags, and an adaptive pooling's output size (None otherwise; an entry None keeps the input's size)."""

    kernel: list[int] | None
    stride: list[int] | None
    padding: list[int] | None
    dilation: list[int] | None
    ceil_mode: bool
    count_include_pad: bool
    output_size: list[int | None] | None


class Pool2d(PoolGeometry):
    """Pooling over the last `dims` dims of x, (N, C, H, W) or (C, H, W); 1-D pooling is H = 1 (pairs [1, k], [1, s],
    [0, p], [1, d], output_size [1, o]). max/avg: kernel..dilation are [H, W] ints (avg: dilation [1, 1];
    count_include_pad is avg's), output_size None; adaptive_avg: output_size (None keeps the input's size), the four
    geometry keys None, bins [floor(i*H/OH), ceil((i+1)*H/OH)). Output sizes: kernels.py kc_pool_out."""

    pool: Literal["max", "avg", "adaptive_avg"]
    dims: int


DETAILS = {"pool2d": Pool2d}
