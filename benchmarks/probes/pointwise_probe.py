"""Probe: where the built-in engineer's flat pointwise kernel loses its last percent to torch.compile at KernelBench's
published sizes (level 1's activations read and write 6.4 GB; the recorded rows time 0.99-1.0x compile).

Per problem, in one process, timed interleaved with the verifier's own clock (`verify.timing.time_interleaved`:
CUDA events, the L2 flushed before each call, rounds of every callable in turn): eager, torch.compile, the engineer's
first kernel as it renders today, and variants of its flat kernel that differ in one thing each:
- `loop64`: today's body (a grid-stride loop over tiles, 64-bit offsets), at other tiles;
- `i32`: one program per tile, no loop, 32-bit offsets (the host takes it only below 2**31 elements);
- `i32_even`: the same without the mask where the tile divides the element count.
The variants run the problem's own op (its elementwise steps, from the engineer's plan) so each is a real candidate
for it; every variant's output is compared with eager's before it is timed.

    python benchmarks/probes/pointwise_probe.py shared/kernelbench/level1 --only 19,21,26,30 --out probe.json
"""

from __future__ import annotations

import datetime

import torch
import triton
from params_probe import against_compile, loaded, numbered, probe_all, probe_parser
from provenance import code

from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.codegen import indent
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.builtin.steps import step_lines
from kernelcraft.propose.parse import parse_kernel

LOOP64 = '''
@triton.jit
def k(x_ptr, y_ptr, n, n_tiles, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
{steps}
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask)
'''

I32 = '''
@triton.jit
def k(x_ptr, y_ptr, n, n_tiles, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
{steps}
    if EVEN:
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty))
    else:
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=offs < n)
'''


def _kernel(template: str, steps: list, depth: int):
    """The template with the op's steps (the engineer's step lines), compiled as a module of its own."""
    source = "import triton\nimport triton.language as tl\n" + template.format(
        steps=indent("\n".join(step_lines(steps)), depth))
    return loaded(source, f"pointwise_{template is I32}_{abs(hash(source))}").k


def variants(steps: list) -> dict:
    loop64, i32 = _kernel(LOOP64, steps, 8), _kernel(I32, steps, 4)

    def run_loop(block, warps):
        def fn(x):
            y = torch.empty_like(x)
            n = x.numel()
            n_tiles = triton.cdiv(n, block)
            loop64[(n_tiles,)](x, y, n, n_tiles, BLOCK=block, num_warps=warps)
            return y
        return fn

    def run_i32(block, warps, even_ok):
        def fn(x):
            y = torch.empty_like(x)
            n = x.numel()
            assert n < 2**31
            n_tiles = triton.cdiv(n, block)
            i32[(n_tiles,)](x, y, n, n_tiles, BLOCK=block, EVEN=even_ok and n % block == 0, num_warps=warps)
            return y
        return fn

    out = {}
    for block, warps in ((4096, 8), (1024, 4), (2048, 4)):
        out[f"loop64_{block}_{warps}"] = run_loop(block, warps)
        out[f"i32_{block}_{warps}"] = run_i32(block, warps, False)
        out[f"i32_even_{block}_{warps}"] = run_i32(block, warps, True)
    return out


def probe(problem, engineer, budget_s: float, **timing) -> dict:
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda()
    op = engineer.coverage(problem, "triton").single
    answer = engineer.ask(Request("implement", problem, "triton"))
    new = loaded(parse_kernel(answer.text).source, f"rendered_{problem.name}").ModelNew(*module.get_init_inputs()).cuda()
    fns = {"eager": model, "compile": torch.compile(model), "engineer": new}
    steps = op.detail["steps"] if op is not None and op.kind == "elementwise" else None
    if steps is not None:
        fns.update(variants(steps))
    return {"problem": problem.name, "first_kernel": answer.text.split("\n", 1)[0][:200], "plan_steps": steps is not None,
            "rows": against_compile(fns, module, budget_s, **timing)}


def main() -> None:
    args = probe_parser(__doc__).parse_args()
    engineer = BuiltinProposer("cuda")
    props = torch.cuda.get_device_properties(0)
    record = {"what": "pointwise kernel variants against torch.compile, one process, interleaved (benchmarks/"
                      "pointwise_probe.py)", "device": props.name, "torch": torch.__version__,
              "triton": triton.__version__, "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "mutate": args.mutate,
              "problems": []}
    probe_all(record, numbered(args.suite, args.only),
              lambda problem: probe(problem, engineer, args.budget, mutate=args.mutate, host=args.host), args.out)


if __name__ == "__main__":
    main()
