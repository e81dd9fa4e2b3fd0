"""Probe: a stride-1 2-D convolution as shifted rows, against the engineer's first move, eager and torch.compile, at
KernelBench's published sizes. Not a move: it measures whether the formulation pays before a family takes it.

The formulation. x is copied once into a zero-padded channels-last (N, Hp, Wp, C) buffer, split into its TF32 part
and remainder. Seen as a matrix X of N*Hp*Wp rows and C columns, the input a tap (kh, kw) contributes to the output
at padded position m is row m + kh*dh*Wp + kw*dw of X: a constant shift per tap. So an output tile of BLOCK_M
consecutive positions reads, per tap and channel chunk, one BLOCK_M x BLOCK_K box of X, which TMA loads as it lies
(rows past the end zero-filled); the weight, (CO, taps, C) K-major, likewise. Three TF32 tensor-core products per
step (hi*hi into the tile, hi*lo + lo*hi into a second one, added at the end) keep fp32-grade accuracy. Positions
whose row or column lies in the padding (the padded geometry has Hp - OH rows and Wp - OW columns more than the
output) are computed and dropped: a few percent of the work at 3x3 to 7x7 kernels. A stride-1 transposed conv is
the conv it equals (weight swapped and flipped, padded dilation*(k-1)-padding).

Rows per problem: eager, compile, the engineer's first move, `shifted` (the copy and split of x included, as a
forward would run them, in one Triton pass; the weight's split done once, as a module would hold it),
`shifted_torch_prep` (the copy and split by torch ops instead) and `shifted_kernel` (the GEMM alone, on an x prepared
beforehand), on the rule's tile (`rule_tile`) or, with --all-tiles, on each of TILES. Timed interleaved with the verifier's clock
(`params_probe.against_compile`: CUDA events, the L2 flushed), each checked against eager on one input.

    python benchmarks/shifted_conv_probe.py shared/kernelbench/level1 --only 69,65,55,63 --out probe.json
"""

from __future__ import annotations

import datetime

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from params_probe import against_compile, loaded, numbered, probe_all, probe_parser
from provenance import code
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelcraft.problems.problem import Problem
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.verify.policy import set_exact_fp32

# BLOCK_M, BLOCK_N, BLOCK_K, warps, stages: the rule the first probe's best tiles follow (BLOCK_N 64 for 64 or fewer
# out-channels, BLOCK_K 16 for 16 or fewer in-channels), then the others
TILES = [(128, 128, 32, 8, 3), (128, 128, 16, 8, 4), (128, 64, 32, 4, 4)]


def rule_tile(c: int, co: int) -> tuple:
    return (128, 64, 32, 4, 4) if co <= 64 else (128, 128, 16 if c <= 16 else 32, 8, 3 if c > 16 else 4)


@triton.jit
def shifted_conv_kernel(xh_desc, xl_desc, wh_desc, wl_desc, y_ptr, b_ptr, M, C, CP, CO, Hp, Wp, OH, OW,
                        KH: tl.constexpr, KW: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                        HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr):
    m0 = tl.program_id(0) * BLOCK_M
    n0 = tl.program_id(1) * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    small = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    chunks = tl.cdiv(C, BLOCK_K)
    for step in range(0, KH * KW * chunks):
        tap = step // chunks
        c0 = (step % chunks) * BLOCK_K
        shift = (tap // KW) * DH * Wp + (tap % KW) * DW  # the tap's rows of X: a constant shift
        a_hi = xh_desc.load([m0 + shift, c0])
        a_lo = xl_desc.load([m0 + shift, c0])
        b_hi = wh_desc.load([n0, tap * CP + c0]).T
        b_lo = wl_desc.load([n0, tap * CP + c0]).T
        acc = tl.dot(a_hi, b_hi, acc, input_precision="tf32")
        small = tl.dot(a_lo, b_hi, small, input_precision="tf32")
        small = tl.dot(a_hi, b_lo, small, input_precision="tf32")
    acc += small
    m = m0 + tl.arange(0, BLOCK_M)
    co = n0 + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=co < CO, other=0.0)[None, :]
    n = m // (Hp * Wp)
    oh = (m // Wp) % Hp
    ow = m % Wp
    ok = (m < M) & (oh < OH) & (ow < OW)
    y = y_ptr + ((n.to(tl.int64) * CO)[:, None] + co[None, :]) * (OH * OW) + (oh * OW + ow)[:, None]
    tl.store(y, acc, mask=ok[:, None] & (co < CO)[None, :])


@triton.jit
def shifted_prep_kernel(x_ptr, hi_ptr, lo_ptr, P, C, CP, H, W, HP, WP, PH, PW, BLOCK_P: tl.constexpr,
                        BLOCK_C: tl.constexpr):
    # x (N, C, H, W) -> hi, lo (N*HP*WP, CP): zero-padded, channels last, split into TF32 parts, in one pass (loaded
    # along the positions of a channel, stored along the channels of a position)
    p = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    n = p // (HP * WP)
    h = (p // WP) % HP - PH
    w = p % WP - PW
    inside = (p < P) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
    v = tl.load(x_ptr + (n * C)[:, None] * (H * W) + (c * (H * W))[None, :] + (h * W + w)[:, None],
                mask=inside[:, None] & (c < C)[None, :], other=0.0)
    hi = (v.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
    out = p[:, None] * CP + c[None, :]
    keep = (p < P)[:, None] & (c < CP)[None, :]
    tl.store(hi_ptr + out, hi, mask=keep)
    tl.store(lo_ptr + out, v - hi, mask=keep)


def tf32_parts(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo): hi t with its low 13 mantissa bits cleared (a TF32 value), lo = t - hi (exact in fp32)."""
    hi = (t.view(torch.int32) & -8192).view(torch.float32)
    return hi, t - hi


class Shifted:
    """The shifted-rows conv of one weight (CO, C, KH, KW), bias, padding and dilation, on `tile`."""

    def __init__(self, weight: torch.Tensor, bias, padding, dilation, tile):
        self.co, self.c, self.kh, self.kw = weight.shape
        self.cp = triton.cdiv(self.c, 4) * 4  # channels padded to 16 bytes a row, as TMA needs
        self.bm, self.bn, self.bk, self.warps, self.stages = tile
        wk = torch.zeros(self.co, self.kh * self.kw, self.cp, device=weight.device)
        wk[:, :, :self.c] = weight.permute(0, 2, 3, 1).reshape(self.co, self.kh * self.kw, self.c)
        self.w_hi, self.w_lo = (t.reshape(self.co, -1).contiguous() for t in tf32_parts(wk))
        self.bias, self.padding, self.dilation = bias, padding, dilation

    def prepare(self, x: torch.Tensor, fused: bool = True) -> tuple:
        """x as shifted_conv_kernel reads it: (hi, lo) rows of the padded channels-last buffer, and its geometry; by
        one Triton pass (`fused`), or by torch ops (pad, permute, split)."""
        n, c, h, w = x.shape
        (ph, pw), (hp, wp) = self.padding, (h + 2 * self.padding[0], w + 2 * self.padding[1])
        if fused:
            hi = torch.empty(n * hp * wp, self.cp, device=x.device)
            lo = torch.empty_like(hi)
            bc = min(64, triton.next_power_of_2(self.cp))
            grid = (triton.cdiv(hi.shape[0], 64), triton.cdiv(self.cp, bc))
            shifted_prep_kernel[grid](x, hi, lo, hi.shape[0], c, self.cp, h, w, hp, wp, ph, pw, BLOCK_P=64,
                                      BLOCK_C=bc, num_warps=4)
            return hi, lo, n, hp, wp
        xp = torch.zeros(n, hp, wp, self.cp, device=x.device)
        xp[:, :, :, :c] = F.pad(x, (pw, pw, ph, ph)).permute(0, 2, 3, 1)
        hi, lo = tf32_parts(xp)
        return hi.reshape(-1, self.cp), lo.reshape(-1, self.cp), n, hp, wp

    def run(self, prepared, h: int, w: int) -> torch.Tensor:
        x_hi, x_lo, n, hp, wp = prepared
        (dh, dw), (ph, pw) = self.dilation, self.padding
        oh, ow = h + 2 * ph - dh * (self.kh - 1), w + 2 * pw - dw * (self.kw - 1)
        y = torch.empty(n, self.co, oh, ow, device=x_hi.device)
        m = x_hi.shape[0]

        def desc(t, rows_box):
            return TensorDescriptor(t, [t.shape[0], self.c if t is x_hi or t is x_lo else t.shape[1]],
                                    [t.stride(0), 1], [rows_box, self.bk])
        bias = self.bias if self.bias is not None else y
        grid = (triton.cdiv(m, self.bm), triton.cdiv(self.co, self.bn))
        shifted_conv_kernel[grid](desc(x_hi, self.bm), desc(x_lo, self.bm), desc(self.w_hi, self.bn),
                                  desc(self.w_lo, self.bn), y, bias, m, self.c, self.cp, self.co, hp, wp, oh, ow,
                                  KH=self.kh, KW=self.kw, DH=dh, DW=dw, HAS_BIAS=self.bias is not None,
                                  BLOCK_M=self.bm, BLOCK_N=self.bn, BLOCK_K=self.bk, num_warps=self.warps,
                                  num_stages=self.stages)
        return y

    def __call__(self, x: torch.Tensor, fused: bool = True) -> torch.Tensor:
        return self.run(self.prepare(x.contiguous(), fused), x.shape[2], x.shape[3])


def equivalent_conv(model: nn.Module):
    """(weight, bias, padding, dilation) of the stride-1 one-group Conv2d the model runs, a stride-1 ConvTranspose2d
    as the conv it equals; None where it has neither."""
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d) and set(mod.stride) == {1} and mod.groups == 1 and not isinstance(
                mod.padding, str):
            return mod.weight.detach(), mod.bias, tuple(mod.padding), tuple(mod.dilation)
        if (isinstance(mod, nn.ConvTranspose2d) and set(mod.stride) == {1} and set(mod.output_padding) == {0}
                and mod.groups == 1):
            pad = tuple(d * (k - 1) - p for d, k, p in zip(mod.dilation, mod.kernel_size, mod.padding))
            if min(pad) < 0:
                return None
            return mod.weight.detach().transpose(0, 1).flip(2, 3), mod.bias, pad, tuple(mod.dilation)
    return None


def probe(problem: Problem, engineer: BuiltinProposer, budget_s: float, all_tiles: bool) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    op = engineer.coverage(problem, "triton").single
    conv = equivalent_conv(model)
    if op is None or conv is None:
        return {"problem": problem.name, "skipped": "not one stride-1 Conv2d / ConvTranspose2d of one group"}
    params = registry.moves(op, "triton")[0].params
    first = loaded(registry.render(op, problem.source, params), f"{problem.name}_first").ModelNew(
        *module.get_init_inputs()).cuda().eval()
    first.load_state_dict(model.state_dict())
    weight, bias, padding, dilation = conv
    fns = {"eager": model, "compile": torch.compile(model), "first": first}
    torch.manual_seed(0)
    with torch.device("cuda"):
        shape = module.get_inputs()[0].shape
    ready = None
    for tile in TILES if all_tiles else [rule_tile(weight.shape[1], weight.shape[0])]:
        label = "x".join(map(str, tile))
        shifted = Shifted(weight, bias, padding, dilation, tile)
        fns[f"shifted_{label}"] = shifted
        fns[f"shifted_torch_prep_{label}"] = (lambda s: lambda x: s(x, fused=False))(shifted)
        # the GEMM alone: x prepared from the input drawn first (the same draw against_compile makes, seed 0)
        if ready is None:
            torch.manual_seed(0)
            with torch.device("cuda"):
                ready = shifted.prepare(module.get_inputs()[0])
        fns[f"shifted_kernel_{label}"] = (lambda s: lambda x: s.run(ready, x.shape[2], x.shape[3]))(shifted)
    return {"problem": problem.name, "first": {"family": op.kind, "params": params.to_json()},
            "conv": {"padding": list(padding), "dilation": list(dilation), "weight": list(weight.shape),
                     "input": list(shape)},
            "rows": against_compile(fns, module, budget_s)}


def main() -> None:
    ap = probe_parser(__doc__)
    ap.add_argument("--all-tiles", action="store_true", help="every tile of TILES, not the rule's one")
    args = ap.parse_args()
    set_exact_fp32(True)  # the strict policy's baselines: cuDNN's fp32 convolutions exact, as the verifier's
    engineer = BuiltinProposer("cuda")
    record = {"what": "stride-1 convs as shifted rows of a padded channels-last input through TMA, split once into "
                      "TF32 parts (benchmarks/shifted_conv_probe.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "policy": "strict",
              "tiles": [list(t) for t in TILES], "problems": []}
    probe_all(record, numbered(args.suite, args.only), lambda problem: probe(problem, engineer, args.budget, args.all_tiles), args.out)


if __name__ == "__main__":
    main()
