"""Probe: a direct convolution on the CUDA cores against torch.compile and the built-in engineer's first move, for
convolutions of few in-channels at KernelBench's published sizes (level 1's 50: AlexNet's first conv, 3 -> 96
channels, 11 x 11 taps at stride 4; 54, 59, 60, 66: 3-D convs of 3 in-channels).

An implicit GEMM spends most of such a conv's K step gathering and splitting: K is 81 to 363, and each patch element
it loads feeds BLOCK_N products. The direct kernel (the conv families' own, families/conv/direct.py, rendered here
at other tiles than the family takes) keeps a tile of out-channels x output positions in fp32 registers and walks
the taps: each tap loads one input value a position and one weight an out-channel, and adds their outer product in
exact fp32 FMAs. Passes 1 and 2 of direct-conv-probe-h100-2026-11-27.json timed an earlier, hand-written copy of it
(code fa7ecea and e1e4f80), which had no groups. Each variant's output is checked against eager
on one input before it is timed interleaved with eager and torch.compile by the verifier's clock
(`params_probe.against_compile`); the baselines' fp32 convolutions run exact (cuDNN's TF32 off), as the verifier's do.

    python benchmarks/probes/direct_conv_probe.py shared/kernelbench/level1 --only 50,54 --tiles 128x256w4u --out probe.json
"""

from __future__ import annotations

import datetime
import itertools

import torch
import triton
from params_probe import against_compile, loaded, numbered, probe_all, probe_parser
from provenance import code

from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.families.conv import direct
from kernelcraft.propose.builtin.families.conv.direct import DirectTiles
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.verify.policy import set_exact_fp32


def _runner(axes: str, tiles: DirectTiles, label: str):
    """The conv family's direct kernel over `axes` ("hw" or "dhw") on `tiles`, as the family renders it
    (families/conv/direct.py, no epilogue), with a host function binding the names its launch reads."""
    kernel = direct.kernel(axes, lambda name: name, "", Scalars(), tiles)
    bind = [f"{a.upper()}, K{a.upper()}, s{a}, p{a}, d{a} = x.shape[{2 + i}], w.shape[{2 + i}], *hyper[{i}]\n"
            f"    O{a.upper()} = (({a.upper()} + 2 * p{a} - d{a} * (K{a.upper()} - 1) - 1) // s{a}) + 1"
            for i, a in enumerate(axes)]
    source = (f"import torch\nimport triton\nimport triton.language as tl\n\n\n{kernel.source()}\n\n\n"
              "def run(x, w, bias, hyper, groups):  # hyper: (stride, padding, dilation) per axis\n"
              "    N, C = x.shape[:2]\n    CO, CPG = w.shape[:2]\n    COPG = CO // groups\n"
              + "".join(f"    {line}\n" for line in bind)
              + f"    K = CPG * {' * '.join(f'K{a.upper()}' for a in axes)}\n"
              f"    y = torch.empty((N, CO, {', '.join(f'O{a.upper()}' for a in axes)}), device=x.device, "
              "dtype=x.dtype)\n"
              + "".join(f"    {line}\n" for line in direct.launch(axes, kernel, tiles).splitlines())
              + "    return y\n")
    return loaded(source, label).run


class Direct(torch.nn.Module):
    """The conv of `conv` (nn.Conv2d or nn.Conv3d) by the family's direct kernel on BLOCK_N x BLOCK_M tiles."""

    def __init__(self, conv, tiles: DirectTiles, label: str):
        super().__init__()
        self.conv, self.axes = conv, "hw" if conv.weight.dim() == 4 else "dhw"
        self.run = _runner(self.axes, tiles, label)

    def forward(self, x):
        conv = self.conv
        hyper = list(zip(conv.stride, conv.padding, conv.dilation))
        return self.run(x.contiguous(), conv.weight.contiguous(), conv.bias, hyper, conv.groups)


def variants(conv) -> dict:
    """(BLOCK_CO, BLOCK_V, warps, unroll, weight_rows): out-channel tiles of 8 to 128 (no wider than the
    out-channels rounded up to a power of two), 128 to 1024 positions a tile, 4 or 8 warps, the last axis's taps
    unrolled or looped, the weight read as (taps, out-channel) rows or (suffix "o") as it lies."""
    top = triton.next_power_of_2(conv.out_channels)
    cos = [c for c in (8, 16, 32, 64, 128) if c <= max(8, top)]
    return {f"direct_{c}x{v}w{warps}{'u' if unroll else 'l'}{'' if rows else 'o'}": (c, v, warps, unroll, rows)
            for c, v, warps, unroll, rows in itertools.product(cos, (128, 256, 512, 1024), (4, 8), (True, False),
                                                               (True, False))}


def probe(problem, engineer, budget_s: float, only: set[str]) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    convs = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))]
    if len(convs) != 1:
        return {"problem": problem.name, "skipped": "not one conv"}
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
    for label, (c, v, warps, unroll, rows) in shapes.items():
        tiles = DirectTiles(BLOCK_M=v, BLOCK_N=c, num_warps=warps, unroll=unroll, max_channels=conv.in_channels,
                            max_k=conv.weight[0].numel(), weight_rows=rows)
        fns[label] = Direct(conv, tiles, f"{problem.name}_{label}")
    return {"problem": problem.name, "conv": repr(conv), "variants": shapes,
            "rows": against_compile(fns, module, budget_s)}


def main() -> None:
    ap = probe_parser(__doc__)
    ap.add_argument("--tiles", default="128x256w4u,16x512w4l", help="the variants, e.g. 128x256w4u,64x128w8l "
                    "(BLOCK_CO x BLOCK_V, warps, u: the last axis's taps unrolled, l: looped, o: the weight read as it "
                    "lies); all: every one")
    args = ap.parse_args()
    only = set() if args.tiles == "all" else set(args.tiles.split(","))
    set_exact_fp32(True)  # the strict policy's baselines: exact fp32 convolutions
    engineer = BuiltinProposer("cuda")
    record = {"what": "a direct CUDA-core convolution against torch.compile and the engineer's first move, one "
                      "process, interleaved (benchmarks/probes/direct_conv_probe.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "problems": []}
    probe_all(record, numbered(args.suite, args.only), lambda p: probe(p, engineer, args.budget, only), args.out)


if __name__ == "__main__":
    main()
