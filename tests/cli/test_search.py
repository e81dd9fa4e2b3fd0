"""`kernelcraft run`, `bench` and `runs` from the command line, against a scripted chat server."""

from __future__ import annotations

import json
import shutil
from unittest.mock import ANY

import pytest

from kernelcraft.cli import main
from kernelcraft.problems.problem import SUITE_ROOT
from kernelcraft.store import Store
from tests.helpers import FIXTURES
from tests.llm_server import Reply, Rule, ScriptedLLMServer
from tests.search.conftest import FAST, code


@pytest.fixture(scope="module")
def server():
    with ScriptedLLMServer([Rule("Write a custom kernel", [Reply(code(FAST))])]) as s:
        yield s


def common(server, tmp_path) -> list[str]:
    return ["--model", "scripted-model", "--base-url", server.url + "/v1", "--device", "cpu",
            "--store", str(tmp_path / "runs.db"), "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
            "--no-compile-baseline", "--timing-budget", "0.2", "--strategy", "sample", "--samples", "1"]


def last_json(capsys) -> object:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_run_then_runs_list_and_show(server, tmp_path, capsys):
    assert main(["run", "level1/relu", *common(server, tmp_path), "--sizes", "batch_size=5", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert len(captured.out.strip().splitlines()) == 1  # stdout: the summary alone
    assert captured.err.splitlines()[0] == "level1/relu: SMALL_SIZES+user sizes batch_size=5, dim=1000 (full: 4096, 16384)"
    assert summary["status"] == "done" and summary["best"]["result"]["status"] == "ok"
    assert summary["best"]["result"]["sizes"]["constants"] == {"batch_size": 5, "dim": 1000}
    best_file = tmp_path / "out" / f"relu_{summary['run_id']}.py"
    assert summary["best_file"] == str(best_file) and "class ModelNew" in best_file.read_text()

    assert main(["runs", "list", "--store", str(tmp_path / "runs.db"), "--json"]) == 0
    rows = last_json(capsys)
    assert [r["id"] for r in rows] == [summary["run_id"]] and rows[0]["candidates"] == 1
    assert main(["runs", "show", summary["run_id"][:17], "--store", str(tmp_path / "runs.db"), "--json"]) == 0
    shown = last_json(capsys)
    assert shown["best"]["key"] == "s/000" and shown["trajectory"][0]["correct"] == 1

    assert main(["runs", "show", summary["run_id"], "--store", str(tmp_path / "runs.db")]) == 0
    text = capsys.readouterr().out
    assert summary["run_id"] in text and "best kernel by round" in text
    # its candidates, as its help says: key, round, status, time, speedup, idea; and a candidate's source
    assert "candidates (1)" in text and any(line.split()[1:6] == ["s/000", "│", "1", "│", "ok"] for line in text.splitlines()
                                             if line.startswith("│")), text
    assert shown["candidates"] == [{"key": "s/000", "round": 1, "status": "ok", "speedup_eager": ANY,
                                    "runtime_ms": ANY, "category": None, "idea": None, "backend": "triton"}]
    assert main(["runs", "show", summary["run_id"], "--source", "s/000", "--store", str(tmp_path / "runs.db")]) == 0
    source = capsys.readouterr().out
    assert "class ModelNew" in source
    assert main(["runs", "show", summary["run_id"], "--source", "s/000", "--json",
                 "--store", str(tmp_path / "runs.db")]) == 0
    candidate = last_json(capsys)
    assert candidate["key"] == "s/000" and candidate["status"] == "ok" and candidate["source"].rstrip("\n") == source.rstrip("\n")
    assert main(["runs", "show", summary["run_id"], "--source", "r09/x", "--store", str(tmp_path / "runs.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"kernelcraft runs: no candidate 'r09/x' in run {summary['run_id']} (its keys: s/000)"


@pytest.mark.slow
def test_bench_reports_fast_p_over_a_directory(server, tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(SUITE_ROOT / "level1" / "relu.py", suite / "relu.py")
    shutil.copy(SUITE_ROOT / "level1" / "sigmoid.py", suite / "sigmoid.py")  # a ReLU kernel is wrong here
    assert main(["bench", str(suite), *common(server, tmp_path), "--json"]) == 0
    summary = last_json(capsys)
    rows = {r["problem"]: r for r in summary["rows"]}
    assert rows["relu"]["correct"] and not rows["sigmoid"]["correct"]
    m = summary["metrics"]
    assert m["problems"] == 2 and m["correct"] == 1 and m["fast_p_eager"]["0"] == 0.5
    assert set(m["fast_p_eager"]) == {"0", "1", "1.5", "2"} and set(m["fast_p_compile"]) == {"0", "1", "1.5", "2"}


@pytest.mark.parametrize("argv, words", [
    (["run", str(FIXTURES / "problems" / "spectrum.py"), "--device", "cpu"],
     "the built-in engineer cannot cover spectrum: fft_rfft"),
    (["run", "level1/relu", "--device", "cpu", "--strategy", "sample"], "use tree or refine"),
    (["run", "level1/relu", "--device", "cpu", "--backend", "cpp"], "the built-in engineer writes"),
    (["run", "level1/relu", "--device", "cpu", "--backend", "gluon", "--model", "vllm/m"],
     "--backend gluon: a gluon candidate needs a CUDA device, and this run judges on cpu"),
    (["run", "--resume", "nope", "--model", "x/y", "--base-url", "http://127.0.0.1:9"], "no run 'nope'"),
    (["run", "level1/relu", "--resume", "abc"], "either PROBLEM or --resume"),
    (["run"], "PROBLEM"),
    (["run", "level1/relu", "--strategy", "beam", "--model", "vllm/m", "--device", "cpu"], "unknown strategy"),
    (["run", "level1/relu", "--rounds", "0", "--model", "vllm/m", "--device", "cpu"],
     "--rounds: 0 is out of range: at least 1"),
    (["run", "level1/relu", "--max-usd", "1", "--model", "vllm/unpriced", "--device", "cpu"], "no price known"),
    (["run", "level1/relu", "--max-usd", "1", "--device", "cpu"],
     "--max-usd: the built-in engineer costs nothing; --max-usd applies to a model (--model)"),
    (["bench", "level1", "--only", "relu", "--max-usd", "0.5", "--device", "cpu"],
     "kernelcraft bench: --max-usd: the built-in engineer costs nothing"),
    (["run", "level1/relu", "--stop-after-failures", "0", "--model", "vllm/m", "--device", "cpu"],
     "--stop-after-failures: 0 is out of range: at least 1"),
    (["run", "level1/relu", "--model", "mystery/m", "--device", "cpu"], "unknown provider"),
    (["run", "level1/no_such_problem", "--model", "vllm/m"], "no_such_problem"),
    (["bench", "level9", "--model", "vllm/m", "--device", "cpu"], "level9"),
    (["bench", "level1", "--only", "relu,softmax", "--sizes", "dims=4", "--model", "vllm/m", "--device", "cpu"],
     "--sizes: no problem here has a module-level constant 'dims'"),
    (["run", "level1/relu", "--sizes", "dims=4", "--model", "vllm/m", "--device", "cpu"],
     "no module-level constant 'dims' in level1/relu"),
    (["runs"], "choose list or show"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)  # a run that wrongly succeeds writes its best kernel here, not into the checkout
    store = [] if argv == ["runs"] else ["--store", str(tmp_path / "runs.db")]
    assert main(argv + store) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


# a model endpoint that refuses or fails: one line naming the model, the status and the provider's words ----------
def endpoint(server, api: str, tmp_path) -> list[str]:
    model = ["--model", "anthropic/claude-haiku-4-5", "--base-url", server.url] if api == "anthropic" else \
        ["--model", "scripted-model", "--base-url", server.url + "/v1"]
    return [*model, "--api-key", "k", "--device", "cpu", "--store", str(tmp_path / "runs.db"),
            "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--no-compile-baseline",
            "--timing-budget", "0.2", "--llm-retries", "0", "--concurrency", "1"]


LABELS = {"openai": "openai-compatible/scripted-model", "anthropic": "anthropic/claude-haiku-4-5"}


@pytest.mark.parametrize("as_json", [True, False])
@pytest.mark.parametrize("api, status", [("openai", 401), ("anthropic", 401), ("openai", 404), ("anthropic", 404)])
def test_a_refusing_endpoint_stops_the_run_with_exit_3_and_one_line(api, status, as_json, tmp_path, capsys):
    with ScriptedLLMServer([Rule(".", [Reply("invalid x-api-key", status=status)])]) as server:
        argv = ["run", "level1/relu", *endpoint(server, api, tmp_path), "--strategy", "sample", "--samples", "4"]
        rc = main(argv + (["--json"] if as_json else []))
        asked = len(server.requests)
    out, err = capsys.readouterr()
    line = f"{LABELS[api]}: HTTP {status}: invalid x-api-key"
    assert rc == 3 and asked == 1
    said = f"{line}; the model endpoint refused the request, so the run stopped"
    assert err.splitlines()[-1] == f"kernelcraft run: {said}"
    if as_json:  # stderr says it once; the summary carries it as a field
        assert err.count("invalid x-api-key") == 1
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["error"] == said
        assert summary["status"] == "stopped" and summary["stop_reason"] == f"proposer_error: {line}"
        assert summary["counters"]["calls"] == 0 and summary["counters"]["candidates"] == 0
        run = Store(tmp_path / "runs.db").run(summary["run_id"])
        assert run.status == "stopped" and run.stop_reason == f"proposer_error: {line}"
    else:
        assert (out + err).count("invalid x-api-key") == 1 and "stopped (proposer_error)" in out


@pytest.mark.parametrize("as_json", [True, False])
def test_calls_that_keep_failing_stop_the_run_with_exit_4(as_json, tmp_path, capsys):
    with ScriptedLLMServer([Rule(".", [Reply("the upstream is down", status=500)])]) as server:
        argv = ["run", "level1/relu", *endpoint(server, "openai", tmp_path), "--strategy", "sample", "--samples", "8"]
        rc = main(argv + (["--json"] if as_json else []))
        asked = len(server.requests)
    out, err = capsys.readouterr()
    assert rc == 4 and asked == 3  # three failed in a row: the other five samples were never asked
    assert (err if as_json else out + err).count("the upstream is down") == 1  # as_json: the summary's fields too
    last = err.splitlines()[-1]
    assert last.startswith("kernelcraft run: openai-compatible/scripted-model: HTTP 500: the upstream is down")
    assert "3 calls in a row failed" in last
    if as_json:
        summary = json.loads(out.strip().splitlines()[-1])
        c = summary["counters"]
        assert (c["calls"], c["failed_calls"], c["malformed"], c["by_status"]) == (3, 3, 0, {"call_failed": 3})
        assert summary["stop_reason"].startswith("proposer_failing: ") and summary["error"] in last
    else:
        assert "calls 3 (3 failed, 0 malformed answers)" in out and "call_failed 3" in out


@pytest.mark.slow
def test_some_failed_calls_are_shown_in_the_summary_and_exit_0(tmp_path, capsys):
    rules = [Rule("Write a custom kernel", [Reply("overloaded", status=500), Reply(code(FAST))])]
    with ScriptedLLMServer(rules) as server:
        rc = main(["run", "level1/relu", *endpoint(server, "openai", tmp_path), "--strategy", "sample",
                   "--samples", "2"])
    out, err = capsys.readouterr()
    assert rc == 0 and "done" in out
    assert "1 call failed; the last: openai-compatible/scripted-model: HTTP 500: overloaded" in out
    assert (out + err).count("overloaded") == 1


def test_bench_stops_at_a_refusal_with_exit_3(tmp_path, capsys):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(SUITE_ROOT / "level1" / "relu.py", suite / "relu.py")
    shutil.copy(SUITE_ROOT / "level1" / "sigmoid.py", suite / "sigmoid.py")
    with ScriptedLLMServer([Rule(".", [Reply("invalid x-api-key", status=401)])]) as server:
        rc = main(["bench", str(suite), *endpoint(server, "openai", tmp_path), "--strategy", "sample", "--json"])
        asked = len(server.requests)
    out, err = capsys.readouterr()
    assert rc == 3 and asked == 1  # the second problem was not run into the same refusal
    assert err.count("invalid x-api-key") == 1 and err.splitlines()[-1].startswith(
        "kernelcraft bench: relu: openai-compatible/scripted-model: HTTP 401: invalid x-api-key")
    rows = {r["problem"]: r for r in json.loads(out.strip().splitlines()[-1])["rows"]}
    assert rows["relu"]["status"] == "stopped" and rows["sigmoid"]["status"] == "not_run"


def test_a_problem_the_builtin_engineer_cannot_trace_is_said_in_words(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNELCRAFT_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "level3/lstm_loop", "--device", "cpu", "--store", str(tmp_path / "runs.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("kernelcraft run: the built-in engineer cannot trace "
                                                         "level3/lstm_loop: its forward uses a tensor value")
    assert err.endswith("torch.fx said: TypeError: 'Proxy' object cannot be interpreted as an integer")
