"""Probe of the built-in engineer's moves on one problem, outside the search: for each move the proposer offers
on this device (CUDA moves first on sm_90+, then Triton's), the whole forward (triton.testing.do_bench, CUDA
events), each kernel's own time (torch.profiler), its error against the reference run in float64, and the
copy floor of the first input (x.clone(): one read, one write of the same bytes).

    python benchmarks/probes/moves_probe.py level1/layernorm > benchmarks/results/norm-probe-h100.log
"""

import argparse
import traceback

import torch
import triton
import triton.testing
from torch.profiler import ProfilerActivity, profile

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from benchmarks.matmul_sweep import load


def kernel_times(fn) -> str:
    """Mean device time per call of each CUDA kernel fn launches (ms), over 20 calls."""
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        total = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if total and e.count:
            rows.append(f"{e.key[:40]} {total / 1e3 / 20:.4f} ms x{e.count // 20}")
    return "; ".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem", help="a suite name such as level1/softmax")
    ap.add_argument("--relaxed", action="store_true", help="also the moves only a relaxed policy admits (TF32)")
    args = ap.parse_args()
    p = load_problem(args.problem)
    op = analyze(p).single
    module = p.load()
    torch.manual_seed(0)
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in module.get_inputs()]
    ref_model = module.Model(*module.get_init_inputs()).cuda().eval()
    with torch.no_grad():
        ref = ref_model.double()(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                                   for t in inputs])
        ref_model.float()
    x = inputs[0]
    gb = x.numel() * x.element_size() / 1e9
    print(args.problem, torch.cuda.get_device_name(), torch.__version__, triton.__version__,
          f"first input {gb:.3f} GB", flush=True)
    clone = triton.testing.do_bench(lambda: x.clone(), warmup=30, rep=300)
    print(f"copy floor (x.clone): {clone:.4f} ms = {2 * gb / clone:.2f} TB/s", flush=True)
    with torch.no_grad():
        eager = triton.testing.do_bench(lambda: ref_model(*inputs), warmup=10, rep=200)
    print(f"eager: {eager:.4f} ms", flush=True)
    proposer = BuiltinProposer("cuda", precision_moves=args.relaxed)
    for m in proposer.moves(op, "triton"):
        try:
            source = registry.render(op, p.source, m.params)
            model = load(source).ModelNew(*module.get_init_inputs()).cuda().eval()
            model.load_state_dict(ref_model.state_dict())
            with torch.no_grad():
                out = model(*inputs)
                err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
                ms = triton.testing.do_bench(lambda: model(*inputs), warmup=30, rep=300)
                per_kernel = kernel_times(lambda: model(*inputs))
            print(f"{ms:.4f} ms  {eager / ms:.2f}x eager  {clone / ms:.1%} of copy  err {err:.2e}  [{per_kernel}]  "
                  f"{m.backend}: {m.text[:90]}", flush=True)
        except Exception:
            print(m.text[:90], traceback.format_exc()[-1500:], flush=True)


if __name__ == "__main__":
    main()
