"""Probe of the norm family's long-row moves on level1/layernorm (16 rows of 64·256·256 fp32): for each move,
the whole forward (triton.testing.do_bench, CUDA events) and each kernel's own time (torch.profiler), its
error against an fp64 layer norm, and the copy floor (x.clone(): one read, one write of the same bytes).

    python benchmarks/norm_probe.py > benchmarks/results/norm-probe-h100.log
"""

import traceback

import torch
import triton
import triton.testing
from torch.profiler import ProfilerActivity, profile

from benchmarks.matmul_sweep import load
from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.triton_kernels import moves, render


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
    p = load_problem("level1/layernorm")
    op = analyze(p).single
    module = p.load()
    torch.manual_seed(0)
    x = module.get_inputs()[0].cuda()
    ref_model = module.Model(*module.get_init_inputs()).cuda()
    with torch.no_grad():
        ref = torch.nn.functional.layer_norm(x.double(), ref_model.ln.normalized_shape, ref_model.ln.weight.double(),
                                             ref_model.ln.bias.double(), ref_model.ln.eps)
    gb = x.numel() * x.element_size() / 1e9
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, f"input {gb:.3f} GB", flush=True)
    clone = triton.testing.do_bench(lambda: x.clone(), warmup=30, rep=300)
    print(f"copy floor (x.clone): {clone:.4f} ms = {2 * gb / clone:.0f} GB/s", flush=True)
    eager = triton.testing.do_bench(lambda: ref_model(x), warmup=10, rep=200)
    print(f"eager: {eager:.4f} ms", flush=True)
    for text, params in [(m.text, m.params) for m in moves(op)]:
        try:
            model = load(render(op, p.source, params)).ModelNew(*module.get_init_inputs()).cuda()
            model.load_state_dict(ref_model.state_dict())
            with torch.no_grad():
                out = model(x)
                err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
                ms = triton.testing.do_bench(lambda: model(x), warmup=30, rep=300)
                per_kernel = kernel_times(lambda: model(x))
            print(f"{ms:.4f} ms  {eager / ms:.1f}x eager  err {err:.2e}  [{per_kernel}]  {text[:90]}", flush=True)
        except Exception:
            print(text[:90], traceback.format_exc()[-1500:], flush=True)


if __name__ == "__main__":
    main()
