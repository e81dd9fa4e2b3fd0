"""Classes 23 (build-step escape) and 24 (cache poisoning) of ../shared/REWARD_HACKS.md against the CPU verifier.

The cheats attack the harness's files and the caches later verdicts rest on, so they run against a copy: each
scenario is a subprocess whose kernelcraft is a copy of the package in the test's own directory (PYTHONPATH), with
HOME there too (the default cache path and the user's key), so a defence that fails damages the copy, never the
checkout. The scenario writes what it saw as JSON; the tests judge it.

- c24 (a Triton candidate, at call time in its worker) forges the baselines, the RL scorer's verdicts and the build
  outcomes it can find. With namespaces the trusted directory is hidden from it: later lookups return the genuine
  entries. Without (KERNELCRAFT_NO_SANDBOX), it writes them, and they do not authenticate: measured and judged
  again, and counted.
- c23 (a C++ candidate, at import, in the build step) rewrites kernelcraft's timing module and the baselines.
  With namespaces its writes fail and the honest candidate after it is judged as before; without, the rewrite is
  seen while the build runs, the build killed, and that evaluation and every later one is `harness_tampered`, as
  `kernelcraft eval` says with exit status 1.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelcraft.verify.containment import can_hide

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
SRC = HERE.parent.parent / "src"

NAMESPACES = pytest.mark.skipif(not can_hide(), reason="no user and mount namespace on this machine")

SCENARIO = r'''
import hashlib, json, sys
from pathlib import Path

from kernelcraft.candidate import Candidate
from kernelcraft.export.rl import DATA_SOURCE
from kernelcraft.problems import load_problem
from kernelcraft.rl import RewardShape, Scorer
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig

scenario, fixtures, cache, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
config = VerifyConfig(small=True, compile_baseline=False, trials=3, cache_dir=cache,
                      timing=TimingConfig(budget_s=0.2, min_samples=5))
relu = load_problem("level1/relu")
source = lambda name: (fixtures / f"{name}.py").read_text()


def seen(r):
    if r is None:
        return {"status": None}
    return {"status": str(r.status), "reasons": r.reasons, "message": r.message[:300], "speedup": r.speedup_eager,
            "eager_ms": r.eager.median_ms if r.eager else None, "baseline_cached": r.baseline_cached,
            "notes": r.notes, "containment_notes": (r.containment or {}).get("notes", [])}


def inline_hashes():
    return {str(p.relative_to(cache)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((cache / "inline").rglob("*.so"))}


report = {}
with Verifier("cpu", config, build_workers=1) as verifier:
    if scenario == "verdicts":
        row = {"data_source": DATA_SOURCE, "prompt": [], "ability": "kernel",
               "reward_model": {"style": "rule", "ground_truth": relu.source},
               "extra_info": {"index": 0, "problem": "level1/relu", "backend": "triton", "device": "cpu",
                              "policy": {"name": "strict", "fp32": 1e-4, "fp16_bf16": 1e-2, "allow_tf32": False},
                              "small": True, "trials": 3, "timing_budget_s": 0.2, "compile_baseline": False}}
        zeros = sys.argv[5]
        answer = lambda src: f"Here is the kernel.\n\n```python\n{src}```\n"
        with Scorer(verifier, shape=RewardShape(min_speedup=1e-6, speed_weight=0.05), cache_dir=cache) as scorer:
            for label, src in (("honest", source("c24_cache_poisoning_honest")),
                               ("cheat", source("c24_cache_poisoning_cheat")),
                               ("honest_again", source("c24_cache_poisoning_honest")), ("zeros", zeros)):
                s = scorer.score(row, answer(src))
                report[label] = {"tier": s.tier, "cached": s.cached, "parse_error": s.parse_error, **seen(s.result)}
            report["untrusted_verdicts"] = getattr(scorer._cache, "untrusted", None)
        report["evaluate"] = seen(verifier.evaluate(relu, Candidate(source("c24_cache_poisoning_honest"), "h")))
    elif scenario == "builds":
        honest = Candidate(source("c23_build_escape_honest"), "c23_honest")
        report["honest"] = seen(verifier.evaluate(relu, honest))
        report["inline_before"] = inline_hashes()
        report["c23"] = seen(verifier.evaluate(relu, Candidate(source("c23_build_escape_cheat"), "c23_cheat")))
        report["c24"] = seen(verifier.evaluate(relu, Candidate(source("c24_cache_poisoning_cheat"), "c24_cheat")))
    elif scenario == "tamper":
        report["c23"] = seen(verifier.evaluate(relu, Candidate(source("c23_build_escape_cheat"), "c23_cheat")))
        report["after"] = seen(verifier.evaluate(relu, Candidate(source("c24_cache_poisoning_honest"), "h")))
    trust = getattr(verifier, "trust", None)
    report["trust"] = {"shared": trust.shared, "refused": dict(trust.rejected), "note": trust.note} if trust else None
if scenario == "builds":
    with Verifier("cpu", config) as later:  # as a later process: its outcome record, build, baseline from the cache
        report["honest_again"] = seen(later.evaluate(relu, Candidate(source("c23_build_escape_honest"), "c23")))
        refused = dict(later.trust.rejected) if getattr(later, "trust", None) else None
    report["inline_after"] = inline_hashes()
    report["later_refused"] = refused
out.write_text(json.dumps(report))
'''


def zeros_kernel() -> str:
    """The zeros kernel the c24 cheat plants a verdict for (its ZEROS constant)."""
    tree = ast.parse((FIXTURES / "c24_cache_poisoning_cheat.py").read_text())
    value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and getattr(node.targets[0], "id", "") == "ZEROS")
    return value.func.value.value.replace("class Zeros(", "class ModelNew(")  # the text, then its .replace()


def authentic_baselines(copy: Path) -> int:
    """How many baselines the scenario's cache holds, after checking that each opens with the user's key (in the
    scenario's home)."""
    from kernelcraft.verify.baselines import KIND
    from kernelcraft.verify.trust import Trust

    trust = Trust(copy / "cache" / "trusted", shared=True, key_directory=copy / "home" / ".cache" / "kernelcraft" /
                  "trusted")
    data = json.loads((copy / "cache" / "trusted" / "baselines.json").read_text())
    assert all(trust.open_json(KIND, key, sealed) is not None for key, sealed in data.items()), data
    return len(data)


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of kernelcraft's package (what the scenario imports and the cheats find), a home and a cache."""
    shutil.copytree(SRC / "kernelcraft", tmp_path / "src" / "kernelcraft",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d in ("home", "work", "cache"):
        (tmp_path / d).mkdir()
    (tmp_path / "scenario.py").write_text(SCENARIO)
    return tmp_path


def environment(copy: Path, sandbox: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCRAFT_")}
    env.update(PYTHONPATH=str(copy / "src"), HOME=str(copy / "home"))
    if not sandbox:
        env["KERNELCRAFT_NO_SANDBOX"] = "1"
    return env


def run(copy: Path, scenario: str, sandbox: bool = True, timeout: float = 600) -> dict:
    out = copy / f"{scenario}.json"
    proc = subprocess.run([sys.executable, str(copy / "scenario.py"), scenario, str(FIXTURES), str(copy / "cache"),
                           str(out), zeros_kernel()], cwd=copy / "work", env=environment(copy, sandbox),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_every_new_class_has_a_cheat_and_an_honest_twin():
    for n, name in ((23, "build-step escape"), (24, "cache poisoning")):
        files = sorted(FIXTURES.glob(f"c{n}_*.py"))
        assert {p.stem.rsplit("_", 1)[1] for p in files} == {"cheat", "honest"}
        for path in files:
            first = path.read_text().splitlines()[0]
            assert first.startswith(f"# Hack class {n} ({name}) - "), path.name
            assert ("CHEAT" in first) == path.stem.endswith("_cheat"), path.name


@NAMESPACES
def test_forged_verdicts_baselines_and_outcomes_never_reach_a_later_lookup(copy):
    before = tree_digest(copy / "src" / "kernelcraft")
    seen = run(copy, "verdicts")
    honest, again, zeros = seen["honest"], seen["honest_again"], seen["zeros"]
    assert honest["status"] == "ok" and not honest["cached"], honest
    assert seen["cheat"]["status"] == "ok", seen["cheat"]  # it computes ReLU; its writes went nowhere
    # the honest kernel's verdict is the genuine one (a cache hit on what the verifier wrote), not 9.5x
    assert again["cached"] and again["speedup"] == honest["speedup"] and honest["speedup"] < 9, again
    # the zeros kernel was never planted: it is judged, and wrong
    assert not zeros["cached"] and zeros["status"] == "incorrect" and zeros["speedup"] is None, zeros
    # nothing it wrote reached the trusted caches: nothing was refused, every stored baseline is one measured
    assert seen["trust"]["shared"] and not seen["trust"]["refused"] and seen["untrusted_verdicts"] == 0
    assert not any(n.startswith("untrusted_cache") for r in seen.values() if isinstance(r, dict) and "notes" in r
                   for n in r["notes"])
    assert authentic_baselines(copy)
    # what it wrote landed where nothing reads it (the old paths, in the cache the worker may write)
    assert not (copy / "cache" / "rl_verdicts.sqlite").exists()
    assert tree_digest(copy / "src" / "kernelcraft") == before


def test_without_namespaces_forged_entries_do_not_authenticate(copy):
    """The trusted directory is writable here, and the cheat writes it: nothing it wrote is believed."""
    seen = run(copy, "verdicts", sandbox=False)
    honest, again, zeros = seen["honest"], seen["honest_again"], seen["zeros"]
    assert not seen["trust"]["shared"] and "only entries this process wrote are trusted" in seen["trust"]["note"]
    assert any("only entries this process wrote" in n for n in honest["containment_notes"]), honest
    assert seen["untrusted_verdicts"] >= 1  # the forged rows were found, and refused
    assert not again["cached"] and again["status"] == "ok" and again["speedup"] < 9, again  # judged again
    assert not zeros["cached"] and zeros["status"] == "incorrect", zeros
    # the 4x baseline was refused at the next lookup (the cheat's own timing: it poisons on its first call), said
    # there, and measured again
    assert seen["trust"]["refused"].get("baseline", 0) >= 1
    assert any(n.startswith("untrusted_cache") for n in seen["cheat"]["notes"]), seen["cheat"]


def test_a_harness_rewritten_from_the_build_step_stops_the_verifier(copy):
    """Without namespaces the c23 cheat's build rewrites the copy's timing module: the build is killed when the
    check sees it, and that evaluation and the next one are refused, naming the file."""
    seen = run(copy, "tamper", sandbox=False)
    timing = (copy / "src" / "kernelcraft" / "verify" / "timing.py").read_text()
    assert "C23_TAMPERED" in timing  # the attack did land: the verifier is what must notice
    for label in ("c23", "after"):
        r = seen[label]
        assert r["status"] == "verifier_error" and r["reasons"] == ["harness_tampered"], r
        assert "kernelcraft/verify/timing.py was rewritten" in r["message"], r


def test_eval_says_the_harness_changed_and_exits_1(copy):
    env = environment(copy, sandbox=False)
    proc = subprocess.run([sys.executable, "-m", "kernelcraft.cli", "eval", "level1/relu",
                           str(FIXTURES / "c23_build_escape_cheat.py"), "--device", "cpu", "--cache-dir",
                           str(copy / "cache"), "--budget", "0.2", "--trials", "2", "--no-compile-baseline"],
                          cwd=copy / "work", env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("kernelcraft eval: the harness changed: kernelcraft/verify/timing.py was rewritten")


@NAMESPACES
@pytest.mark.slow
def test_a_build_step_and_a_worker_that_attack_the_caches_change_no_later_verdict(copy):
    """c23 at build time, then c24 in its worker, against a C++ candidate's build, outcome record and baseline, which
    a later verifier (another process) reads."""
    before = tree_digest(copy / "src" / "kernelcraft")
    seen = run(copy, "builds")
    honest, again = seen["honest"], seen["honest_again"]
    assert honest["status"] == "ok" and again["status"] == "ok", (honest, again)
    assert seen["c23"]["status"] == "ok" and seen["c24"]["status"] == "ok", (seen["c23"], seen["c24"])
    assert not seen["trust"]["refused"] and not seen["later_refused"]  # nothing forged reached the trusted caches
    assert authentic_baselines(copy)
    # the honest build's extension, which c24 overwrote in its worker where it could
    assert seen["inline_before"] and all(seen["inline_after"].get(k) == v for k, v in seen["inline_before"].items())
    assert not seen["trust"]["refused"], seen["trust"]
    assert tree_digest(copy / "src" / "kernelcraft") == before  # the harness the build step tried to rewrite
