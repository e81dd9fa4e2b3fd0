"""kernelcraft.api end to end on the CPU: evaluate, optimize, bench, problems, report, export, and the
README's examples; bad input raised as one-line KernelcraftErrors before anything runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import kernelcraft
from kernelcraft import api
from kernelcraft.candidate import CandidateError
from kernelcraft.errors import ConfigError, KernelcraftError
from kernelcraft.problems import ProblemError
from kernelcraft.problems.problem import SUITE_ROOT
from kernelcraft.store import Store, StoreError
from tests.helpers import FIXTURES, REPO

RELU = (FIXTURES / "relu_triton.py").read_text()
RELU_PROBLEM = (SUITE_ROOT / "level1" / "relu.py").read_text()


def quick(tmp_path) -> dict:
    """Verifier options that keep a CPU evaluation short."""
    return {"device": "cpu", "compile_baseline": False, "timing_budget": 0.3, "cache_dir": tmp_path / "cache"}


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text
    return text


@pytest.mark.slow
def test_evaluate_a_file_and_source_text(tmp_path):
    from_file = api.evaluate("level1/relu", FIXTURES / "relu_triton.py", sizes={"batch_size": 5}, trials=2,
                             **quick(tmp_path))
    assert from_file.status == "ok" and from_file.correct and from_file.backend == "triton"
    assert from_file.sizes["constants"] == {"batch_size": 5, "dim": 1000}
    assert from_file.runtime_ms > 0 and from_file.candidate == "relu_triton"

    # problem and candidate both as text; the top-level name is the same function
    from_text = kernelcraft.evaluate(RELU_PROBLEM, RELU, sizes="batch_size=4,dim=64", trials=2, **quick(tmp_path))
    assert from_text.status == "ok" and from_text.problem == "problem" and from_text.candidate == "candidate"
    assert from_text.sizes["constants"] == {"batch_size": 4, "dim": 64}


@pytest.mark.slow
def test_evaluate_says_a_wrong_kernel_is_wrong(tmp_path):
    result = api.evaluate("level1/relu", FIXTURES / "relu_wrong_math.py", trials=2, **quick(tmp_path))
    assert result.status == "incorrect" and not result.correct and result.message


def test_evaluate_refuses_bad_input_before_running(tmp_path):
    with pytest.raises(ProblemError, match="no problem file or suite problem named 'level1/nope'") as exc:
        api.evaluate("level1/nope", RELU, **quick(tmp_path))
    one_line(exc.value)
    with pytest.raises(CandidateError, match="syntax error") as exc:
        api.evaluate("level1/relu", "class ModelNew:\n    def forward(self, x) return x\n", **quick(tmp_path))
    one_line(exc.value)
    with pytest.raises(CandidateError, match="defines no `class ModelNew`"):
        api.evaluate("level1/relu", "just some\ntext", **quick(tmp_path))
    with pytest.raises(ProblemError, match="problem source:2: syntax error"):
        api.evaluate("class Model:\n  not python (\n", RELU, **quick(tmp_path))
    with pytest.raises(CandidateError, match="no bundled example 'nope'"):
        api.evaluate("level1/relu", "example:nope", **quick(tmp_path))
    with pytest.raises(ConfigError, match="--trials must be from 1 to 1000, got 0"):
        api.evaluate("level1/relu", RELU, trials=0, **quick(tmp_path))
    with pytest.raises(ConfigError, match="--trials must be from 1 to 1000, got 1000000"):
        api.evaluate("level1/relu", RELU, trials=1_000_000, **quick(tmp_path))
    with pytest.raises(ConfigError, match="no module-level constant .batch_sise. in level1/relu"):
        api.evaluate("level1/relu", RELU, sizes={"batch_sise": 3}, **quick(tmp_path))
    assert issubclass(CandidateError, KernelcraftError) and issubclass(StoreError, KernelcraftError)


@pytest.fixture(scope="module")
def relu_run(tmp_path_factory):
    """One small run of the built-in engineer on level1/relu, in a store of its own."""
    root = tmp_path_factory.mktemp("api-run")
    events = []
    outcome = api.optimize("level1/relu", device="cpu", rounds=1, sizes={"batch_size": 5}, store=root / "runs.db",
                           out_dir=root / "out", cache_dir=root / "cache", compile_baseline=False,
                           timing_budget=0.3, on_event=lambda kind, data: events.append(kind))
    return root, outcome, events


@pytest.mark.slow
def test_optimize_with_the_builtin_engineer(relu_run):
    root, outcome, events = relu_run
    assert outcome.status == "done" and outcome.proposer == "builtin" and outcome.strategy == "tree"
    assert outcome.best.result.status == "ok" and outcome.best.backend == "triton"
    assert outcome.best_file and "class ModelNew" in open(outcome.best_file).read()
    assert "round" in events and "candidate" in events
    store = Store(root / "runs.db")
    try:
        row = store.run(outcome.run_id)
        assert row.status == "done" and row.config["verify"]["size_overrides"] == {"batch_size": 5}
    finally:
        store.close()
    assert json.loads(json.dumps(outcome.to_dict()))["run_id"] == outcome.run_id


@pytest.mark.slow
def test_report_and_export_of_a_run(relu_run, tmp_path):
    root, outcome, _ = relu_run
    report = api.report(outcome.run_id[:17], store=root / "runs.db")
    assert report["kind"] == "run" and report["run"]["run_id"] == outcome.run_id
    both = api.report(outcome.run_id, outcome.run_id, store=root / "runs.db")
    assert both["kind"] == "compare_runs"

    exported = api.export(outcome.run_id, "trajectories", store=root / "runs.db")
    assert exported.path is None and len(exported.rows) == outcome.counters.candidates
    assert {r["status"] for r in exported.rows} >= {"ok"}
    written = api.export([outcome.run_id], "trajectories", store=root / "runs.db", out=tmp_path / "steps.jsonl",
                         correct_only=True)
    lines = (tmp_path / "steps.jsonl").read_text().splitlines()
    assert written.summary()["rows"] == len(lines) >= 1 and written.format == "jsonl"
    with pytest.raises(KernelcraftError, match="exists; pass --force"):
        api.export(outcome.run_id, "trajectories", store=root / "runs.db", out=tmp_path / "steps.jsonl")


@pytest.mark.slow
def test_a_stored_run_its_candidates_and_their_sources(relu_run):
    root, outcome, _ = relu_run
    db = root / "runs.db"
    assert [r["id"] for r in api.runs(store=db)] == [outcome.run_id]
    summary = api.run_summary(outcome.run_id[:17], store=db)
    assert summary.run_id == outcome.run_id and len(summary.candidates) == outcome.counters.candidates
    assert summary.best.result == outcome.best.result  # the stored Result, typed, as the run returned it
    first = summary.candidates[0]
    assert {"key", "round", "status", "runtime_ms", "speedup_eager", "idea", "category", "backend"} <= set(first)
    assert any(c["idea"] for c in summary.candidates)  # the built-in engineer's moves, in words
    cand = api.candidate(outcome.run_id, first["key"], store=db)
    assert cand["key"] == first["key"] and cand["status"] == first["status"] and "class ModelNew" in cand["source"]
    with pytest.raises(StoreError, match=f"no candidate 'nope' in run {outcome.run_id} \\(its keys: "):
        api.candidate(outcome.run_id, "nope", store=db)


def test_report_and_export_refuse_what_is_not_there(tmp_path):
    with pytest.raises(StoreError, match="no run store at"):
        api.report("20990101", store=tmp_path / "none.db")
    Store(tmp_path / "runs.db").close()
    with pytest.raises(StoreError, match="no run '20990101' in"):
        api.report("20990101", store=tmp_path / "runs.db")
    with pytest.raises(ConfigError, match="give one RUN, or two"):
        api.report("a", "b", "c", store=tmp_path / "runs.db")
    with pytest.raises(KernelcraftError, match="unknown"):
        api.export("20990101", "sft", store=tmp_path / "runs.db", categories=["nonsense"])


def test_optimize_refuses_bad_settings_before_a_run(tmp_path):
    db = tmp_path / "runs.db"
    with pytest.raises(ConfigError, match="unknown strategy 'beam'") as exc:
        api.optimize("level1/relu", strategy="beam", device="cpu", store=db)
    one_line(exc.value)
    with pytest.raises(ConfigError, match="the built-in engineer gives one answer per request"):
        api.optimize("level1/relu", strategy="sample", device="cpu", store=db)
    with pytest.raises(ConfigError, match="the built-in engineer writes"):
        api.optimize("level1/relu", backend="cpp", device="cpu", store=db)
    with pytest.raises(ConfigError, match="unknown option 'round'"):
        api.optimize("level1/relu", round=1, device="cpu", store=db)
    with pytest.raises(ConfigError, match="rounds must be at least 1"):
        api.optimize("level1/relu", rounds=0, device="cpu", store=db)
    with pytest.raises(ConfigError, match="the built-in engineer costs nothing; --max-usd applies to a model"):
        api.optimize("level1/relu", max_usd=1.0, device="cpu", store=db)  # not a budget silently ignored
    with pytest.raises(ConfigError, match="the built-in engineer costs nothing"):
        api.bench("level1", only="relu", max_usd=1.0, device="cpu", store=db)
    with pytest.raises(ConfigError, match="PROBLEM .* is required"):
        api.optimize(device="cpu", store=db)
    with pytest.raises(ProblemError, match="no problem file"):
        api.optimize("level9/none", device="cpu", store=db)
    store = Store(db)
    try:
        assert store.runs() == []  # nothing started
    finally:
        store.close()


@pytest.mark.slow
def test_bench_over_a_list_of_problems(tmp_path):
    summary = api.bench(["level1/relu", FIXTURES / "problems" / "relu_too_large.py"], device="cpu", rounds=1,
                        max_candidates=1, store=tmp_path / "runs.db", cache_dir=tmp_path / "cache",
                        compile_baseline=False, timing_budget=0.3, sizes={"batch_size": 5})
    rows = {r["problem"]: r for r in summary["rows"]}
    assert rows["level1/relu"]["correct"] and rows["level1/relu"]["candidates"] == 1
    assert summary["metrics"] and summary["bench_id"].startswith("bench-")
    assert api.report(summary["bench_id"], store=tmp_path / "runs.db")["kind"] == "bench"


def test_bench_refuses_an_empty_selection(tmp_path):
    with pytest.raises(ConfigError, match="no problems in 'level1' match"):
        api.bench("level1", only="no_such_problem", device="cpu", store=tmp_path / "runs.db")
    with pytest.raises(ConfigError, match="no problem here has a module-level constant 'nope'"):
        api.bench(["level1/relu"], sizes={"nope": 1}, device="cpu", store=tmp_path / "runs.db")


def test_problems_lists_the_suite_and_a_directory(tmp_path):
    level1 = api.problems(level=1)
    relu = next(p for p in level1 if p["name"] == "level1/relu")
    assert relu == {"name": "level1/relu", "level": 1, "summary": "ReLU activation: y = max(x, 0)."}
    assert all(p["level"] == 1 for p in level1) and len(api.problems()) > len(level1)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "relu.py").write_text(RELU_PROBLEM)
    assert [p["name"] for p in api.problems(directory=tmp_path / "mine")] == ["relu"]
    with pytest.raises(ProblemError, match="is not a directory"):
        api.problems(directory=tmp_path / "none")


def test_import_kernelcraft_stays_cheap():
    code = "import sys, kernelcraft; print('torch' in sys.modules, kernelcraft.evaluate.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")}).stdout.split()
    assert out == ["False", "kernelcraft.api"]


def readme_examples() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Using kernelcraft from Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 3
    return "\n\n".join(blocks)


@pytest.mark.slow
def test_the_readme_examples_run(tmp_path):
    """The README's Python examples as written, in a fresh interpreter whose home and store are temporary."""
    home = tmp_path / "home"
    env = {**os.environ, "HOME": str(home), "KERNELCRAFT_HOME": str(tmp_path / "kc" / "runs.db"),
           "PYTHONPATH": str(REPO / "src")}
    env.pop("KERNELCRAFT_MODEL", None)
    proc = subprocess.run([sys.executable, "-c", readme_examples()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ok ")
    assert " done " in lines[1] and "kernels/relu_" in lines[1]
    assert any(line.startswith("level1/") for line in lines[2:])
    assert (tmp_path / "kc" / "runs.db").is_file() and (tmp_path / "my_relu.py").is_file()
