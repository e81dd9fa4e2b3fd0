"""The direct convolution on the CUDA cores, shared by the conv and conv3d families: for few in-channels, the K loop
of their implicit-GEMM kernels replaced by outer products in exact fp32.

With 3 in-channels K is 27 to 363: an implicit GEMM spends its K steps gathering a patch and (3xTF32) splitting it,
each patch element feeding a BLOCK_N-wide dot. The direct loop holds the tile as out-channels x output positions,
acc_t[BLOCK_N, BLOCK_M], so a thread's registers hold several out-channels of several positions; it walks each
in-channel's taps (the last axis's unrolled or looped, the move's choice) and for each loads one input value a
position (a row of one channel: consecutive at stride 1) and one weight an out-channel, and adds their outer product
with fp32 FMAs, no splitting, no tensor cores. The tile is transposed (a view: no data moves) into the kernel's
[BLOCK_M, BLOCK_N] for the bias, the epilogue and the store the implicit GEMM has.

Measured at KernelBench's published sizes on an H100, interleaved with torch.compile (exact fp32 baselines,
benchmarks/direct_conv_probe.py, direct-conv-probe-h100-2026-11-27.json): level 1's 50 (3 -> 96 channels, 11 x 11
taps at stride 4) 2.41 ms on 256 positions x 128 out-channels, 4 warps, the taps of a row unrolled, against 2.94 for
torch.compile and 3.47 for the packed 3xTF32 move; 54 and 59 (3-D, 3 -> 64 channels, 3 x 3 x 3 taps) 1.92 and 2.29
on 512 positions x 16 out-channels, 4 warps, the taps looped, against 2.15 and 2.69 for the offsets move (torch.compile
1.83 and 2.83). Narrower position tiles, or unrolled taps where Triton 3.6's register allocation gave up (32
registers, kilobytes of spills: seen in ptxas's report for 50 on 64-wide channel tiles), ran up to 80x slower; 3-D
convs of 105 taps (60, 66) lost to the offsets move on every tile probed, so the conv3d family takes the direct loop
only up to 81 values of K.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DirectTiles:
    """A direct loop's tile and launch: BLOCK_M output positions x at most BLOCK_N out-channels (the forward narrows
    it to the group's out-channels rounded up to a power of two, 16 at least), warps, the last axis's taps unrolled."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    unroll: bool
    max_channels: int  # in-channels per group up to which the forward takes it
    max_k: int  # and values of K (in-channels per group x taps) up to which

    def applies(self) -> str:
        """The forward's condition (Python source): fp32 (exact FMAs; 16-bit inputs take the tensor cores) and few
        in-channels per group."""
        return f"x.dtype == torch.float32 and CPG <= {self.max_channels} and K <= {self.max_k}"

    def grid(self) -> str:
        """The launch grid (Python source, the forward's names): the implicit GEMM's tiles at this move's sizes."""
        return f"(triton.cdiv(M, {self.BLOCK_M}) * triton.cdiv(COPG, bn_d), groups)"

    def channel_tile(self) -> str:
        return f"bn_d = min({self.BLOCK_N}, max(16, triton.next_power_of_2(COPG)))"


# 2-D (conv, conv1d): level 1's 50 above; 3-D (conv3d) likewise, 54 and 59
TILES_2D = DirectTiles(BLOCK_M=256, BLOCK_N=128, num_warps=4, unroll=True, max_channels=4, max_k=4 * 11 * 11)
TILES_3D = DirectTiles(BLOCK_M=512, BLOCK_N=16, num_warps=4, unroll=False, max_channels=4, max_k=81)


def loop(axes: list[tuple[str, str, str, str]], unroll: bool) -> str:
    """The direct K loop (module docstring) for an implicit-GEMM kernel. `axes`, outermost first, one per spatial
    axis: (the name of a tap's input coordinate, its expression in the tap's number `{t}` (origin + t * dilation), the
    kernel extent, the input extent), names of the kernel. The kernel defines x_row (the rows' group start in x,
    int64), mmask, nmask, co (the out-channels, over all groups) and acc before it; w is (CO, CPG, *kernel),
    contiguous."""
    *outer, last = axes
    plane = " * ".join(extent for *_, extent in axes)
    lines = ["acc_t = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)  # out-channels x rows",
             "w_co = w_ptr + co.to(tl.int64) * K",
             "for c in range(CPG):",
             f"    x_c = x_ptr + x_row + c * ({plane})",
             "    w_c = w_co + c * (" + " * ".join(kernel for _, _, kernel, _ in axes) + ")"]
    depth, mask, offset, tap = 1, "mmask", "", ""
    for name, step, kernel, extent in outer:
        pad = "    " * depth
        lines += [f"{pad}for t_{name} in range({kernel}):",
                  f"{pad}    {name} = {step.format(t=f't_{name}')}",
                  f"{pad}    m_{name} = {mask} & ({name} >= 0) & ({name} < {extent})"]
        after = axes[depth]  # the next axis: a row offset's and a tap number's multipliers
        offset = f"({offset} + {name}) * {after[3]}" if offset else f"{name} * {after[3]}"
        tap = f"({tap} + t_{name}) * {after[2]}" if tap else f"t_{name} * {after[2]}"
        mask = f"m_{name}"
        depth += 1
    name, step, kernel, extent = last
    pad = "    " * depth
    taps = f"tl.static_range({kernel})" if unroll else f"range({kernel})"
    lines += [f"{pad}x_r = x_c + {offset or '0'}",
              f"{pad}w_r = w_c + {tap or '0'}",
              f"{pad}for t_{name} in {taps}:",
              f"{pad}    {name} = {step.format(t=f't_{name}')}",
              f"{pad}    xv = tl.load(x_r + {name}, mask={mask} & ({name} >= 0) & ({name} < {extent}), "
              "other=0.0).to(tl.float32)",
              f"{pad}    wv = tl.load(w_r + t_{name}, mask=nmask, other=0.0).to(tl.float32)",
              f"{pad}    acc_t += wv[:, None] * xv[None, :]",
              "acc = tl.trans(acc_t)  # rows x out-channels, as the implicit GEMM's tile (a view)"]
    return "\n".join(lines)

