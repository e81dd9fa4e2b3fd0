"""Tile and precision sweep of a chain's lead op (its convolution or GEMM) on upstream KernelBench problems at their
published sizes: for each problem the built-in engineer covers, the whole candidate is rendered with the lead on
each variant of its first strict move (tiles, warps, stages, precision), or on each strict move the engineer
offers for it (--moves, any family), checked against the reference by the
verifier's own metric (verify.check.compare, strict policy) and timed with triton.testing.do_bench (CUDA events,
median). The reference is timed as the strict policy runs it (cuDNN and matmul TF32 off) and with torch's defaults,
so a tile table can be chosen against the baseline the verifier uses.

    python benchmarks/producer_sweep.py ../shared/kernelbench/level2 --only 4_,19_,47_ --out OUT.json
    python benchmarks/producer_sweep.py ../shared/kernelbench/level1 --only 47_,51_ --moves --out OUT.json

--k-order both times each tile variant with the conv families' packed and taps K loops, all with those and the offsets
loop too (implicit_gemm.GemmTiles.k_order; a lead takes only the orders its family has, else its own).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import time
from pathlib import Path

import torch
import triton
import triton.testing

from benchmarks.chain_profile import load_module
from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.builtin import chain, registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.verify.check import compare
from kernelcraft.verify.policy import POLICIES, reference_math

VARIANTS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, precision)
    (128, 128, 16, 8, 3, "tf32x3"), (128, 128, 32, 8, 3, "tf32x3"), (128, 64, 32, 4, 3, "tf32x3"),
    (64, 128, 32, 4, 3, "tf32x3"), (128, 128, 32, 8, 4, "tf32x3"), (256, 128, 32, 8, 3, "tf32x3"),
    (128, 64, 16, 4, 4, "tf32x3"), (64, 64, 32, 4, 4, "tf32x3"), (128, 128, 16, 8, 3, "ieee"),
    (128, 64, 32, 4, 3, "ieee"),
]


def tile_variants(base, k_orders=(None,)) -> list[tuple[dict, object]]:
    """The lead's first strict move with each of VARIANTS' tiles and precision (an implicit-GEMM or GEMM family's),
    in each of `k_orders` the family has (None: the move's own)."""
    has = {"packed": hasattr(base.params, "k_order"), "taps": getattr(base.params, "TAPS", False),
           "offsets": getattr(base.params, "OFFSETS", False), None: True}
    orders = tuple(o for o in k_orders if has[o]) or (None,)
    out = []
    for (m, n, k, w, s, precision), order in ((tiles, o) for tiles in VARIANTS for o in orders):
        extra = {"k_order": order} if order else {}
        out.append(({"tile": [m, n, k], "warps": w, "stages": s, "precision": precision, **extra},
                    base.params.but(BLOCK_M=m, BLOCK_N=n, BLOCK_K=k, num_warps=w, num_stages=s, precision=precision,
                                    **extra)))
    return out


def move_variants(engineer: BuiltinProposer, op) -> list[tuple[dict, object]]:
    """Every move the engineer offers for the lead op under the strict policy, as offered."""
    return [({"move": i, "idea": m.text[:100], "params": m.params.to_json()}, m.params)
            for i, m in enumerate(engineer.moves(op, "triton"))]


def sweep_problem(problem, engineer: BuiltinProposer, rep_ms: int, every_move: bool, k_orders=(None,)) -> dict:
    analysis = engineer.coverage(problem, "triton")
    ops = analysis.chain or [analysis.single]
    lead = chain.lead(ops)
    base = registry.first_strict(ops[lead])
    variants = move_variants(engineer, ops[lead]) if every_move else tile_variants(base, k_orders)
    ref_module = load_module(problem.source, "kc_reference")
    torch.manual_seed(0)
    init = ref_module.get_init_inputs()
    reference = ref_module.Model(*init).cuda().eval()
    inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ref_module.get_inputs()]
    row = {"problem": problem.name, "lead": ops[lead].kind, "family": base.family.name,
           "first_strict": base.params.to_json(), "variants": []}
    with torch.no_grad():
        for name, exact in (("eager_strict_ms", True), ("eager_default_ms", False)):
            with reference_math(exact):
                row[name] = round(triton.testing.do_bench(lambda: reference(*inputs), warmup=10, rep=rep_ms), 4)
        with reference_math(True):
            ref = reference(*inputs)
        for label, params in variants:
            v = dict(label)
            try:
                source = chain.render(ops, problem.source, params, lead) if analysis.chain else \
                    registry.render(ops[0], problem.source, params)
                model = load_module(source, "kc_candidate").ModelNew(*init).cuda().eval()
                model.load_state_dict(reference.state_dict())
                out = model(*inputs)
                v["strict_error"] = compare(out, ref, POLICIES["strict"]).max_rel_error
                del out
                v["ms"] = round(triton.testing.do_bench(lambda: model(*inputs), warmup=10, rep=rep_ms), 4)
                v["speedup_strict_eager"] = round(row["eager_strict_ms"] / v["ms"], 3)
            except Exception as exc:  # noqa: BLE001 - a variant that does not build (shared memory) is a result too
                v["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            row["variants"].append(v)
            print(f"  {v}", flush=True)
    ok = [v for v in row["variants"] if "ms" in v and v["strict_error"] <= POLICIES["strict"].fp32]
    row["best"] = min(ok, key=lambda v: v["ms"]) if ok else None
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path, help="a KernelBench level directory")
    ap.add_argument("--only", required=True, help="comma-separated name prefixes (a problem matches any)")
    ap.add_argument("--rep-ms", type=int, default=60)
    ap.add_argument("--moves", action="store_true",
                    help="time every strict move the engineer offers for the lead, not the tile table")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop starting problems after this long")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--k-order", choices=("packed", "taps", "offsets", "both", "all"), default=None,
                    help="the conv families' K loop for every tile variant (default: the first strict move's)")
    args = ap.parse_args()
    k_orders = {None: (None,), "both": ("packed", "taps"), "all": ("packed", "taps", "offsets")}.get(
        args.k_order, (args.k_order,))
    problems = [p for p in load_problem_dir(args.suite) if any(p.name.startswith(k) for k in args.only.split(","))]
    engineer = BuiltinProposer("cuda")
    rows, started = [], time.monotonic()
    for problem in problems:
        if args.minutes and time.monotonic() - started > 60 * args.minutes:
            print(f"time is up after {len(rows)} problems", flush=True)
            break
        print(problem.name, flush=True)
        try:
            rows.append(sweep_problem(problem, engineer, args.rep_ms, args.moves, k_orders))
        except Exception as exc:  # noqa: BLE001 - recorded, the others go on
            rows.append({"problem": problem.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
        best = rows[-1].get("best")
        print(f"{problem.name}: strict eager {rows[-1].get('eager_strict_ms')} ms; best {best}", flush=True)
        gc.collect()
        torch.cuda.empty_cache()
        record = {"what": "lead-op sweep, " + ("every strict move" if args.moves else "tile table") + " (in-process; a tuning aid, not a verified result)",
                  "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                  "date": datetime.date.today().isoformat(), "timing_method": "triton.testing.do_bench (CUDA events)",
                  "rows": rows}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
