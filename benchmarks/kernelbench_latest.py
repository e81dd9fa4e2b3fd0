"""The latest verdict per problem over several `benchmarks/kernelbench.py` records of one level, and the level's
fast_p and geomeans over them (the same `kernelcraft.metrics.bench_metrics` the script writes). Records are given
oldest first, all of one device (an earlier output among them: its rows keep the records they name); a later
record's row replaces an earlier one's, except that a failed row never replaces a correct one (a later failure for
memory beside other processes says nothing of the kernel). Each row says which record it came
from, so a reader sees which code and day measured it. A row of the candidate that calls the reference (a problem
the engineer did not cover then) is kept but not counted. Nothing is run or timed here.

    python benchmarks/kernelbench_latest.py OLD.json NEWER.json ... --out LATEST.json
    python benchmarks/kernelbench_latest.py OLD.json NEWER.json --skip NEWER.json:8,13 --out LATEST.json

`--skip RECORD:N,...` leaves problems N of that record out (by number): rows a record measured on code that the
current code no longer renders (a change measured, then narrowed), so an earlier record's row, whose kernel the
current code renders again, stays the latest. The output names what was skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from kernelcraft.metrics import bench_metrics  # noqa: E402


def latest(paths: list[Path], skip: dict[str, set[int]] | None = None) -> dict:
    skip = skip or {}
    rows: dict[str, dict] = {}
    devices = set()
    for path in paths:
        record = json.loads(path.read_text())
        devices.add(record.get("device"))
        if len(devices) > 1:  # speedups are against each device's own baselines: one device per figure
            raise SystemExit(f"{path.name} was measured on {record.get('device')}, the records before it on "
                             f"{sorted(d for d in devices if d != record.get('device'))}")
        for row in record["rows"]:
            if int(row["problem"].split("_")[0]) in skip.get(path.name, ()):
                continue
            kept = rows.get(row["problem"])
            if kept is None or row["status"] == "ok" or kept["status"] != "ok":
                # a row of an earlier latest (which has "records") keeps the record, code and day it names
                source = row if "records" in record else {"record": path.name, "code": record.get("code"),
                                                          "date": record.get("date")}
                rows[row["problem"]] = {**row, **{k: source.get(k) for k in ("record", "code", "date")}}
    ordered = sorted(rows.values(), key=lambda r: int(r["problem"].split("_")[0]))
    # a problem the engineer did not cover ran the candidate that calls the reference: kept, not counted
    own = [r for r in ordered if r.get("candidate") != "reference"]
    metrics = bench_metrics([{**r, "correct": r.get("status") == "ok"} for r in own])
    return {"what": "the latest verdict per problem over the records below (benchmarks/kernelbench_latest.py); "
                    "rows of older records were measured on older code",
            "device": devices.pop(), "records": [p.name for p in paths],
            "skipped": {name: sorted(numbers) for name, numbers in skip.items()}, "problems": len(ordered),
            "fast_1_and_geomeans": metrics,
            "not_counted": [r["problem"] for r in ordered if r.get("candidate") == "reference"],
            "host_bound": host_bound(own), "rows": ordered}


def host_bound(rows: list[dict], margin: float = 0.1) -> dict:
    """Rows whose candidate or torch.compile timed median holds host time: more than `margin` above the device's own
    time for its calls (a row's "host", measured by the verifier's clock since stop 44), with the row's speedup (on
    each call's cost: `Timing.cost_ms`) and the speedup on device times; and how many rows carry the measure at all
    (older rows do not)."""
    measured, bound = 0, {}
    for row in rows:
        host = row.get("host") or {}
        cand, comp = host.get("candidate"), host.get("compile")
        if not (cand and comp and row.get("runtime_ms") and row.get("compile_ms")):
            continue
        measured += 1
        over = {name: round(h.get("median_ms", time) / h["device_ms"], 3) for name, time, h in  # rows before the
                (("candidate", row["runtime_ms"], cand), ("compile", row["compile_ms"], comp))  # cost: median
                if h.get("median_ms", time) > (1 + margin) * h["device_ms"]}
        if over:
            bound[row["problem"]] = {"median_over_device": over, "speedup_compile": row.get("speedup_compile"),
                                     "speedup_compile_device": round(comp["device_ms"] / cand["device_ms"], 4)}
    return {"rows_measured": measured, "rows": bound}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", type=Path, nargs="+", help="kernelbench.py records of one level, oldest first")
    ap.add_argument("--skip", action="append", default=[], metavar="RECORD:N,...",
                    help="problems (numbers) of a record (its file name) left out: rows the current code no longer "
                         "renders as that record measured them")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    skip: dict[str, set[int]] = {}
    for item in args.skip:
        name, _, numbers = item.partition(":")
        if name not in {p.name for p in args.records} or not numbers:
            raise SystemExit(f"--skip {item!r}: want RECORD:N,... with RECORD one of the records given")
        try:
            skip.setdefault(name, set()).update(int(n) for n in numbers.split(","))
        except ValueError:
            raise SystemExit(f"--skip {item!r}: problem numbers, comma-separated") from None
    out = latest(args.records, skip)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("problems", "fast_1_and_geomeans")}, indent=1))


if __name__ == "__main__":
    main()
