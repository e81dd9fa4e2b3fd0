"""Probe: a stride-1 transposed 2-D or 3-D convolution run as the plain convolution it equals, against the transposed
conv family's first move, eager and torch.compile, at KernelBench's published sizes.

With stride 1, no output padding and one group, ConvTransposeNd(x, w) = ConvNd(x, w') with w' the weight's in- and
out-channels swapped and its taps flipped, padded dilation * (k - 1) - padding on each side. The probe renders the
conv family's first move for that ConvNd (the built-in engineer on a problem written for it), gives it w', checks
it against eager on one input and times it interleaved with the others (`params_probe.against_compile`: the
verifier's clock, the L2 flushed). A result here becomes a move only through the families' code.

    python benchmarks/probes/convt_as_conv_probe.py shared/kernelbench/level1 --only 65,69,58,70 --out probe.json
"""

from __future__ import annotations

import datetime
from pathlib import Path

import torch
import torch.nn as nn
import triton
from params_probe import against_compile, loaded, numbered, probe_all, probe_parser
from provenance import code

from kernelcraft.problems.problem import Problem
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.verify.policy import set_exact_fp32

CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv{dims}d({cin}, {cout}, {k}, padding={pad}, dilation={dil}, bias={bias})

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return []


def get_init_inputs():
    return []
'''


def first_move(engineer: BuiltinProposer, problem: Problem, label: str) -> tuple[type, str, dict]:
    """The engineer's first Triton kernel for a one-op problem: its ModelNew class, the op's kind, the move."""
    op = engineer.coverage(problem, "triton").single
    if op is None:
        raise ValueError(f"{problem.name}: not one op the engineer covers (a chain is not probed here)")
    params = registry.moves(op, "triton")[0].params
    return loaded(registry.render(op, problem.source, params), label).ModelNew, op.kind, params.to_json()


def probe(problem: Problem, engineer: BuiltinProposer, budget_s: float, **timing) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    ct = next((m for m in model.modules() if isinstance(m, (nn.ConvTranspose2d, nn.ConvTranspose3d))), None)
    dims = 0 if ct is None else len(ct.kernel_size)
    if ct is None or set(ct.stride) != {1} or set(ct.output_padding) != {0} or ct.groups != 1:
        return {"problem": problem.name, "skipped": "not a stride-1 ConvTranspose2d/3d of one group"}
    if engineer.coverage(problem, "triton").single is None:
        return {"problem": problem.name, "skipped": "several ops (a chain): not probed here"}
    pad = tuple(d * (k - 1) - p for d, k, p in zip(ct.dilation, ct.kernel_size, ct.padding))
    source = CONV.format(dims=dims, cin=ct.in_channels, cout=ct.out_channels, k=tuple(ct.kernel_size), pad=pad,
                         dil=tuple(ct.dilation), bias=ct.bias is not None)
    path = Path(f"/tmp/kc_{problem.name}_as_conv.py")  # the engineer reads a problem from its file
    path.write_text(source)
    conv_problem = Problem(path.stem, path, source)
    convt_cls, convt_kind, convt_params = first_move(engineer, problem, f"{problem.name}_convt")
    conv_cls, conv_kind, conv_params = first_move(engineer, conv_problem, f"{problem.name}_conv")
    convt = convt_cls(*module.get_init_inputs()).cuda().eval()
    convt.load_state_dict(model.state_dict())
    conv = conv_cls().cuda().eval()
    with torch.no_grad():
        conv.conv.weight.copy_(ct.weight.transpose(0, 1).flip(tuple(range(2, 2 + dims))))
        if ct.bias is not None:
            conv.conv.bias.copy_(ct.bias)
    fns = {"eager": model, "compile": torch.compile(model), "convt_first": convt, "as_conv_first": conv}
    return {"problem": problem.name, "conv_padding": list(pad),
            "convt_first": {"family": convt_kind, "params": convt_params},
            "as_conv_first": {"family": conv_kind, "params": conv_params},
            "rows": against_compile(fns, module, budget_s, **timing)}


def main() -> None:
    args = probe_parser(__doc__).parse_args()
    set_exact_fp32(True)  # the strict policy's baselines: cuDNN's fp32 convolutions exact, as the verifier's
    engineer = BuiltinProposer("cuda")
    record = {"what": "stride-1 transposed convs as the convs they equal (benchmarks/probes/convt_as_conv_probe.py)",
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "policy": "strict",
              "mutate": args.mutate, "problems": []}
    probe_all(record, numbered(args.suite, args.only),
              lambda problem: probe(problem, engineer, args.budget, mutate=args.mutate, host=args.host), args.out)


if __name__ == "__main__":
    main()
