"""Probe: one op's family parameters beyond its moves, against torch.compile, at KernelBench's published sizes.

For each problem the built-in engineer covers: one op's first Triton move's parameters, then each `--vary` set of
fields changed (`Params.but`), rendered as a candidate would be, checked against eager on one input,
and timed interleaved in one process with eager and torch.compile by the verifier's own clock
(`verify.timing.time_interleaved`: CUDA events, the L2 flushed before each call). A variant that wins here becomes a
move (or the first one) only through the family's code, and is then verified like any candidate.

    python benchmarks/probes/params_probe.py shared/kernelbench/level1 --only 41,44 \\
        --vary '{"BLOCK_W": 128}' '{"BLOCK_W": 256, "num_warps": 8}' --out probe.json

A problem of several ops (a chain: level 1's 12, diag(A) @ B as a view and a broadcast product; 94, a mean over a
prologue that reads a second input) varies its lead op (chain.py's `lead`) where its family has the varied fields,
else the first op whose family has them (level 2's conv -> group norm chains: the norm), or op `--op N` of the
chain; the others on their first strict moves, as the engineer renders it. A problem with no op that has the fields
is skipped with the reason in the record.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
import types
from pathlib import Path

import torch
import triton
from provenance import code

from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.builtin import chain, registry
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.verify.inputs import mutate_inputs, mutation_kind
from kernelcraft.verify.policy import get_policy, set_exact_fp32
from kernelcraft.verify.timing import TimingConfig, time_interleaved


def loaded(source: str, label: str) -> types.ModuleType:
    """A candidate's source as a module, loaded from a file of its own (Triton reads a kernel's source file)."""
    path = Path(f"/tmp/kc_probe_{label}.py")
    path.write_text(source)
    module = types.ModuleType(path.stem)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def against_compile(fns: dict, module, budget_s: float, mutate: bool = False, host: bool = False) -> dict:
    """Rows for the callables (`eager` and `compile` among them): each one's output on one input of the problem
    `module` (drawn on the device) against eager's, then all timed interleaved; speed against torch.compile.
    `mutate`: the inputs changed in place before each timed call, as the verifier's timing does
    (`verify.inputs.mutate_inputs`); `host`: each callable's host microseconds a call (`host_us`)."""
    torch.manual_seed(0)
    with torch.device("cuda"):  # drawn on the device: a 6.4 GB input drawn on the host would take seconds
        inputs = list(module.get_inputs())
    errors, hosts = {}, {}
    with torch.no_grad():
        want = fns["eager"](*inputs)
        for name, fn in fns.items():
            got = fn(*inputs)
            errors[name] = float((got.float() - want.float()).abs().max())
            del got
        del want
        if host:
            hosts = {name: host_us(fn, inputs) for name, fn in fns.items()}
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        kind = mutation_kind(module)
        run = time_interleaved(fns, lambda _round: inputs, torch.device("cuda"), TimingConfig(budget_s=budget_s), l2,
                               mutate=(lambda xs, seed: mutate_inputs(xs, seed, kind)) if mutate else None)
    compiled = run.timings["compile"].median_ms
    return {name: {"median_ms": round(t.median_ms, 4), "vs_compile": round(compiled / t.median_ms, 4),
                   "cv": round(t.cv, 4), "samples": t.samples, "max_abs_error": errors[name],
                   **({"host_us": hosts[name]} if host else {})}
            for name, t in run.timings.items()}


def host_us(fn, inputs: list, calls: int = 50) -> float:
    """The host's microseconds a call of `fn`: `calls` calls issued while the GPU is held busy (torch.cuda._sleep,
    longer than the calls take to issue), so no call waits on the device; the median of three such runs. A call
    whose host time exceeds what the GPU has queued before it leaves the GPU idle inside its timed window. Made for
    calls of tens of microseconds on the device: for milliseconds-long ones with large outputs it is less steady
    (level 2's 13: 478 and 692 us for two variants of equal device time: params-probe-packed-l2-h100-2026-11-27)."""
    runs = []
    for _ in range(3):
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # about 0.1 s at 2 GHz
        start = time.perf_counter()
        for _ in range(calls):
            fn(*inputs)
        runs.append((time.perf_counter() - start) * 1e6 / calls)
        torch.cuda.synchronize()
    return round(sorted(runs)[1], 1)


def fields(op) -> set[str]:
    """The parameter fields of `op`'s family (those a --vary set may change)."""
    return {f.name for f in dataclasses.fields(registry.moves(op, "triton")[0].params)}


def varied_op(ops: list, varies: list[dict], op_index: int | None) -> tuple[int | None, str]:
    """Which op of a chain the --vary sets change: `op_index` if given, else the lead op where its family has every
    varied field, else the first op whose family has them (a level-2 chain leads with its conv, while a norm after it
    has the fields varied); None and why where no op fits."""
    wanted = set().union(*varies) if varies else set()
    movable = [j for j, o in enumerate(ops) if o.kind not in chain.FREE_KINDS]
    if op_index is not None:
        if op_index not in movable:
            return None, f"op {op_index} of {[o.kind for o in ops]} has no moves"
        missing = wanted - fields(ops[op_index])
        return (op_index, "") if not missing else (None, f"op {op_index} ({ops[op_index].kind}) has no fields "
                                                         f"{sorted(missing)}")
    fit = [j for j in movable if wanted <= fields(ops[j])]
    lead = chain.lead(ops)
    if not fit:
        return None, f"no op of {[o.kind for o in ops]} has the fields {sorted(wanted)}"
    return (lead if lead in fit else fit[0]), ""


def probe(problem, engineer, varies: list[dict], budget_s: float, op_index: int | None = None, **timing) -> dict:
    analysis = engineer.coverage(problem, "triton")
    if analysis.single is not None:
        ops, i = [analysis.single], 0
        missing = set().union(*varies) - fields(ops[0]) if varies else set()
        if missing:
            return {"problem": problem.name, "skipped": f"{ops[0].kind} has no fields {sorted(missing)}"}
        render = lambda p: registry.render(ops[0], problem.source, p)  # noqa: E731
    elif analysis.chain:
        ops = analysis.chain
        i, why = varied_op(ops, varies, op_index)
        if i is None:
            return {"problem": problem.name, "skipped": why}
        render = lambda p: chain.render(ops, problem.source, p, lead_index=i)  # noqa: E731
    else:
        return {"problem": problem.name, "skipped": "not covered"}
    op = ops[i]
    first = registry.moves(op, "triton")[0].params if i == chain.lead(ops) else registry.first_strict(op).params
    module = problem.load()
    model = module.Model(*module.get_init_inputs()).cuda().eval()
    fns = {"eager": model, "compile": torch.compile(model)}
    params = {"first": first, **{json.dumps(v, sort_keys=True): first.but(**v) for v in varies}}
    for k, (label, p) in enumerate(params.items()):
        new = loaded(render(p), f"{problem.name}_{k}").ModelNew(*module.get_init_inputs()).cuda().eval()
        new.load_state_dict(model.state_dict())
        fns[label] = new
    return {"problem": problem.name, "op": op.kind, "op_index": i, "ops": [o.kind for o in ops],
            "first_move": first.to_json(),
            "rows": against_compile(fns, module, budget_s, **timing)}


def probe_parser(doc: str) -> argparse.ArgumentParser:
    """The probes' command line: a suite, the problems' numbers in it, a timing budget, the record's path."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", type=Path)
    ap.add_argument("--only", required=True, help="comma-separated problem numbers")
    ap.add_argument("--budget", type=float, default=8.0, help="timing seconds per problem, all callables together")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mutate", action="store_true", help="change the inputs in place before each timed call, as "
                    "the verifier's timing does")
    ap.add_argument("--host", action="store_true", help="also each callable's host microseconds a call")
    return ap


def numbered(suite: Path, only: str) -> list:
    """The suite's problems whose numbers `only` lists ("41,44")."""
    wanted = {f"{n}_" for n in only.split(",")}
    return [p for p in load_problem_dir(suite) if any(p.name.startswith(w) for w in wanted)]


def probe_all(record: dict, problems: list, probe_one, out: Path) -> None:
    """Each problem's probe appended to record["problems"] and the record written after each (a run cut short keeps
    what it did), a line printed per problem."""
    for problem in problems:
        record["problems"].append(probe_one(problem))
        out.write_text(json.dumps(record, indent=1))
        rows = record["problems"][-1].get("rows", {})
        shown = [f"{k}={v['median_ms']}({v['vs_compile']})" + (f"[host {v['host_us']} us]" if "host_us" in v else "")
                 for k, v in rows.items()]
        print(problem.name, " ".join(shown), flush=True)
        torch.cuda.empty_cache()


def main() -> None:
    ap = probe_parser(__doc__)
    ap.add_argument("--vary", nargs="+", default=[], help="JSON objects: fields of the first move's parameters")
    ap.add_argument("--op", type=int, default=None,
                    help="in a problem of several ops, the one to vary (its index in the chain; default its lead)")
    ap.add_argument("--policy", default="strict", help="the tolerance policy whose baselines are timed: under one "
                    "that does not admit TF32, eager's and torch.compile's fp32 convolutions and matmuls run exact, "
                    "as the verifier's do (cuDNN's TF32 default off)")
    args = ap.parse_args()
    exact = not get_policy(args.policy).allow_tf32
    set_exact_fp32(exact)
    varies = [json.loads(v) for v in args.vary]
    engineer = BuiltinProposer("cuda")
    record = {"what": "a family's parameters beyond its moves against torch.compile, one process, interleaved "
                      "(benchmarks/probes/params_probe.py)", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "triton": triton.__version__, "date": datetime.date.today().isoformat(), "code": code(),
              "method": "verify.timing.time_interleaved: cuda_events+l2_flush, median", "policy": args.policy,
              "reference_fp32": "exact (TF32 off for cuDNN and matmuls)" if exact else "torch defaults",
              "mutate": args.mutate, "vary": varies, "problems": []}
    probe_all(record, numbered(args.suite, args.only),
              lambda problem: probe(problem, engineer, varies, args.budget, args.op, mutate=args.mutate,
                                    host=args.host), args.out)


if __name__ == "__main__":
    main()
