"""How much of a zoo model's call is the host's, and what removing it gives: per model (kernelcraft.zoo, real sizes)
its call timed as a user times it (back-to-back calls between two CUDA events, fresh inputs drawn once, no L2 flush,
median of several windows), eager, under torch.compile (default mode), torch.compile(mode="reduce-overhead") (CUDA
graphs) and eager replayed from one captured CUDA graph (inputs copied into the graph's buffers, the output cloned
out, both counted); and each one's device time from torch.profiler's kernel sum, with its heaviest kernels.

    PYTHONPATH=src python benchmarks/probes/host_overhead_probe.py --models bert,gpt2,llama --dtype bfloat16 \\
        --json benchmarks/results/host-overhead-h200-DATE.json

A probe for where apply's speed can come from on host-bound models (every zoo transformer in bf16 at these sizes on
an H200): not kernelcraft's verdict method (the verifier flushes L2 and counts a host-bound call's host time).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys

import torch

from kernelcraft import zoo


def _windows(fn, inputs, calls=20, windows=7) -> float:
    """Median over `windows` of the mean ms a call of `calls` back-to-back calls."""
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    out = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / calls)
    return statistics.median(out)


def _device_ms(fn, inputs, top: int = 5) -> tuple[float, list[tuple[str, float]]]:
    """The device's own time a call: torch.profiler's CUDA kernel time summed over one call; and its `top` kernels
    (name cut to 80 characters, ms), to tell which kernels a form runs (eager in a CUDA graph ran slower on the
    device than eager, by kernels not yet named)."""
    fn(*inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(*inputs)
        torch.cuda.synchronize()
    events = sorted(prof.key_averages(), key=lambda e: -e.self_device_time_total)
    return (sum(e.self_device_time_total for e in events) / 1e3,
            [(e.key[:80], round(e.self_device_time_total / 1e3, 4)) for e in events[:top]])


def _graphed(model, inputs):
    """Eager `model` replayed from a CUDA graph: each call copies its inputs in and clones the output out."""
    static = [x.clone() for x in inputs]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(*static)

    def call(*xs):
        for s, x in zip(static, xs):
            s.copy_(x)
        graph.replay()
        return out.clone()
    return call


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="bert,gpt2,llama")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for name in args.models.split(","):
        model, inputs = zoo.build(name, "real", args.dtype)
        model, inputs = model.cuda(), [x.cuda() for x in inputs]
        row = {"model": name, "dtype": args.dtype}
        with torch.no_grad():
            expected = model(*inputs)
            forms = {"eager": model, "compile": torch.compile(model),
                     "compile_reduce_overhead": torch.compile(model, mode="reduce-overhead"),
                     "eager_cuda_graph": _graphed(model, inputs)}
            for form, fn in forms.items():
                try:
                    got = fn(*inputs)
                    row[f"{form}_max_abs_diff"] = float((got.float() - expected.float()).abs().max())
                    row[f"{form}_ms"] = round(_windows(fn, inputs), 4)
                    device_ms, kernels = _device_ms(fn, inputs)
                    row[f"{form}_device_ms"], row[f"{form}_top_kernels"] = round(device_ms, 4), kernels
                except Exception as exc:  # a form that does not run here is a row saying so
                    row[f"{form}_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        print(json.dumps(row), flush=True)
        rows.append(row)
        torch._dynamo.reset()
    record = {"what": "host overhead probe (benchmarks/probes/host_overhead_probe.py)",
              "date": datetime.date.today().isoformat(),
              "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "method": "back-to-back calls between two CUDA events (20 calls, median of 7 windows), no L2 flush; "
                        "device_ms: torch.profiler's CUDA kernel time over one call", "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
