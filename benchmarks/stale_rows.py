"""Which rows of a KernelBench record the current code would not reproduce: for every row of the built-in engineer's
first kernel, that kernel rendered by the row's own code (its `code` commit, taken from git) and by the checkout's,
compared as code (its kernels, the @triton.jit functions, and apart from them the host code that launches them), and,
where only the host code differs, by what it launches at the problem's published sizes. A row whose kernels or
launches changed is stale: its timing is not the current code's, so it is run again (`benchmarks/kernelbench.py
--only ...`) or marked superseded. Nothing runs on a device: the engineer renders on the CPU as it would for a GPU.

The launches: the candidate's forward run on meta tensors of the published sizes, every Triton kernel replaced by
a recorder of its launch (kernel, grid, arguments: tensors by shape, strides and dtype; constexprs and options), in
a process that answers as an H100 would (CUDA available, compute capability 9.0, 132 SMs), so the host takes the
paths it takes on a Hopper GPU (TMA, split-K's SM count). A host-code change the published sizes never reach (a
guard they never meet) launches the same and leaves the row standing; a forward that cannot run on meta tensors
counts as changed.

    python benchmarks/stale_rows.py benchmarks/results/kernelbench-level1-latest-h100-2026-11-27b.json \\
        --suite ../shared/kernelbench/level1 --out stale.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in a fresh interpreter with one code's src first on the path: each problem's first kernel, hashed, and the hash of
# its launches at the published sizes (module docstring), in a process that answers as an H100 would.
RENDER = r'''
import ast, hashlib, json, sys, tempfile, types
from pathlib import Path
import torch
from triton.runtime.jit import JITFunction

H100 = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                             total_memory=80 * 2 ** 30, L2_cache_size=50 * 2 ** 20)
torch.cuda.is_available = lambda: True
torch.cuda.get_device_properties = lambda *args, **kwargs: H100
torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)
torch.cuda.current_device = lambda: 0
torch.Tensor.is_cuda = property(lambda self: True)

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel

def digest(source):
    """Hashes of the kernels (the @triton.jit functions) and of the rest (the host code that launches them)."""
    tree = ast.parse(source)
    jit = [n for n in tree.body if isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)]
    kernels = "\n".join(ast.unparse(n) for n in jit)
    host = "\n".join(ast.unparse(n) for n in tree.body if n not in jit)
    return [hashlib.sha256(t.encode()).hexdigest()[:16] for t in (kernels, host)]

def value(v):
    if isinstance(v, torch.Tensor):
        return [list(v.shape), list(v.stride()), str(v.dtype)]
    return v if isinstance(v, (int, float, str, bool)) or v is None else type(v).__name__

def launches(source, problem):
    """The hash of the kernels the forward launches on meta tensors of the published sizes, or an error."""
    path = Path(tempfile.mkdtemp()) / "candidate.py"
    path.write_text(source)
    module = types.ModuleType("candidate")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    log = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                shape = grid(kwargs) if callable(grid) else grid
                log.append([self.name, [value(g) for g in shape], [value(a) for a in args],
                            {k: value(v) for k, v in kwargs.items()}])
            return launch

    for name, v in list(vars(module).items()):
        if isinstance(v, JITFunction):
            setattr(module, name, Recorder(name))
    scope = {}
    exec(problem.source, scope)
    model = module.ModelNew(*scope["get_init_inputs"]()).to("meta")
    with torch.device("meta"):
        inputs = scope["get_inputs"]()
    with torch.no_grad():
        model(*inputs)
    return hashlib.sha256(json.dumps(log).encode()).hexdigest()[:16]

engineer = BuiltinProposer("cuda")
out = {}
for path in sys.argv[1:]:
    problem = load_problem(path)
    try:
        answer = engineer.ask(Request("implement", problem, "triton"))
        source = parse_kernel(answer.text).source if answer.text else None
    except Exception as exc:  # an old code may not read a problem the way the current one does
        out[problem.name] = f"error: {type(exc).__name__}: {exc}"[:300]
        continue
    if not source:
        out[problem.name] = None
        continue
    try:
        ran = launches(source, problem)
    except Exception as exc:  # a forward that cannot run on meta tensors: its launches are unknown
        ran = f"error: {type(exc).__name__}: {exc}"[:200]
    out[problem.name] = digest(source) + [ran]
print(json.dumps(out))
'''

def renders(src: Path, paths: list[Path]) -> dict[str, str | None]:
    """Each problem's first-kernel hash under the package in `src`."""
    env = {**os.environ, "PYTHONPATH": str(src), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", RENDER, *map(str, paths)], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise RuntimeError(f"rendering under {src} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def src_at(commit: str, into: Path) -> Path:
    """The package's source at `commit`, written under `into`."""
    archive = subprocess.run(["git", "archive", commit, "src"], cwd=ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into / commit, filter="data")
    return into / commit / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record", type=Path, help="a KernelBench record with `rows`, each with `problem` and `code`")
    ap.add_argument("--suite", type=Path, required=True, help="the directory of the record's problem files")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = [r for r in json.loads(args.record.read_text())["rows"] if r.get("candidate") == "builtin"]
    files = {p.stem: p.resolve() for p in args.suite.glob("*.py")}
    missing = sorted(r["problem"] for r in rows if r["problem"] not in files)
    if missing:
        sys.exit(f"not in {args.suite}: {', '.join(missing)}")
    now = renders(ROOT / "src", [files[r["problem"]] for r in rows])
    by_code: dict[str, list[dict]] = {}
    for r in rows:
        # a commit, possibly followed by words on the row's provenance ("5a45f6d (the 21 rows merged from ...)")
        by_code.setdefault((r.get("code") or "unknown").split()[0], []).append(r)
    stale, same, unknown = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for code, group in sorted(by_code.items()):
            try:
                then = renders(src_at(code, Path(tmp)), [files[r["problem"]] for r in group])
            except (subprocess.CalledProcessError, RuntimeError) as exc:
                unknown += [{"problem": r["problem"], "code": code, "why": str(exc)[-300:]} for r in group]
                continue
            for r in group:
                old, new = then.get(r["problem"]), now.get(r["problem"])
                entry = {"problem": r["problem"], "code": code, "speedup_compile": r.get("speedup_compile")}
                if old is None or new is None or str(old).startswith("error") or str(new).startswith("error"):
                    unknown.append({**entry, "why": f"then {old}; now {new}"})
                elif old == new:
                    same.append(entry)
                elif old[0] != new[0]:
                    stale.append({**entry, "changed": "kernels"})
                elif old[2] != new[2] or str(new[2]).startswith("error"):
                    stale.append({**entry, "changed": "launches at the published sizes"
                                  + (f" (unknown: {new[2]})" if str(new[2]).startswith("error") else "")})
                else:  # a host-code change the published sizes never reach
                    same.append({**entry, "host_code_changed": True})
    numbers = [e["problem"].split("_")[0] for e in stale]
    rerun = (f"python benchmarks/kernelbench.py {args.suite} --compile --only {','.join(numbers)} --out OUT.json"
             if numbers else None)
    report = {"record": str(args.record), "head": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                                 capture_output=True, text=True).stdout.strip(),
              "stale": stale, "unchanged": len(same),
              "host_code_changed_same_launches": [e["problem"] for e in same if e.get("host_code_changed")],
              "unknown": unknown, "rerun": rerun}
    print(f"{len(stale)} stale, {len(same)} unchanged, {len(unknown)} unknown of {len(rows)} rows", file=sys.stderr)
    for e in stale:
        print(f"  stale: {e['problem']} (row of {e['code']}, {e['speedup_compile']}x torch.compile; {e['changed']})",
              file=sys.stderr)
    for e in unknown:
        print(f"  unknown: {e['problem']}: {e['why'][:160]}", file=sys.stderr)
    if rerun:
        print(f"the stale rows, timed again: {rerun}", file=sys.stderr)
    text = json.dumps(report, indent=1) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
