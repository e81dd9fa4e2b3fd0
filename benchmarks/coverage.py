"""What the built-in engineer covers of KernelBench, by analysis only (no kernel is rendered or run, no device):
per problem covered or the CoverageError's message, per level the count, and two histograms of the reasons for the
problems not covered, each reason normalised to the op it names: every op named (a problem missing two ops counts
once for each; an op fed by one not covered is named too, so this over-counts common ops such as add and relu), and
the first op named per problem (the one that blocks it first in forward order).

    python benchmarks/coverage.py --out benchmarks/results/coverage-2026-11-24.json
    python benchmarks/coverage.py ../shared/kernelbench/level2 --backend triton --out OUT.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import subprocess
import warnings
from pathlib import Path

from kernelcraft.problems import load_problem_dir
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [ROOT.parent / "shared" / "kernelbench" / f"level{n}" for n in (1, 2, 3)]


def reasons(message: str) -> list[str]:
    """The ops (or causes) a CoverageError's message names, each as one short key."""
    if m := re.search(r"cannot trace \S+: (.+?), which torch\.fx", message):
        return [f"untraceable: {m.group(1)}"]
    if m := re.search(r"could not read \S+: (\w+)(?::\s*(.*))?", message):
        detail = (m.group(2) or "").split(":")[0].strip()
        return [f"error: {m.group(1)}" + (f" ({detail[:60]})" if detail and m.group(1) == "analysis" else "")]
    if "only views" in message:
        return ["only views"]
    if m := re.search(r"cannot cover \S+: (.+)$", message):
        return [_key(part) for part in m.group(1).split(", ")]
    if m := re.search(r"has no \w+ kernels for (.+?) \(", message):
        return [f"no kernels: {part}" for part in m.group(1).split(", ")]
    return [message[:80]]


def _key(part: str) -> str:
    """A named op, with what varies between problems (the attribute a number is computed from) left out."""
    return re.sub(r"self\.\S+", "self.<attr>", part.strip())


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def number(name: str) -> int:
    stem = name.split("/")[-1]
    return int(stem.split("_")[0]) if stem[0].isdigit() else 0


def _ranked(counter: collections.Counter) -> dict:
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def survey(dirs: list[Path], backend: str, sha: str | None = None) -> dict:
    engineer = BuiltinProposer("cpu")
    rows, levels, histogram, first = [], {}, collections.Counter(), collections.Counter()
    for root in dirs:
        problems = sorted(load_problem_dir(root), key=lambda p: number(p.name))
        covered = 0
        for problem in problems:
            try:
                analysis = engineer.coverage(problem, backend)
            except CoverageError as exc:
                why = reasons(str(exc))
                histogram.update(why)
                first[why[0]] += 1
                rows.append({"level": root.name, "problem": problem.name, "covered": False, "reason": str(exc), "keys": why})
                continue
            covered += 1
            kinds = [analysis.single.kind] if analysis.single else [op.kind for op in analysis.chain]
            rows.append({"level": root.name, "problem": problem.name, "covered": True, "kinds": kinds})
        levels[root.name] = {"covered": covered, "problems": len(problems)}
        print(f"{root.name}: {covered}/{len(problems)}", flush=True)
    return {"date": datetime.date.today().isoformat(), "commit": sha or commit(), "device": "none (analysis only)",
            "backend": backend, "levels": levels, "uncovered_first_reason": _ranked(first),
            "uncovered_reasons": _ranked(histogram), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", type=Path, nargs="*", default=DEFAULT, help="KernelBench level directories")
    ap.add_argument("--backend", default="triton")
    ap.add_argument("--commit", default=None, help="the kernelcraft commit analysed, when not this checkout's HEAD")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # the references' own warnings (nested tensors, meshgrid) say nothing here
    record = survey(args.dirs, args.backend, args.commit)
    print("first op not covered, per problem:")
    for key, count in list(record["uncovered_first_reason"].items())[:30]:
        print(f"{count:4d}  {key}")
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
