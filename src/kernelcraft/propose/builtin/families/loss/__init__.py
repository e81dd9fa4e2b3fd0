"""Loss family over the forward's first two inputs (read as a, b): pointwise losses (mse, l1, smooth_l1, huber, and
F.kl_div of log-probabilities or of the log the kernel takes itself) over flat tiles; cross-entropy (logits, class
targets) and the KL divergence of two logit tensors over rows seen as [outer, R, inner] (columns.py: inner == 1 is
plain rows, several short rows per program), each row read once (log-sum-exp in registers, or online in tiles for
long rows); the triplet margin loss of the first three inputs (a, p, n) over rows of the last dim, three distances
from one read of each row. A reduced loss is deterministic: each program writes one fp32 partial (and, for
cross-entropy, its count of targets not ignored), and a second one-program launch adds them in a fixed order and
divides for the mean.

Four families, since their parameters differ: flat tiles (`LossTiles`: the `loss` and `kl_div` kinds), rows whose
whole extent fits in registers or is walked online (`CrossEntropyRows`, `KlRows`), and rows walked in tiles with
three running sums (`TripletRows`)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.loss import kernels
from kernelcraft.propose.builtin.families.loss.ops import DETAILS
from kernelcraft.propose.builtin.families.loss.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered
from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class LossTiles(Params):
    BLOCK: int = 4096  # elements of both inputs per tile
    num_warps: int = 8
    per_sm: int | None = None  # persistent grid: this many programs per SM loop over the tiles
    evict_first: bool = False  # loads with evict_first: each byte is read once
    reduced: bool = True  # the loss is reduced (mean, sum): partials and a second launch; else terms are written

    def idea(self) -> str:
        if self.per_sm:
            return (f"Persistent grid: {self.per_sm} programs per SM loop over {self.BLOCK}-element tiles, so launch "
                    "and tail costs are paid once"
                    + (" and the second launch adds only a few hundred partials" if self.reduced else ""))
        if self.evict_first:
            return (f"Streaming cache hints: {self.BLOCK}-element tiles of both inputs loaded with evict_first, each "
                    "byte is read once")
        return (f"Flat grid, one program per {self.BLOCK}-element tile of both inputs ({self.num_warps} warps), loss "
                "in fp32 registers"
                + (", fp32 sums per lane, one partial per program added by a one-program second launch in a fixed "
                   "order (deterministic)" if self.reduced else ", the loss terms written in the input dtype"))

    def category(self) -> str:
        return "control" if self.per_sm else "memory" if self.evict_first else "parallelism"


@dataclass(frozen=True)
class CrossEntropyRows(Params):
    variant: str = "row"  # "row": whole rows in registers when they fit; "online": tiles with a running log-sum-exp
    ROW_MAX: int = 16384  # classes (times the columns a tile takes) held whole by the "row" variant
    BLOCK_R: int = 4096  # classes per tile otherwise
    TILE: int = 4096  # elements per program's tile (short rows packed)
    num_warps: int = 4
    reduced: bool = True  # the loss is reduced (mean, sum): partial losses and counts, and a second launch

    def idea(self) -> str:
        tail = (", per-program fp32 partial loss and count combined by a one-program second launch"
                if self.reduced else "")
        if self.variant == "online":
            return (f"Online log-sum-exp in {self.BLOCK_R}-class tiles (a running max and rescaled sum, "
                    f"{self.num_warps} warps): one pass over rows of any length, registers bounded" + tail)
        more = f"; {_times(4096 // self.TILE)} the programs of 4096-element packing" if self.TILE < 4096 else ""
        return (f"Whole rows in registers (up to {self.ROW_MAX} classes, short rows packed {self.TILE} elements per "
                f"program, {self.num_warps} warps): max, exp-sum and the target logit from one read of the row"
                + tail + more)

    def category(self) -> str:
        return "control" if self.variant == "online" else "parallelism" if self.TILE < 4096 else "memory"


def _times(n: int) -> str:
    return "twice" if n == 2 else f"{n} times"


@dataclass(frozen=True)
class KlRows(Params):
    variant: str = "row"  # "row": both rows whole in registers when they fit; "online": one pass in tiles
    ROW_MAX: int = 8192
    BLOCK_R: int = 4096
    TILE: int = 4096
    num_warps: int = 4

    def idea(self) -> str:
        if self.variant == "online":
            return (f"One online pass in {self.BLOCK_R}-element tiles ({self.num_warps} warps): running max and sum of "
                    "both rows, and the q-weighted sum of (b - a) rescaled with them; KL = E_q[b - a] - lse(b) + "
                    "lse(a), registers bounded")
        return (f"Both rows whole in registers (up to {self.ROW_MAX} elements, short rows packed {self.TILE} per "
                f"program, {self.num_warps} warps): log-softmax of each from one read, then sum q * (log q - log p) "
                "as torch does; one fp32 partial per program, combined by a one-program second launch")

    def category(self) -> str:
        return "control" if self.variant == "online" else "memory"


@dataclass(frozen=True)
class TripletRows(Params):
    ROW_MAX: int = 4096  # rows up to this long are one tile (short rows packed TILE elements per program)
    BLOCK_R: int = 2048  # elements of a longer row per step
    TILE: int = 4096
    num_warps: int = 4
    reduced: bool = True  # the loss is reduced (mean, sum): partials and a second launch; else one loss per row

    def idea(self) -> str:
        whole = (f"rows up to {self.ROW_MAX} elements whole in registers, longer ones" if self.ROW_MAX
                 else "every row")
        tail = ("; one fp32 partial per program, combined by a one-program second launch" if self.reduced
                else "; each row's loss written")
        return (f"One read of each row of anchor, positive and negative: {whole} walked in {self.BLOCK_R}-element "
                f"steps (short rows packed {self.TILE} elements per program, {self.num_warps} warps), the squared "
                "distances summed in fp32" + tail)

    def category(self) -> str:
        return "control" if not self.ROW_MAX else "parallelism" if self.TILE < 4096 else "memory"


def _loss_moves(op: Op) -> list[LossTiles]:
    """A reduced kl_div's first move is the persistent grid (4 programs per SM): a few hundred partials, not 65536,
    for the second launch. The other losses keep a program per tile first: the persistent grid made Huber's slower
    (evidence.py)."""
    reduced = op.detail["reduction"] != "none"
    tiles = [LossTiles(reduced=reduced), LossTiles(1024, 4, reduced=reduced), LossTiles(2048, 4, reduced=reduced)]
    persistent, streaming = LossTiles(per_sm=4, reduced=reduced), LossTiles(evict_first=True, reduced=reduced)
    if reduced and op.kind == "kl_div":
        return [persistent, *tiles, streaming]
    return [*tiles, persistent, streaming]


def _ce_moves(op: Op) -> list[CrossEntropyRows]:
    reduced = op.detail["reduction"] != "none"
    return [CrossEntropyRows(reduced=reduced), CrossEntropyRows(TILE=8192, num_warps=8, reduced=reduced),
            CrossEntropyRows(TILE=2048, reduced=reduced),
            CrossEntropyRows("online", 0, 1024, 2048, 4, reduced=reduced),
            CrossEntropyRows("online", 0, 4096, 4096, 8, reduced=reduced)]


def _kl_moves(op: Op) -> list[KlRows]:
    return [KlRows(), KlRows(TILE=8192, num_warps=8), KlRows("online", 0, 1024, 2048, 4),
            KlRows("online", 0, 2048, 4096, 8)]


def _triplet_moves(op: Op) -> list[TripletRows]:
    reduced = op.detail["reduction"] != "none"
    return [TripletRows(reduced=reduced), TripletRows(8192, 4096, 8192, 8, reduced=reduced),
            TripletRows(0, 1024, 2048, 4, reduced=reduced), TripletRows(1024, 1024, 1024, 2, reduced=reduced)]


def _render_triplet(op: Op, p: TripletRows, names: Names) -> Rendered:
    return kernels.triplet_margin(op, p, names)


def _render_loss(op: Op, p: LossTiles, names: Names) -> Rendered:
    return kernels.pointwise_loss(op, p, names)


def _render_ce(op: Op, p: CrossEntropyRows, names: Names) -> Rendered:
    return kernels.cross_entropy(op, p, names)


def _render_kl(op: Op, p: KlRows, names: Names) -> Rendered:
    return kernels.kl_div_logits(op, p, names)


FAMILIES = (
    Family("loss", "triton", ("loss", "kl_div"), LossTiles, _loss_moves, _render_loss,
           inputs={"loss": ("a", "b"), "kl_div": ("a", "b")}, recognize=RECOGNIZER,
           details=DETAILS),
    Family("cross_entropy", "triton", ("cross_entropy",), CrossEntropyRows, _ce_moves, _render_ce,
           inputs={"cross_entropy": ("a", "b")},
           details=DETAILS),
    Family("kl_div_logits", "triton", ("kl_div_logits",), KlRows, _kl_moves, _render_kl,
           inputs={"kl_div_logits": ("a", "b")},
           details=DETAILS),
    Family("triplet_margin", "triton", ("triplet_margin",), TripletRows, _triplet_moves, _render_triplet,
           inputs={"triplet_margin": ("a", "p", "n")},
           details=DETAILS),
)
