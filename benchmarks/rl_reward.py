"""kernelcraft as an RL reward: completions scored per minute, on KernelBench problems, per backend.

For each problem of a KernelBench level directory and each backend, the completions a trainer's step would hold:
the built-in engineer's answer (a real kernel, where it covers the problem) twice (a group of rollouts repeats
itself), a wrong kernel (the reference's output copied out by a kernel of the backend, scaled by 1.01), a kernel
file that does not parse, an answer cut off inside its code block, and prose with no code. They are scored as
one batch through `kernelcraft.rl.Scorer` (every completion submitted at once, the verifier's build pool and one
supervisor per GPU), cold (an empty verdict cache), then again (every verdict from the cache). The record:
completions per minute each way, the cache hit rate, the tiers, the device, torch's and Triton's versions, the
date. On a GPU (the integrator's run):

    PYTHONPATH=src python benchmarks/rl_reward.py shared/kernelbench/level1 --backends cuda_nvrtc,triton \\
        --out $OUT/rl-reward-level1.json

A quick check on the CPU (small sizes, Triton's interpreter):

    PYTHONPATH=src python benchmarks/rl_reward.py ../shared/kernelbench/level1 --device cpu --limit 3 \\
        --backends triton --out /tmp/rl-reward-cpu.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from kernelcraft.export.rl import ABILITY, DATA_SOURCE
from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from kernelcraft.rl import Scorer
from kernelcraft.verify.policy import POLICIES

# The reference's own output, copied out by a kernel of the backend and scaled by 1.01: it builds, runs and is
# wrong (library kernels do the work, a custom kernel runs: the verdict is `incorrect`, not `rejected`).
WRONG = {"triton": '''
import torch
import triton
import triton.language as tl

{problem}


@triton.jit
def scale_out_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) * 1.01, mask=mask)


class ModelNew(Model):
    def forward(self, *args):
        out = super().forward(*args)
        out = out[0] if isinstance(out, (tuple, list)) else out
        src = out.float().contiguous()
        dst = torch.empty_like(src)
        scale_out_kernel[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), BLOCK=1024)
        return dst.to(out.dtype)
''', "cuda_nvrtc": '''
import torch

from kernelcraft.backends.nvrtc import load_kernels

{problem}

SCALE = r"""
extern "C" __global__ void scale_out(const float* __restrict__ x, float* __restrict__ y, long long n)
{{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 1.01f;
}}
"""

kernels = load_kernels(SCALE)


class ModelNew(Model):
    def forward(self, *args):
        out = super().forward(*args)
        out = out[0] if isinstance(out, (tuple, list)) else out
        src = out.float().contiguous()
        dst = torch.empty_like(src)
        n = src.numel()
        kernels.scale_out(src, dst, n, grid=((n + 255) // 256,), block=(256,))
        return dst.to(out.dtype)
'''}
PROSE = "I would tile the work over thread blocks and vectorize the loads; that should beat PyTorch."


def row(problem, backend: str, device: str, args) -> dict:
    """The RL row `kernelcraft export --kind rl` would write for the problem under these settings."""
    p = POLICIES[args.policy]
    return {"data_source": DATA_SOURCE, "prompt": [], "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": problem.source},
            "extra_info": {"problem": problem.name, "backend": backend, "device": device,
                           "policy": {"name": p.name, "fp32": p.fp32, "fp16_bf16": p.half, "allow_tf32": p.allow_tf32},
                           "small": {"auto": None, "small": True, "full": False}[args.size], "trials": args.trials,
                           "timing_budget_s": args.budget, "compile_baseline": args.compile_baseline}}


def completions(problem, backend: str, engineer: BuiltinProposer) -> tuple[list[tuple[str, str]], bool]:
    """(kind, completion text) for one problem and backend, and whether the engineer covered it."""
    out = []
    answer = engineer.ask(Request("implement", problem, backend))
    covered = bool(answer.text and parse_kernel(answer.text).source)
    if covered:
        out += [("engineer", answer.text), ("engineer_again", answer.text)]
    wrong = WRONG[backend].format(problem=problem.source.strip())
    out.append(("wrong", f"The kernel:\n\n```python\n{wrong}```\n"))
    # a file that does not parse: the wrong kernel with an unfinished def after it (appended, nothing rewritten)
    out.append(("syntax_error", f"```python\n{wrong}\n\ndef unfinished(:\n    pass\n```\n"))
    out.append(("cut_off", f"Here it is.\n\n```python\n{wrong[: len(wrong) // 2]}"))
    out.append(("prose", PROSE))
    return out, covered


def versions() -> dict:
    out = {"torch": torch.__version__, "python": sys.version.split()[0]}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                       cwd=Path(__file__).parent, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["commit"] = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path, help="a KernelBench level directory (e.g. shared/kernelbench/level1)")
    ap.add_argument("--backends", default=None,
                    help="comma-separated: cuda_nvrtc,triton (default on a GPU), triton (default on the CPU)")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    ap.add_argument("--limit", type=int, default=None, help="the first N problems (by name)")
    ap.add_argument("--only", default="", help="comma-separated problem names (as the directory names them)")
    ap.add_argument("--size", default="auto", choices=["auto", "small", "full"],
                    help="auto: full on a GPU, small on the CPU")
    ap.add_argument("--policy", default="strict", choices=sorted(POLICIES))
    ap.add_argument("--trials", type=int, default=3, help="correctness trials per kernel (default 3)")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of timing per kernel, at most (default 1)")
    ap.add_argument("--compile-baseline", action="store_true", help="time torch.compile too (off: eager only)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON record")
    args = ap.parse_args(argv)

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    backends = (args.backends or ("cuda_nvrtc,triton" if device == "cuda" else "triton")).split(",")
    unknown = [b for b in backends if b not in WRONG]
    if unknown:
        ap.error(f"--backends {unknown[0]}: choose from {', '.join(WRONG)}")
    problems = sorted(load_problem_dir(args.kernelbench), key=lambda p: p.name)
    if args.only:
        wanted = {w.removesuffix(".py") for w in args.only.split(",")}
        problems = [p for p in problems if p.name in wanted or p.name.split("/")[-1] in wanted]
    problems = problems[: args.limit] if args.limit else problems
    if not problems:
        ap.error(f"no problems selected from {args.kernelbench}")
    engineer = BuiltinProposer(device)

    items, kinds, covered = [], [], {b: 0 for b in backends}
    for backend in backends:
        for problem in problems:
            answers, ok = completions(problem, backend, engineer)
            covered[backend] += ok
            for kind, text in answers:
                items.append((row(problem, backend, device, args), text))
                kinds.append((backend, problem.name, kind))
    print(f"{len(items)} completions over {len(problems)} problem(s), backends {', '.join(backends)}, on {device}",
          file=sys.stderr)

    record = {"benchmark": "rl_reward", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "versions": versions(),
              "kernelbench": str(args.kernelbench), "problems": len(problems), "backends": backends,
              "engineer_covered": covered,
              "settings": {"size": args.size, "policy": args.policy, "trials": args.trials, "timing_budget_s": args.budget,
                           "compile_baseline": args.compile_baseline}}
    with tempfile.TemporaryDirectory(prefix="kc-rl-bench-") as cache:
        with Scorer(device=device, cache_dir=cache) as scorer:
            done = [0]

            def progress(i, score):
                done[0] += 1
                if done[0] % max(1, len(items) // 20) == 0 or done[0] == len(items):
                    print(f"  {done[0]}/{len(items)} scored", file=sys.stderr)

            t0 = time.perf_counter()
            cold = scorer.score_batch(items, progress)
            print(f"cold: {cold.per_minute:.1f} completions/min in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            warm = scorer.score_batch(items)
            print(f"from the cache: {warm.per_minute:.1f} completions/min", file=sys.stderr)
    record["cold"] = cold.stats()
    record["cached"] = warm.stats()
    record["completions"] = [{"backend": b, "problem": p, "kind": k, **s.to_dict(),
                              "reasons": s.result.reasons if s.result else [],
                              "wall_seconds": s.result.wall_seconds if s.result else None}
                             for (b, p, k), s in zip(kinds, cold.scores)]
    by_kind = {}
    for (b, _, k), s in zip(kinds, cold.scores):
        by_kind.setdefault(f"{b}/{k}", {}).setdefault(s.tier, 0)
        by_kind[f"{b}/{k}"][s.tier] += 1
    record["tiers_by_kind"] = by_kind
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}: {cold.per_minute:.1f} completions/min cold, cache hit rate "
          f"{record['cold']['cache_hit_rate']:.2f} cold, {record['cached']['cache_hit_rate']:.2f} again", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
