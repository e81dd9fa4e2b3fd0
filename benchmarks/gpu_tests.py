"""Runs test suites on a GPU machine in parallel shards, each shard's output in its own log file, so a
shard that runs out of time still leaves what it did.

    OUT=/tmp/out python benchmarks/gpu_tests.py --shards 3 --limit 540 tests/propose/builtin -- -m "not slow"
    OUT=/tmp/out python benchmarks/gpu_tests.py --name gpu-marked --shards 1 tests -- -m gpu
    OUT=/tmp/out python benchmarks/gpu_tests.py --by-test --shards 8 tests/propose/builtin/test_every_move_gpu.py

Files are dealt to the shards by their collected test counts (largest first, each to the lightest shard), or,
with --by-test, single tests in collection order.
Each log opens with the device, torch and Triton versions and the date; a summary of every shard's last
line is printed and written to `<name>-summary.txt`.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path


def collect(paths: list[str], extra: list[str], by_test: bool = False) -> dict[str, int]:
    """Test counts per file, as pytest collects them under the same options (by_test: each test id alone, so the
    tests of one long file are dealt to several shards)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *extra, *paths],
                          capture_output=True, text=True)
    counts: collections.Counter[str] = collections.Counter()
    for line in proc.stdout.splitlines():
        if "::" in line:
            counts[line.strip() if by_test else line.split("::", 1)[0]] += 1
    if not counts:
        sys.exit(f"nothing collected from {paths}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return dict(counts)


def deal(counts: dict[str, int], shards: int) -> list[list[str]]:
    loads = [0] * shards
    out: list[list[str]] = [[] for _ in range(shards)]
    for path, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        k = loads.index(min(loads))
        out[k].append(path)
        loads[k] += n
    return [s for s in out if s]


def header() -> str:
    import torch
    try:
        import triton
        tv = triton.__version__
    except ImportError:
        tv = "none"
    dev = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return f"# on {dev}, torch {torch.__version__}, Triton {tv}, {datetime.date.today().isoformat()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--limit", type=float, default=540.0, help="seconds before every shard still running is stopped")
    ap.add_argument("--name", default="gpu-tests")
    ap.add_argument("--per-test-timeout", type=int, default=240)
    ap.add_argument("--by-test", action="store_true", help="deal single tests, not files, to the shards")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after "--": pytest's own options, for every shard
    args, extra = ap.parse_known_args(argv[:cut])
    extra += argv[cut + 1:]
    out = Path(os.environ.get("OUT", "/tmp/kc-out"))
    out.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("pytest_timeout"):
        extra += [f"--timeout={args.per_test_timeout}"]
    shards = deal(collect(args.paths, extra, args.by_test), args.shards)
    head = header()
    procs = []
    for k, files in enumerate(shards):
        log = out / f"{args.name}-shard{k}.log"
        with log.open("w") as f:
            f.write(f"{head}\n# pytest -rf {' '.join(extra)} {' '.join(files)}\n")
        fh = log.open("a")
        procs.append((log, fh, subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider",
                                                 *extra, *files], stdout=fh, stderr=subprocess.STDOUT)))
    t0 = time.monotonic()
    while any(p.poll() is None for _, _, p in procs) and time.monotonic() - t0 < args.limit:
        time.sleep(2)
    lines = [head]
    for log, fh, p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
            fh.write(f"\n# stopped after {args.limit:.0f} s\n")
        fh.close()
        tail = [x for x in log.read_text().splitlines() if x.strip()]
        lines.append(f"{log.name}: rc {p.returncode}: {tail[-1] if tail else '(empty)'}")
        lines += [x for x in tail if x.startswith(("FAILED", "ERROR"))]
    summary = "\n".join(lines)
    print(summary)
    (out / f"{args.name}-summary.txt").write_text(summary + "\n")


if __name__ == "__main__":
    main()
