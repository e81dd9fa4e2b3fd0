"""The GEMM family's move parameters (`Tiles`: one output tile shape and how its products are made and fed) and the
moves worth trying for a matmul or a linear layer; the idea text of each is derived from its fields.

fp32 inputs: exact (ieee) tiled kernels, 3xTF32 (fp32-grade accuracy on the tensor cores) and TF32 fed by TMA,
TF32 on the strided kernel; a matmul's first move is the matrix-vector (GEMV) one, whose wider products take 3xTF32
fed by TMA, large ones on operands split into their TF32 parts once, before the GEMM (`split_once`). TF32 rounds
the inputs, so those moves are `relaxed` (a strict tolerance policy skips them). 16-bit inputs get 16-bit moves instead: the
tensor cores with fp32 accumulation are exact enough for any policy (the products of two 16-bit numbers are
exact in fp32), so precision is not the question; feeding them is (TMA tiles of B read as it lies)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from kernelcraft.propose.builtin.family import Params
from kernelcraft.propose.builtin.plan import Op

GEMV_COLUMNS = 4  # the GEMV move's kernel takes products with at most this many columns of C (matrix-vector)
HALF = {"float16": "fp16", "bfloat16": "bf16"}  # a matmul's 16-bit input dtypes, as the moves name them
PRECISIONS = ("ieee", "tf32", "tf32x3")  # tl.dot's input_precision for fp32 inputs (16-bit ones always "ieee")
# 16-bit tiles (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): TMA-fed persistent ones, then strided ones; the best
# of a tile sweep of level1/matmul_fp16 (evidence.py)
HALF_TMA = ((128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (256, 128, 64, 8, 4))
HALF_PLAIN = ((128, 256, 64, 8, 3),)
# fp32 TMA tiles (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages): the best of a probe of TMA tiles (evidence.py)
TMA_TILES = ((128, 256, 32, 8, 3), (256, 128, 32, 8, 3))
# the first exact move's tiles; a 3xTF32 TMA move's strided kernel (off TMA, and for split-K) runs exact fp32 at
# them: its splits cost more on the strided kernel than the exact FMA path gains (evidence.py)
EXACT_TILES = (128, 128, 32, 8, 3)
# a matmul's first move's tiles (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), for its operands split once or, in
# products too small for that, split in the K loop: split once, 128x256 tiles hold three 128x256 accumulators and
# spill (evidence.py)
SPLIT_TILES = (128, 128, 32, 8, 3)
# 3xTF32's split made once pays where a product's work outgrows its operands: per output tile of a K step the
# GEMM does 2 BLOCK_M BLOCK_N multiply-adds, the split pass moves 12 bytes per operand element (read once, two
# parts written) and the GEMM reads each twice. Split once was the faster from M N / (M + N) = 512 up; smaller
# products keep the in-loop split, not measured against it (evidence.py)
SPLIT_ONCE_MIN = 512
# a product whose K is one step of a 32-wide tile is bound by writing C, not by its products: under a move with
# `short_k` it takes exact fp32 on 64x64 tiles of 4 warps (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages), faster there
# than the operands split once and than exact fp32 at 128x128 (evidence.py)
SHORT_K = 32
SHORT_K_TILES = (64, 64, 32, 4, 3)
SPLIT_CHUNK = 16  # K steps the tensor cores sum between fp32 folds (kernels._TMA_SPLIT)
# the relaxed (TF32) TMA moves' tiles: TMA_TILES, 128x256 in 2 stages (in 3 it asks 272 KB of shared memory, its
# tile's layout change before the store included: more than an H100 has)
RELAXED_TMA_TILES = ((128, 256, 32, 8, 2), TMA_TILES[1])
# a linear layer's come after 128x128 ones: a batch of 128 rows (KernelBench level 2) makes one row of tiles, and
# 256-wide ones leave half of an H100's SMs idle (slower there: evidence.py)
LINEAR_TMA_TILES = ((128, 128, 32, 8, 3),) + TMA_TILES


@dataclass(frozen=True)
class Tiles(Params):
    """A GEMM move: BLOCK_M x BLOCK_N output tiles (GROUP_M swizzle), BLOCK_K-wide K steps, `precision` the fp32
    products' input_precision; `tma`: a persistent kernel fed by tensor descriptors where a Hopper GPU and the
    operands allow it; `gemv`: products of at most GEMV_COLUMNS columns take the matrix-vector kernel; `b_kmajor`:
    the TMA kernel reads B K-major (a matmul's B transposed once; a linear's weight is so already), else as it
    lies; `half`: the 16-bit inputs the move is made for ("fp16", "bf16"), None for fp32 ones; `split_k`: a plain
    2-D product whose output tiles fill under half the GPU's SMs splits a long K among programs (host.SPLIT_K);
    `split_once` (a 3xTF32 TMA move of a matmul): products large enough (tma.SPLIT_ONCE_MIN) have their operands
    split into TF32 parts by a pass before the GEMM, not at each K step in it; `short_k`: products with K at most
    SHORT_K take exact fp32 products on the strided kernel's SHORT_K_TILES; `split_k_tma` (a 3xTF32 TMA move that
    splits K): on a Hopper GPU the parts of K run as one batch of products on the TMA kernel (each part's A and B
    views of K chunks), not as exact fp32 on the strided kernel. A matmul's first move sets it: faster where K is
    split, no change elsewhere (evidence.py)."""

    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 32
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    precision: str = "ieee"
    tma: bool = False
    gemv: bool = False
    b_kmajor: bool = True
    half: str | None = None
    split_k: bool = False
    split_once: bool = False
    short_k: bool = False
    split_k_tma: bool = False

    def __post_init__(self):
        if self.split_k_tma and not (self.split_k and self.tma and self.precision == "tf32x3" and not self.half):
            raise ValueError("split_k_tma runs split-K's parts as 3xTF32 on the TMA kernel: a tf32x3 TMA move with "
                             "split_k")

    K_MAJOR: ClassVar[str] = ""  # how the operand B becomes the K-major one TF32 tensor cores read
    OFF_TMA: ClassVar[str] = ""  # where a TMA move's operands take the strided kernel instead
    TMA_TAKES: ClassVar[str] = ""  # the operands an fp32 TMA move's TMA path takes

    def strided(self) -> Tiles:
        """The move the strided kernel runs under this one (where TMA does not apply, and for split-K): a 3xTF32
        TMA move's is exact fp32 at the first exact move's tiles (EXACT_TILES: faster there than 3xTF32 at the TMA
        tiles); any other move's is itself."""
        if not (self.tma and self.precision == "tf32x3" and not self.half):
            return self
        m, n, k, w, s = EXACT_TILES
        return replace(self, BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, num_warps=w, num_stages=s, precision="ieee", tma=False,
                       split_k_tma=False)

    @property
    def tma_copies(self) -> bool:
        """A matmul's TMA path takes any operands on a Hopper GPU, copying once those TMA cannot read as they lie
        (an fp32 move: the copies are small beside its GEMM; tma.py), not only 2-D ones as they lie (16-bit)."""
        return self.tma and not self.half

    def idea(self) -> str:
        once = (f"; where M N >= {SPLIT_ONCE_MIN} (M + N) each operand is split once, before the GEMM, by a "
                "pass writing its TF32 high part and remainder as two fp32 tensors in rows TMA reads, so the K loop "
                "runs three plain TF32 tensor-core products with no splitting; the tensor cores sum "
                f"{SPLIT_CHUNK} K steps at a time and an fp32 add folds each sum into the tile's (their own long sums "
                "lose bits); the two small products sum apart, dropped where not finite (an infinite operand)"
                ) if self.split_once else ""
        split = ("; a product with few output tiles and a long K (too few tiles to fill the GPU) splits K among "
                 "programs, each writing an fp32 partial tile, summed by a second kernel") if self.split_k else ""
        if self.split_k_tma:
            split += (" (on a Hopper GPU the parts run as one batch of 3xTF32 products on the TMA kernel, A's and B's "
                      "K chunks as views)")
        m, n, _, w, _ = SHORT_K_TILES
        short = "" if not self.short_k else (
            f"; a product with K at most {SHORT_K} (one K step: writing C bounds it, not its products) takes exact "
            f"fp32 products (ieee) on {m}x{n} tiles of the strided kernel, {w} warps")
        return self._idea() + once + self._off_tma() + split + short

    def _tma_takes(self) -> str:
        """The operands the move's TMA path takes, in words: a 16-bit move's copy nothing (tma.py)."""
        return ("2-D operands as they lie, A untransposed (others take the plain kernel)" if self.half else
                self.TMA_TAKES)

    def _off_tma(self) -> str:
        """What a move whose strided kernel is another move's (strided()) runs off TMA, in words."""
        q = self.strided()
        if q is self:
            return ""
        where = self.OFF_TMA + (" and for split-K" if self.split_k and not self.split_k_tma else "")
        return (f"; {where} the strided kernel runs exact fp32 products (ieee) at {q.BLOCK_M}x{q.BLOCK_N} tiles "
                f"({q.BLOCK_K}-wide K steps, {q.num_warps} warps, {q.num_stages} stages), faster there than "
                f"{self.precision}")

    def _idea(self) -> str:
        m, n, k, w, s = self.BLOCK_M, self.BLOCK_N, self.BLOCK_K, self.num_warps, self.num_stages
        if self.gemv:
            wider = (f"the {self.half} {m}x{n} tiled kernel" if self.half else
                     f"the exact {m}x{n} tiled kernel" if self.precision == "ieee" else
                     f"the {self.precision} {m}x{n} tiled kernel")
            if self.tma:
                wider += f" fed by TMA for {self._tma_takes()}"
            return (f"Matrix-vector kernel for products with at most {GEMV_COLUMNS} columns of C: the rows of A walked "
                    "once in 512-wide tiles against each column of B, products summed in fp32 lanes, so A streams at "
                    "full bandwidth instead of filling 128-wide output tiles with one live column; wider products "
                    f"take {wider}")
        if self.half and self.tma:
            lie = ("as they lie (B read (K, N) as it is: the 16-bit instructions take either layout, so no transposed "
                   "copy)") if not self.b_kmajor else f"({self.K_MAJOR})"
            return (f"{self.half} tensor cores fed by TMA, fp32 accumulation: a persistent grid (one program per SM) "
                    f"walks {m}x{n} output tiles, operand tiles ({k}-wide K steps, {s} stages, {w} warps) copied by "
                    f"the tensor memory accelerator {lie}, zero-filled edges, no masks in the K loop; TMA for "
                    f"{self._tma_takes()}")
        if self.half:
            return (f"{self.half} tensor cores, {m}x{n} output tiles ({k}-wide K steps, {w} warps, {s} stages), "
                    f"GROUP_M={self.GROUP_M} swizzle for L2 reuse, strided masked loads (transposes and batches cost "
                    "no copy), fp32 accumulation")
        if self.tma and self.precision == "tf32x3":
            return ("3xTF32 at fp32 accuracy, fed by TMA: each fp32 operand split into a TF32 part and a TF32 "
                    "remainder, three tensor-core products per step (error ~1e-6 relative); " + self.K_MAJOR +
                    f", a persistent grid walks {m}x{n} output tiles, {k}-wide K steps in {s} stages; TMA for "
                    f"{self._tma_takes()}")
        if self.tma and self.precision == "tf32":
            return (f"TF32 tensor cores fed by TMA: {self.K_MAJOR} (the layout Hopper's TF32 tensor-core "
                    f"instructions read), a persistent grid (one program per SM) walks {m}x{n} output tiles, operand "
                    f"tiles ({k}-wide K steps, {s} stages) copied by the tensor memory accelerator with zero-filled "
                    f"edges, no masks in the K loop, TMA for {self._tma_takes()}; needs a tolerance policy that admits "
                    "TF32")
        if self.precision == "tf32":
            return (f"TF32 tensor cores for fp32 inputs: {m}x{n} tiles ({k}-wide K steps, {w} warps, {s} stages), "
                    "fp32 accumulation; inputs rounded to TF32 (10-bit mantissa), so it needs a tolerance policy "
                    "that admits TF32; fp16/bf16 inputs are unaffected")
        products = "exact fp32 products (ieee)" if self.precision == "ieee" else f"{self.precision} products"
        fed = ", TMA-fed where the operands allow" if self.tma else ""
        return (f"Tiled GEMM, {m}x{n} output tiles ({k}-wide K steps, {w} warps, {s} stages), GROUP_M={self.GROUP_M} "
                f"swizzle for L2 reuse, strided loads (transposes cost no copy){fed}, {products} accumulated in fp32")

    def category(self) -> str:
        if self.gemv:
            return "memory"
        if self.tma:
            return "compute" if self.precision == "tf32x3" and not self.half else "async"
        if self.precision == "tf32":
            return "precision"
        return "memory" if self.num_stages >= 4 else "parallelism"  # a deeper pipeline, else more tiles

    @property
    def relaxed(self) -> bool:
        return self.precision == "tf32"


@dataclass(frozen=True)
class MatmulTiles(Tiles):
    """A matmul's moves: B (K, N) is transposed once to be K-major for the TF32 tensor cores."""

    K_MAJOR: ClassVar[str] = "B transposed once so both operands are K-major"
    OFF_TMA: ClassVar[str] = "off a Hopper GPU"
    TMA_TAKES: ClassVar[str] = ("any operands on a Hopper GPU (batches through 3-D descriptors; a transposed A, and "
                                "rows not 16-byte aligned, copied once into rows TMA reads)")


@dataclass(frozen=True)
class LinearTiles(Tiles):
    """A linear layer's moves: its weight (N, K) is the K-major operand B as it lies; no GEMV move."""

    K_MAJOR: ClassVar[str] = "the weight (N, K) is the K-major operand as it is"
    OFF_TMA: ClassVar[str] = "where TMA does not apply (rows not 16-byte aligned; no Hopper GPU)"
    TMA_TAKES: ClassVar[str] = "2-D operands with 16-byte aligned rows on a Hopper GPU"


def moves(op: Op) -> list[Tiles]:
    if op.kind == "matmul" and op.detail.get("dtype") in HALF:
        return _half_moves(HALF[op.detail["dtype"]])
    tiles = MatmulTiles if op.kind == "matmul" else LinearTiles
    tma_tiles = TMA_TILES if op.kind == "matmul" else LINEAR_TMA_TILES
    out = [tiles(m, n, k, 8, w, s, "tf32x3", tma=True) for m, n, k, w, s in tma_tiles]
    # the first exact move of a matmul splits K where few output tiles meet a long K (split_k)
    out += [tiles(m, n, k, 8, w, s, "ieee", split_k=op.kind == "matmul" and i == 0)
            for i, (m, n, k, w, s) in enumerate((EXACT_TILES, (64, 128, 32, 4, 4)))]
    out += [tiles(m, n, k, 8, w, s, "tf32", tma=True) for m, n, k, w, s in RELAXED_TMA_TILES]
    out.append(tiles(128, 128, 32, 8, 8, 3, "tf32"))
    if op.kind == "matmul":  # first, the GEMV move, whose wider products split their operands once (or in the loop)
        m, n, k, w, s = SPLIT_TILES
        out.insert(0, tiles(m, n, k, 8, w, s, "tf32x3", tma=True, gemv=True, split_k=True, split_once=True,
                            short_k=True, split_k_tma=True))
    return out


def _half_moves(dt: str) -> list[Tiles]:
    """A 16-bit matmul's moves (module docstring): TMA tiles of B as it lies, the strided kernel, the GEMV move."""
    out = [MatmulTiles(m, n, k, 8, w, s, "ieee", tma=True, b_kmajor=False, half=dt) for m, n, k, w, s in HALF_TMA]
    out += [MatmulTiles(m, n, k, 8, w, s, "ieee", b_kmajor=False, half=dt) for m, n, k, w, s in HALF_PLAIN]
    out.append(MatmulTiles(128, 128, 64, 8, 8, 3, "ieee", gemv=True, b_kmajor=False, half=dt))
    return out
