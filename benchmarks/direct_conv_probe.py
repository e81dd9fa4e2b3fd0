"""Probe: a direct convolution on the CUDA cores against torch.compile and the built-in engineer's first move, for
convolutions of few in-channels at KernelBench's published sizes (level 1's 50: AlexNet's first conv, 3 -> 96
channels, 11 x 11 taps at stride 4; 54, 59, 60, 66: 3-D convs of 3 in-channels).

An implicit GEMM spends most of such a conv's K step gathering and splitting: K is 81 to 363, and each patch element
it loads feeds BLOCK_N products. The direct kernel here keeps a tile of out-channels x output positions in fp32
registers and walks the taps: each tap loads one input value a position (rows of a channel, contiguous along the
output's last axis at stride 1) and one weight an out-channel, and adds their outer product in exact fp32 FMAs, no
splitting, no tensor cores. A 2-D conv runs as a 3-D one of depth 1. Each variant's output is checked against eager
on one input before it is timed interleaved with eager and torch.compile by the verifier's clock
(`params_probe.against_compile`); the baselines' fp32 convolutions run exact (cuDNN's TF32 off), as the verifier's do.

    python benchmarks/direct_conv_probe.py shared/kernelbench/level1 --only 50,54 --tiles 128x256w4u --out probe.json
"""

from __future__ import annotations

import datetime
import itertools

import torch
import triton
import triton.language as tl
from params_probe import against_compile, loaded, numbered, probe_all, probe_parser
from provenance import code

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.verify.policy import set_exact_fp32


@triton.jit
def _tap(acc, x_row, rmask, w_row, ow, cmask, kw, SW: tl.constexpr, PW: tl.constexpr, DW: tl.constexpr,
         W: tl.constexpr):
    """One tap's outer product added to acc[co, v]: a weight an out-channel times an input value a position."""
    iw = ow * SW - PW + kw * DW
    xv = tl.load(x_row + iw, mask=rmask & (iw >= 0) & (iw < W), other=0.0)
    wv = tl.load(w_row + kw, mask=cmask, other=0.0)
    return acc + wv[:, None] * xv[None, :]


@triton.jit
def direct_conv(x_ptr, w_ptr, b_ptr, y_ptr,
                C: tl.constexpr, D: tl.constexpr, H: tl.constexpr, W: tl.constexpr, CO: tl.constexpr,
                OD: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr, KD: tl.constexpr, KH: tl.constexpr,
                KW: tl.constexpr, SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PD: tl.constexpr,
                PH: tl.constexpr, PW: tl.constexpr, DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_V: tl.constexpr, UNROLL: tl.constexpr):
    # program (position tile, image, out-channel tile): acc[co, v] over BLOCK_CO out-channels x BLOCK_V positions;
    # UNROLL: the last axis's taps unrolled (else a loop, one tap's loads live at a time)
    v = tl.program_id(0) * BLOCK_V + tl.arange(0, BLOCK_V)
    n = tl.program_id(1)
    co = tl.program_id(2) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    vmask = v < OD * OH * OW
    cmask = co < CO
    od = v // (OH * OW)
    oh = v // OW % OH
    ow = v % OW
    x_img = x_ptr + n.to(tl.int64) * (C * D * H * W)
    acc = tl.zeros([BLOCK_CO, BLOCK_V], dtype=tl.float32)
    for c in range(C):
        for kd in range(KD):
            id_ = od * SD - PD + kd * DD
            for kh in range(KH):
                ih = oh * SH - PH + kh * DH
                x_row = x_img + ((c * D + id_) * H + ih) * W
                rmask = vmask & (id_ >= 0) & (id_ < D) & (ih >= 0) & (ih < H)
                w_row = w_ptr + co * (C * KD * KH * KW) + ((c * KD + kd) * KH + kh) * KW
                if UNROLL:
                    for kw in tl.static_range(KW):
                        acc = _tap(acc, x_row, rmask, w_row, ow, cmask, kw, SW, PW, DW, W)
                else:
                    for kw in range(KW):
                        acc = _tap(acc, x_row, rmask, w_row, ow, cmask, kw, SW, PW, DW, W)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=cmask, other=0.0)[:, None]
    out = (n.to(tl.int64) * CO + co)[:, None] * (OD * OH * OW) + v[None, :]
    tl.store(y_ptr + out, acc, mask=cmask[:, None] & vmask[None, :])


class Direct(torch.nn.Module):
    """The conv of `conv` (nn.Conv2d or nn.Conv3d, one group) by the direct kernel on BLOCK_CO x BLOCK_V tiles."""

    def __init__(self, conv, block_co: int, block_v: int, warps: int, unroll: bool):
        super().__init__()
        self.conv, self.block_co, self.block_v, self.warps, self.unroll = conv, block_co, block_v, warps, unroll

    def forward(self, x):
        conv, two = self.conv, self.conv.weight.dim() == 4
        w = conv.weight.unsqueeze(2) if two else conv.weight
        xs = x.unsqueeze(2) if two else x
        lift = (lambda t, depth: (depth, *t)) if two else (lambda t, depth: t)  # depth 1: stride 1, no padding
        (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = lift(conv.stride, 1), lift(conv.padding, 0), lift(conv.dilation, 1)
        N, C, D, H, W = xs.shape
        CO, _, KD, KH, KW = w.shape
        OD, OH, OW = ((s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, d, k, st in
                      ((D, pd, dd, KD, sd), (H, ph, dh, KH, sh), (W, pw, dw, KW, sw)))
        y = torch.empty((N, CO, OD, OH, OW), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(OD * OH * OW, self.block_v), N, triton.cdiv(CO, self.block_co))
        bias = conv.bias
        direct_conv[grid](xs, w.contiguous(), w if bias is None else bias, y, C, D, H, W, CO, OD, OH, OW, KD, KH, KW,
                          sd, sh, sw, pd, ph, pw, dd, dh, dw, bias is not None, self.block_co, self.block_v,
                          self.unroll, num_warps=self.warps)
        return y.squeeze(2) if two else y


def variants(conv) -> dict:
    """(BLOCK_CO, BLOCK_V, warps, unroll): out-channel tiles of 8 to 128 (no wider than the out-channels rounded up
    to a power of two), 128 to 1024 positions a tile, 4 or 8 warps, the last axis's taps unrolled or looped."""
    top = triton.next_power_of_2(conv.out_channels)
    cos = [c for c in (8, 16, 32, 64, 128) if c <= max(8, top)]
    return {f"direct_{c}x{v}w{warps}{'u' if unroll else 'l'}": (c, v, warps, unroll)
            for c, v, warps, unroll in itertools.product(cos, (128, 256, 512, 1024), (4, 8), (True, False))}


def probe(problem, engineer, budget_s: float, only: set[str]) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    convs = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))]
    if len(convs) != 1 or convs[0].groups != 1:
        return {"problem": problem.name, "skipped": "not one conv of one group"}
    conv = convs[0]
    fns = {"eager": model, "compile": torch.compile(model)}
    analysis = engineer.coverage(problem, "triton")
    if analysis.single is not None:
        first = registry.moves(analysis.single, "triton")[0].params
        new = loaded(registry.render(analysis.single, problem.source, first), problem.name).ModelNew(
            *module.get_init_inputs()).cuda().eval()
        new.load_state_dict(model.state_dict())
        fns["first"] = new
    shapes = {k: v for k, v in variants(conv).items() if not only or k.removeprefix("direct_") in only}
    for label, (c, v, warps, unroll) in shapes.items():
        fns[label] = Direct(conv, c, v, warps, unroll)
    return {"problem": problem.name, "conv": repr(conv), "variants": shapes,
            "rows": against_compile(fns, module, budget_s)}


def main() -> None:
    ap = probe_parser(__doc__)
    ap.add_argument("--tiles", default="128x256w4u,16x512w4l", help="the variants, e.g. 128x256w4u,64x128w8l "
                    "(BLOCK_CO x BLOCK_V, warps, u: the last axis's taps unrolled, l: looped); all: every one")
    args = ap.parse_args()
    only = set() if args.tiles == "all" else set(args.tiles.split(","))
    set_exact_fp32(True)  # the strict policy's baselines: exact fp32 convolutions
    engineer = BuiltinProposer("cuda")
    record = {"what": "a direct CUDA-core convolution against torch.compile and the engineer's first move, one "
                      "process, interleaved (benchmarks/direct_conv_probe.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "problems": []}
    probe_all(record, numbered(args.suite, args.only), lambda p: probe(p, engineer, args.budget, only), args.out)


if __name__ == "__main__":
    main()
