"""The direct convolution on the CUDA cores, shared by the conv and conv3d families: for few in-channels, a kernel of
its own in place of their implicit GEMMs, outer products in exact fp32.

With 3 in-channels K is 27 to 363: an implicit GEMM spends its K steps gathering a patch and (3xTF32) splitting it,
each patch element feeding a BLOCK_N-wide dot. The direct kernel holds the tile as out-channels x output positions,
acc[BLOCK_N, BLOCK_M], so a thread's registers hold several out-channels of several positions; it walks each
in-channel's taps (the last axis's unrolled or looped, the tile's choice) and for each loads one input value a
position (a row of one channel: consecutive at stride 1) and one weight an out-channel, and adds their outer product
with fp32 FMAs, no splitting, no tensor cores. A program's positions lie in one image (grid: position tiles, images x
groups, channel tiles), so each load's address is the image's base plus 32-bit offsets, and the store writes the
tile as it lies, consecutive positions of an out-channel together. The pointwise steps after the conv apply to the
tile as they are; a folded batchnorm or a step reading a tensor (its loads are laid out for the implicit GEMM's
[positions, out-channels] tile) keeps the implicit GEMM (`fits`). The sizes are constexprs: a build per shape.

The same loop put into the implicit GEMM's kernel instead (flat positions over all images, int64 addresses, the tile
transposed for its epilogue and store) ran far slower: Triton then laid the loop's tile out for the transposed store.

The weight is read as (in-channels x taps, out-channels) rows (DirectTiles.weight_rows: a copy made per call), so
the out-channels a tap loads are consecutive, loaded as vectors, which made the convs that take the kernel faster. On
a Hopper GPU a strided conv whose stride folds into the channels takes the shifted rows instead (shifted.py).

The tiles (TILES_2D, TILES_3D) were timed at KernelBench's published sizes against torch.compile and the implicit
GEMMs' moves; 3-D convs of 105 taps lost to the offsets move on every tile probed, so the conv3d family takes the
direct kernel only up to 81 values of K.

Register cliffs. Builds with the taps of a row unrolled ran fastest on the conv timed but lose their registers on
other shapes: ptxas's report (Triton 3.6, sm_90a, read on the CPU) shows "Used 32 registers" and kilobytes of
spills on 15 of 39 conv2d shapes on the 256 x 128 tile (a 7 x 7 stride-2 conv of 3 -> 64 channels, ResNet's and
GoogleNet's first, among them). Looped taps on 128 x 128 tiles of 4 warps lost them on none of those 39, and on 12
of 72 smaller ones, all with K of 9 or less (1 x 1 to 3 x 3 kernels on 1 to 4 channels: the loops then unrolled
whole), hence min_k. The 3-D tile kept its registers on all 72 shapes swept (K up to 81, 1 to 4 channels, 16 to 128
out-channels, strides 1 and 2). What each choice was measured on: evidence.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.families.conv import operands, shifted
from kernelcraft.propose.builtin.family import Names, TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.scalars import Scalars


@dataclass(frozen=True)
class DirectTiles:
    """A direct kernel's tile and launch: BLOCK_M output positions x at most BLOCK_N out-channels (the forward narrows
    it to the group's out-channels rounded up to a power of two, 16 at least), warps, the last axis's taps unrolled;
    the in-channels per group and values of K up to which the forward takes it."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    unroll: bool
    max_channels: int
    max_k: int
    min_k: int = 1  # and from which
    # the weight read as (CPG * taps, CO) rows, a tap's out-channels together (vector loads), not as it lies
    weight_rows: bool = True

    def applies(self) -> str:
        """The forward's condition (Python source): fp32 (exact FMAs; 16-bit inputs take the tensor cores) and few
        in-channels per group."""
        least = f" and K >= {self.min_k}" if self.min_k > 1 else ""
        return f"x.dtype == torch.float32 and CPG <= {self.max_channels} and K <= {self.max_k}{least}"


# 2-D (conv, conv1d): the tile whose builds never lost their registers in the sweep (module docstring) at 17 values
# of K or more; 3-D (conv3d) likewise. What they were timed on: evidence.py
TILES_2D = DirectTiles(BLOCK_M=128, BLOCK_N=128, num_warps=4, unroll=False, max_channels=4, max_k=4 * 11 * 11,
                       min_k=17)
TILES_3D = DirectTiles(BLOCK_M=512, BLOCK_N=16, num_warps=4, unroll=False, max_channels=4, max_k=81)


def fits(op: Op) -> bool:
    """Whether the op's epilogue is one the direct kernel applies: pointwise steps reading no tensor, no batchnorm."""
    return not op.detail.get("bn") and operands.count(op) == 0


def _sizes(axes: str) -> tuple[str, ...]:
    up = axes.upper()
    return ("C", "CPG", "CO", "COPG", *up, *(f"O{a}" for a in up), *(f"K{a}" for a in up), *(f"S{a}" for a in up),
            *(f"P{a}" for a in up), *(f"D{a}" for a in up))


def kernel(axes: str, names: Names, epilogue: str, scalars: Scalars, tiles: DirectTiles) -> TritonKernel:
    """The direct kernel over `axes` ("dhw" or "hw"), its `epilogue` (pointwise steps on x, the fp32 tile) before its
    one store; w is the weight (CO, CPG, *kernel), contiguous, or (tiles.weight_rows) that transposed to (CPG * taps,
    CO) (`launch`), so the out-channels a tap loads lie together (vector loads where CO allows)."""
    up = axes.upper()
    out_size = " * ".join(f"O{a}" for a in up)
    coords = []
    for i, a in enumerate(up):  # each position's output coordinate along each axis
        inner = " * ".join(f"O{b}" for b in up[i + 1:])
        coords.append(f"o{a.lower()} = v" + (f" // ({inner})" if inner else "") + (f" % O{a}" if i else ""))
    # the groups with the images on grid axis 1, GROUPS a constexpr: with one group g folds to 0 and co is a program's
    # first channel plus a range (groups on axis 2 with the channel tiles, g = pid // tiles, doubled the registers:
    # one program an SM where two fit, and slower; evidence.py)
    lines = ["# program (position tile, image x group, channel tile): acc[co, v] over BLOCK_N out-channels x BLOCK_M "
             "positions",
             "v = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)",
             "n = tl.program_id(1) // GROUPS",
             "g = tl.program_id(1) % GROUPS",
             "rn = tl.program_id(2) * BLOCK_N + tl.arange(0, BLOCK_N)",
             "co = g * COPG + rn",
             f"vmask = v < {out_size}",
             "nmask = rn < COPG",
             *coords,
             f"x_img = x_ptr + (n.to(tl.int64) * C + g * CPG) * ({' * '.join(up)})  # image n, the group's 1st channel",
             "acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)",
             "for c in range(CPG):"]
    mask, offset, tap, depth = "vmask", "c", "c", 1
    for i, a in enumerate(up):  # per axis: its taps' loop, the input coordinate, the mask and offset so far
        pad, low = "    " * depth, a.lower()
        last = i == len(up) - 1
        if last:  # the row's pointers once per row, the last axis's loop then adds small offsets to them
            w_r = (f"w_ptr + {tap} * K{a} * CO + co  # w as (CPG * taps, CO): a tap's out-channels in a row"
                   if tiles.weight_rows else f"w_ptr + co * (CPG * {' * '.join(f'K{b}' for b in up)}) + {tap} * K{a}")
            lines += [f"{pad}x_r = x_img + {offset} * {a}", f"{pad}w_r = {w_r}"]
        loop = (f"tl.static_range(K{a})" if tiles.unroll else f"range(K{a})") if last else f"range(K{a})"
        lines += [f"{pad}for k{low} in {loop}:",
                  f"{pad}    in_{low} = o{low} * S{a} - P{a} + k{low} * D{a}",
                  f"{pad}    m{low} = {mask} & (in_{low} >= 0) & (in_{low} < {a})"]
        if not last:  # the offset of the row so far, once per tap of this axis
            lines.append(f"{pad}    r{low} = {offset} * {a} + in_{low}")
            offset, tap = f"r{low}", f"({tap} * K{a} + k{low})"
        mask = f"m{low}"
        depth += 1
    pad, low = "    " * depth, up[-1].lower()
    lines += [f"{pad}xv = tl.load(x_r + in_{low}, mask={mask}, other=0.0).to(tl.float32)",
              f"{pad}wv = tl.load(w_r + k{low}{' * CO' if tiles.weight_rows else ''}, mask=nmask, other=0.0)"
              ".to(tl.float32)",
              f"{pad}acc += wv[:, None] * xv[None, :]",
              "x = acc",
              "if HAS_BIAS:",
              "    x += tl.load(b_ptr + co, mask=nmask, other=0.0).to(tl.float32)[:, None]",
              epilogue,
              f"out = (n.to(tl.int64) * CO + co)[:, None] * ({out_size}) + v[None, :]",
              "tl.store(y_ptr + out, x.to(y_ptr.dtype.element_ty), mask=nmask[:, None] & vmask[None, :])"]
    return TritonKernel(names(f"kc_conv{len(axes)}d_direct_kernel"), ("x_ptr", "w_ptr", "b_ptr", "y_ptr"),
                        (*_sizes(axes), "GROUPS", "HAS_BIAS", "BLOCK_M", "BLOCK_N"), "\n".join(lines), scalars)


def launch(axes: str, k: TritonKernel, tiles: DirectTiles) -> str:
    """The forward's lines launching `k` (its names: x, w, bias, y, N, C, CO, groups, CPG, COPG and per axis the
    input, output and kernel sizes, stride, padding and dilation, s/p/d + axis)."""
    up = axes.upper()
    sizes = {"C": "C", "CPG": "CPG", "CO": "CO", "COPG": "COPG", **{a: a for a in up}, **{f"O{a}": f"O{a}" for a in up},
             **{f"K{a}": f"K{a}" for a in up}, **{f"S{a}": f"s{a.lower()}" for a in up},
             **{f"P{a}": f"p{a.lower()}" for a in up}, **{f"D{a}": f"d{a.lower()}" for a in up}}
    grid = f"(triton.cdiv({' * '.join(f'O{a}' for a in up)}, {tiles.BLOCK_M}), N * groups, triton.cdiv(COPG, bn_d))"
    return (f"bn_d = min({tiles.BLOCK_N}, max(16, triton.next_power_of_2(COPG)))\n"
            + ("wt = w.reshape(CO, -1).t().contiguous()  # (CPG * taps, CO): a tap's out-channels together\n"
               if tiles.weight_rows else "")
            + k.launch(grid, ["x", "wt" if tiles.weight_rows else "w", "x if bias is None else bias", "y"],
                       {**sizes, "GROUPS": "groups", "HAS_BIAS": "bias is not None", "BLOCK_M": tiles.BLOCK_M,
                        "BLOCK_N": "bn_d"},
                       num_warps=tiles.num_warps, num_stages=1))


def first_move(axes: str, rows: str, near: TritonKernel | None, tiles: DirectTiles, fallback: str) -> str:
    """The conv and conv3d first moves' launch lines (from column 0): the shifted rows' lines `rows` where they apply
    (strides folded, shifted.applies), else the direct kernel `near` on `tiles` where they apply (None: the op's
    epilogue is not one it applies), else the lines `fallback` (from column 0)."""
    out = f"if {shifted.applies(axes, fold=True)}:\n{indent(rows, 4)}\n"
    if near is not None:
        out += (f"elif {tiles.applies()}:  # few in-channels: outer products in fp32 FMAs\n"
                f"{indent(launch(axes, near, tiles), 4)}\n")
    return out + f"else:\n{indent(fallback, 4)}"
