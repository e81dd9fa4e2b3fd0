"""A scripted search run end to end: `tree` on a real problem, the proposer a local chat server that
replays hand-written kernels (with a model-like delay per answer), the verifier the real one.

It measures the orchestration, not a model: the trajectory (best kernel per round), candidates,
the device's idle fraction (how long the verifier had nothing to judge), and the orchestrator's own
time per candidate (parsing, store writes). The replayed kernels are in benchmarks/candidates/.

    python benchmarks/search_e2e.py --device cuda --delay 2 --out benchmarks/results/search-e2e-h200.json

`--requests FILE` writes what the model was sent (round 1's and round 2's ideas requests, and round 2's
first implement request) as markdown; `--profile` runs the round's best kernels under Nsight Compute.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # tests/llm_server.py, the scripted server

from kernelcraft.problems import load_problem  # noqa: E402
from kernelcraft.propose.llm import ClientSettings, LLMProposer, ModelSpec  # noqa: E402
from kernelcraft.search import RunConfig, start_run  # noqa: E402
from kernelcraft.spec import RunSpec
from kernelcraft.store import Store  # noqa: E402
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig  # noqa: E402
from kernelcraft.verify.policy import get_policy  # noqa: E402
from tests.llm_server import Reply, Rule, ScriptedLLMServer  # noqa: E402

C = HERE / "candidates"
# round -> [(idea, category, kernel file or None for a prose answer)]
SCRIPT = {
    1: [("One block per row, three passes: max, sum of exp, write", "parallelism", C / "search/softmax_naive_nvrtc.py"),
        ("Online softmax in Triton: one program per row, running max and sum", "memory", C / "triton/softmax.py"),
        ("Skip the barrier between the warp reductions", "async", C / "wrong/softmax_race_nvrtc.py"),
        ("Explain the plan before writing code", "control", None)],
    2: [("Single pass online max and sum with float4 loads and warp shuffles", "memory", C / "cuda_nvrtc/softmax.py"),
        ("Only normalize the first block of each row", "control", C / "wrong/softmax_partial_triton.py")],
    3: [("Same as the best, with a different launch order", "parallelism", C / "cuda_nvrtc/softmax.py"),
        ("Triton online softmax again, as a control", "memory", C / "triton/softmax.py")],
}


def fence(path: Path | None) -> str:
    if path is None:
        return "I would fuse the passes and vectorize the loads; that should be fast enough."
    return f"Here is the kernel.\n\n```python\n{path.read_text()}```\n"


def rules(delay: float) -> list[Rule]:
    ideas = [Reply("```json\n" + json.dumps([{"idea": i, "category": c} for i, c, _ in SCRIPT[r]]) + "\n```",
                   delay_s=delay) for r in sorted(SCRIPT)]
    out = [Rule(r"Propose \d+ distinct optimization ideas", ideas)]
    for r in sorted(SCRIPT):
        for idea, _, path in SCRIPT[r]:
            out.append(Rule("applies this idea: " + re.escape(idea), [Reply(fence(path), delay_s=delay)]))
    return out


def write_requests(store, run_id: str, path: Path) -> None:
    """The user messages of the requests a model reads to learn from a run: rounds 1 and 2."""
    calls = {c.key: c for c in store.calls(run_id)}
    keys = ["r01/ideas", "r02/ideas"] + sorted(k for k in calls if k.startswith("r02/i"))[:1]
    parts = [f"# Requests sent in run {run_id} (system prompt left out)\n"]
    for key in keys:
        if key in calls:
            parts.append(f"## {key}\n\n````text\n{calls[key].messages[-1]['content']}\n````\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="level1/softmax")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--delay", type=float, default=2.0, help="seconds each scripted answer takes")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--requests", type=Path, default=None, help="write the requests the model was sent (markdown)")
    ap.add_argument("--profile", action="store_true", help="hardware counters for each round's best kernels")
    args = ap.parse_args()

    problem = load_problem(args.problem)
    work = Path(tempfile.mkdtemp(prefix="kc-e2e-"))
    events = []
    with ScriptedLLMServer(rules(args.delay)) as server, \
            Verifier(args.device, VerifyConfig(small=args.small, timing=TimingConfig(budget_s=6.0),
                                               cache_dir=Path.home() / ".cache" / "kernelcraft")) as verifier:
        spec = ModelSpec("openai-compatible", "openai", "scripted-model", server.url + "/v1", "none")
        policy = get_policy(verifier.config.policy)
        proposer = LLMProposer(spec, verifier.devices[0], (policy.name, policy.summary),
                               settings=ClientSettings(max_retries=1))
        store = Store(work / "runs.db")
        t0 = time.monotonic()
        config = RunConfig(strategy="tree", backend="cuda_nvrtc", rounds=len(SCRIPT), ideas=4, impls=1, beam=2,
                           profile=args.profile)
        outcome = start_run(store, problem, proposer, verifier, RunSpec(config), out_dir=work,
                            on_event=lambda k, d: events.append((round(time.monotonic() - t0, 3), k, d)))
        proposer.close()
        if args.requests:
            write_requests(store, outcome.run_id, args.requests)
    o = outcome.to_dict()
    best = o["best"]["result"] if o["best"] else {}
    record = {
        "what": "tree search, scripted proposer (hand-written kernels replayed over HTTP), real verifier",
        "device": best.get("device") or (torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"),
        "torch": torch.__version__, "date": datetime.date.today().isoformat(), "problem": problem.name,
        "answer_delay_s": args.delay, "timing_method": (best.get("runtime") or {}).get("method"),
        "rounds": len(SCRIPT), "candidates": o["counters"]["candidates"], "evaluated": o["counters"]["evaluated"],
        "by_status": o["counters"]["by_status"], "malformed": o["counters"]["malformed"],
        "trajectory": o["trajectory"], "wall_seconds": o["wall_seconds"],
        "gpu_idle_fraction": o["gpu_idle_fraction"],
        "orchestration_overhead_ms_per_candidate": o["overhead_ms_per_candidate"],
        "best": {k: best.get(k) for k in ("runtime_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile",
                                          "roofline_fraction", "policy")},
        "candidates_detail": o["candidates"],
        "events": [(t, k, d) for t, k, d in events if k in ("round", "candidate", "stop")],
    }
    text = json.dumps(record, indent=1, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(json.dumps({k: record[k] for k in ("device", "candidates", "evaluated", "wall_seconds", "gpu_idle_fraction",
                                             "orchestration_overhead_ms_per_candidate", "best")}, default=str))
    for t in record["trajectory"]:
        print(f"round {t['round']}: {t['candidates']} tried, {t['correct']} correct, best "
              f"{t['best_runtime_ms']} ms ({t['best_speedup_eager']}x eager) idea: {t['best_idea']}")


if __name__ == "__main__":
    main()
