"""Recurrent family: nn.LSTM and nn.GRU (plan.py's `lstm` and `gru`: multi-layer, bidirectional, batch-first or
not, unbatched, with or without bias and initial states), fp32 accumulation throughout.

For each layer and direction, the input projection of every time step is one GEMM (x @ W_ih^T + b_ih over all
(t, b) rows at once, the part of the work that has no recurrence), then a fused step kernel runs once per time
step: h_prev @ W_hh^T + b_hh for each gate, the gates, the cell update, h_t written into the output sequence
(kernels.py). The moves are tilings of the step kernel, which runs T times per layer and direction on a small
problem (B x gates*H x H): how many hidden units and batch rows a program takes, how wide its K steps are, its warps
(few hidden units per program: more programs on the GPU for a small H; more: W_hh's rows read by fewer programs),
and the projection's precision (exact fp32, or 3xTF32 on the tensor cores, fp32-grade). The step's product is always
exact fp32: its error would compound over the time steps.

Dropout between layers is applied by torch only in training mode; the generated forward refuses a module in
training mode with dropout > 0 (it raises), and in eval mode, where the verifier runs it, dropout is the identity.
proj_size is refused by the analysis (recognize.py) and again at run time."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.recurrent import kernels
from kernelcraft.propose.builtin.families.recurrent.ops import DETAILS
from kernelcraft.propose.builtin.families.recurrent.recognize import RECOGNIZER
from kernelcraft.propose.builtin.family import Family, Params
from kernelcraft.propose.builtin.plan import Op

PRECISIONS = ("ieee", "tf32x3")


@dataclass(frozen=True)
class Steps(Params):
    BLOCK_H: int = 32  # hidden units per program of the step kernel
    BLOCK_B: int = 16  # batch rows per program (16: tl.dot's smallest tile)
    BLOCK_K: int = 32  # h_prev columns per step of the product's K loop
    num_warps: int = 4
    precision: str = "ieee"  # the input projection's products: "ieee" (exact fp32) or "tf32x3" (fp32-grade)

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown projection precision {self.precision!r}")

    def idea(self) -> str:
        proj = ("on the tensor cores as 3xTF32 (fp32-grade)" if self.precision == "tf32x3"
                else "in exact fp32")
        return (f"Input projection of all time steps as one GEMM per layer and direction ({proj}), then one fused "
                f"step kernel per time step: {self.BLOCK_H} hidden units x {self.BLOCK_B} batch rows per program, "
                f"h_prev @ W_hh^T in {self.BLOCK_K}-wide K steps, gates and cell update in registers, h_t written "
                f"straight into the output sequence; {self.num_warps} warps")

    def category(self) -> str:
        if self.precision != "ieee":
            return "precision"
        return "parallelism" if self.BLOCK_H <= 16 or self.BLOCK_B > 16 else "memory"


def moves(op: Op) -> list[Steps]:
    return [Steps(), Steps(BLOCK_H=16, BLOCK_K=64, num_warps=2), Steps(BLOCK_H=64, num_warps=4),
            Steps(BLOCK_H=32, BLOCK_B=32, num_warps=8), Steps(precision="tf32x3")]


FAMILY = Family("recurrent", "triton", ("lstm", "gru"), Steps, moves, kernels.render, recognize=RECOGNIZER,
                details=DETAILS)
