"""Probe of how LayerNorm (16, 64, 256, 256)'s CUDA kernel (the family's second move, affine) times under
triton's do_bench and under the verifier's own loop (kernelcraft.verify.timing.time_interleaved, beside eager),
with the device's persisting-L2 limit as it is and capped at zero (the verifier caps it, so that no candidate
keeps data in L2 across its flush). The kernel's w and b loads carry evict-last hints. Then whether the
verifier's per-call persisting-L2 reset blocks the host until the GPU is idle, and what the events measure when
the GPU is kept busy (a spin kernel after the flush) while the host issues the forward.

    python benchmarks/probes/layernorm_timing_probe.py > benchmarks/results/layernorm-timing-h100.log
"""

import time

import torch
import triton.testing
from cuda.bindings import runtime

from benchmarks.probes.layernorm_resident_probe import REFERENCE
from benchmarks.matmul_sweep import load
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.verify import timing
from kernelcraft.verify.timing import TimingConfig, time_interleaved


def limit() -> int:
    err, value = runtime.cudaDeviceGetLimit(runtime.cudaLimit.cudaLimitPersistingL2CacheSize)
    return value


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    print(torch.cuda.get_device_name(), torch.__version__, f"L2 {props.L2_cache_size >> 20} MiB", flush=True)
    op = Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"})
    move = registry.moves(op, "cuda_nvrtc")[1]
    ours = load(registry.render(op, REFERENCE.format(affine=True), move.params)).ModelNew().cuda()
    eager = torch.nn.LayerNorm((64, 256, 256)).cuda()
    x = torch.randn(16, 64, 256, 256, device="cuda")
    make = lambda i: [torch.randn(16, 64, 256, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(i))]
    print(f"move 1: {move.params}")
    start = limit()
    with torch.no_grad():
        for label, value in (("as the device starts", None), ("capped at zero", 0)):
            if value is not None:
                runtime.cudaDeviceSetLimit(runtime.cudaLimit.cudaLimitPersistingL2CacheSize, value)
            ms = [triton.testing.do_bench(lambda: ours(x), warmup=30, rep=300) for _ in range(3)]
            em = triton.testing.do_bench(lambda: eager(x), warmup=30, rep=300)
            print(f"persisting-L2 limit {label} ({limit()} bytes): do_bench ours {' '.join(f'{m:.4f}' for m in ms)} ms, "
                  f"eager {em:.4f} ms", flush=True)
        for label, reset in (("the verifier's loop (limit capped, persisting lines reset before each call)", True),
                             ("the verifier's loop without its persisting-L2 cap and reset", False)):
            if not reset:
                timing._persisting_l2_reset = lambda: (lambda: None)
                runtime.cudaDeviceSetLimit(runtime.cudaLimit.cudaLimitPersistingL2CacheSize, start)
            run = time_interleaved({"ours": ours, "eager": eager}, make, torch.device("cuda"), TimingConfig(budget_s=6.0),
                                   l2_bytes=props.L2_cache_size)
            t = run.timings
            print(f"{label} (limit {limit()} bytes): ours median {t['ours'].median_ms:.4f} ms ({t['ours'].samples} "
                  f"samples), eager {t['eager'].median_ms:.4f} ms: {t['eager'].median_ms / t['ours'].median_ms:.2f}x",
                  flush=True)

        # Does the reset wait for the GPU? Queue ~50 ms of spinning, then time the call on the host.
        torch.cuda.synchronize()
        torch.cuda._sleep(100_000_000)
        t0 = time.perf_counter()
        runtime.cudaCtxResetPersistingL2Cache()
        print(f"cudaCtxResetPersistingL2Cache behind a ~50 ms GPU spin returned after {(time.perf_counter() - t0) * 1e3:.2f} ms",
              flush=True)
        torch.cuda.synchronize()
        flush = torch.empty(max(2 * props.L2_cache_size, 256 << 20) // 4, dtype=torch.float32, device="cuda")  # as the verifier
        for spin in (0, 1_000_000):
            samples = []
            for _ in range(300):
                runtime.cudaCtxResetPersistingL2Cache()
                flush.zero_()
                if spin:
                    torch.cuda._sleep(spin)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                ours(x)
                end.record()
                samples.append((start, end))
            torch.cuda.synchronize()
            ms = sorted(s.elapsed_time(e) for s, e in samples)
            print(f"reset, flush{', GPU spin of ' + str(spin) + ' cycles' if spin else ''}, events around the forward: "
                  f"median {ms[len(ms) // 2]:.4f} ms", flush=True)


if __name__ == "__main__":
    main()
