"""`python -m kernelcraft.cli`: exit statuses, one JSON object on stdout, one line on stderr for misuse.

The contract cases run the real command in a subprocess; a few more usage errors call `cli.main`
in-process (the same code, without a torch import per case).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import kernelcraft
from kernelcraft import cli as kc_cli
from tests.helpers import FIXTURES, KERNELBENCH, REPO

RESULT_KEYS = {"status", "correct", "max_rel_error", "runtime_ms", "eager_ms", "compile_ms", "speedup_eager",
               "speedup_compile", "roofline_fraction", "reasons", "device", "policy"}


def cli(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KERNELCRAFT_CACHE"}
    return subprocess.run([sys.executable, "-m", "kernelcraft.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env=env)


@pytest.fixture
def main(capsys):
    """`cli.main` in this process: returns (exit status, stdout, stderr)."""
    def run(*args):
        code = kc_cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)
    return run


def eval_args(candidate, cache, *extra, size=("--size", "small")):
    return ("eval", "level1/relu", candidate, "--device", "cpu", *size, "--no-compile-baseline",
            "--budget", "0.3", "--trials", "2", "--json", "--cache-dir", cache, *extra)


def one_json_object(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, stdout
    result = json.loads(lines[0])
    assert isinstance(result, dict)
    return result


def assert_usage_error(proc, *fragments: str):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernelcraft")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# -- eval -----------------------------------------------------------------------------------------------

def test_eval_honest_candidate(tmp_path):
    # no --size: on the CPU, `auto` means the problem's SMALL_SIZES
    proc = cli(*eval_args(FIXTURES / "relu_triton.py", tmp_path, size=()))
    assert proc.returncode == 0, proc.stderr
    result = one_json_object(proc.stdout)
    assert RESULT_KEYS <= set(result)
    assert result["status"] == "ok" and result["correct"] is True and result["reasons"] == []
    assert result["device"] == "cpu" and result["policy"] == "strict"
    assert result["trials"] == 2
    assert result["runtime_ms"] > 0 and result["eager_ms"] > 0 and result["speedup_eager"] > 0
    assert result["compile_ms"] is None and result["speedup_compile"] is None
    assert result["roofline_fraction"] is None
    assert 0 <= result["max_rel_error"] <= 1e-4
    assert result["flops"] == 37 * 1000  # level1/relu at its SMALL_SIZES
    assert (tmp_path / "trusted" / "baselines.json").exists()  # --cache-dir is where the baseline went


def test_eval_incorrect_candidate_still_exits_0(tmp_path):
    proc = cli(*eval_args(FIXTURES / "relu_wrong_math.py", tmp_path, "--policy", "relaxed"))
    assert proc.returncode == 0, proc.stderr
    result = one_json_object(proc.stdout)
    assert RESULT_KEYS <= set(result)
    assert result["status"] == "incorrect" and result["correct"] is False
    assert result["reasons"] == ["mismatch"] and result["policy"] == "relaxed"
    assert result["max_rel_error"] > 1e-2 and result["runtime_ms"] is None


# -- usage errors: exit 2, one line on stderr, nothing on stdout -----------------------------------------

def test_missing_problem(tmp_path):
    args = list(eval_args(FIXTURES / "relu_torch.py", tmp_path))
    args[1] = "level1/nope"
    assert_usage_error(cli(*args), "level1/nope")


def test_missing_candidate(tmp_path):
    assert_usage_error(cli(*eval_args(tmp_path / "missing.py", tmp_path)), "missing.py", "does not exist")


def test_candidate_without_model_new(tmp_path):
    assert_usage_error(cli(*eval_args(FIXTURES / "no_model_new.py", tmp_path)), "defines no ModelNew")


def test_binary_candidate(tmp_path):
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"class ModelNew: pass\n\x00\x01\x02\xff")
    assert_usage_error(cli(*eval_args(binary, tmp_path)), "binary file")


def test_bad_policy(tmp_path):
    assert_usage_error(cli(*eval_args(FIXTURES / "relu_torch.py", tmp_path, "--policy", "lenient")),
                       "invalid choice: 'lenient'")


def test_no_arguments_exits_2():
    assert cli().returncode == 2


def test_no_arguments_is_a_one_line_usage_error():
    assert_usage_error(cli())


@pytest.mark.parametrize("args, fragment", [
    (("eval", "level1/relu", "c.py", "--budget", "-5"), "--budget: -5 is out of range: above 0"),
    (("eval", "level1/relu", "c.py", "--trials", "1000000"), "--trials: 1000000 is out of range: 1 to 1000"),
    (("eval", "level1/relu", "c.py", "--budget", "nan"), "--budget: nan is out of range"),
    (("run", "level1/relu", "--max-minutes", "0"), "--max-minutes: 0 is out of range: above 0"),
    (("run", "level1/relu", "--rounds", "two"), "--rounds: not a whole number: 'two'"),
    (("apply", "level1/relu", "--budget-minutes", "-1"), "--budget-minutes: -1 is out of range"),
    (("apply", "level1/relu", "--min-share", "1.5"), "--min-share: 1.5 is out of range: at least 0 and below 1"),
    (("bench", "level1", "--limit", "0"), "--limit: 0 is out of range: at least 1")])
def test_a_number_out_of_range_is_a_usage_error_before_anything_runs(main, args, fragment):
    """Budgets, trials and counts that make no sense (a negative budget ran with two samples; a million trials held
    the device for every process on the machine) are refused with exit 2, naming the flag and the range."""
    assert_usage_error(main(*args), fragment)


@pytest.mark.parametrize("flags", [("--allow-library", "--no-allow-library"), ("--no-allow-library", "--allow-library")])
def test_a_flag_and_its_negation_both_given_is_a_usage_error(main, tmp_path, flags):
    """The last one won, silently."""
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, *flags)),
                       f"{flags[0]} and {flags[1]} both given: say one")


def test_bad_size(main, tmp_path):
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, size=("--size", "medium"))),
                       "invalid choice: 'medium'")


def test_sizes_naming_no_constant_is_a_usage_error(main, tmp_path):
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, "--sizes", "batch=3")),
                       "no module-level constant 'batch' in level1/relu; it has: batch_size, dim")
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, "--sizes", "dim")),
                       "--sizes: 'dim' is not NAME=VALUE")


UPSTREAM_RELU = KERNELBENCH / "level1" / "19_ReLU.py"
needs_kernelbench = pytest.mark.skipif(not UPSTREAM_RELU.exists(), reason=f"no KernelBench copy at {KERNELBENCH}")


@needs_kernelbench
def test_eval_upstream_file_on_the_cpu_runs_at_derived_sizes(tmp_path):
    # KernelBench's ReLU is 4096 x 393216 (12.9 GB in and out) and has no SMALL_SIZES: on the CPU it must
    # run at sizes derived from its cost, and say which.
    proc = cli("eval", UPSTREAM_RELU, FIXTURES / "relu_triton.py", "--device", "cpu", "--no-compile-baseline",
               "--budget", "0.3", "--trials", "2", "--json", "--cache-dir", tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = one_json_object(proc.stdout)
    assert result["status"] == "ok", result["message"]
    assert result["sizes"] == {"source": "derived", "constants": {"dim": 192, "batch_size": 256},
                               "full": {"dim": 393216, "batch_size": 4096}}
    assert result["flops"] == 192 * 256  # the derived sizes, not the file's 4096 x 393216


@needs_kernelbench
def test_eval_banner_tells_the_sizes_and_overrides_win(tmp_path):
    proc = cli("eval", UPSTREAM_RELU, FIXTURES / "relu_triton.py", "--device", "cpu", "--no-compile-baseline",
               "--budget", "0.3", "--trials", "2", "--sizes", "batch_size=8", "--cache-dir", tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert ("[cpu, derived+user sizes dim=192, batch_size=8 (full: 393216, 4096), strict]"
            in proc.stderr.splitlines()[0]), proc.stderr


def test_bad_trials(main, tmp_path):
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, "--trials", "0")),
                       "--trials: 0 is out of range: 1 to 1000")


def test_bad_backend(main, tmp_path):
    assert_usage_error(main(*eval_args(FIXTURES / "relu_torch.py", tmp_path, "--backend", "opencl")),
                       "unknown backend 'opencl'")


def test_cuda_device_without_a_gpu(main, tmp_path):
    args = list(eval_args(FIXTURES / "relu_torch.py", tmp_path))
    args[args.index("cpu")] = "cuda"
    assert_usage_error(main(*args), "no CUDA GPU is visible")


def test_problem_that_does_not_import(main, tmp_path):
    args = list(eval_args(FIXTURES / "relu_torch.py", tmp_path))
    args[1] = FIXTURES / "problems" / "raises_on_import.py"
    assert_usage_error(main(*args), "importing the problem raised RuntimeError")


def test_unknown_command(main):
    assert_usage_error(main("evaluate"), "invalid choice")


def test_problems_without_action(main):
    assert_usage_error(main("problems"), "choose list or show")


def test_problems_show_missing(main):
    assert_usage_error(main("problems", "show", "level1/nope", "--json"), "level1/nope")


def test_version(main):
    proc = main("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == kernelcraft.__version__


# -- problems -------------------------------------------------------------------------------------------

def test_problems_list_json():
    proc = cli("problems", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) >= 50
    names = [r["name"] for r in rows]
    assert "level1/softmax" in names and "level3/mlp" in names
    assert rows[names.index("level1/softmax")] == {
        "name": "level1/softmax", "level": 1, "summary": "Softmax over dim=1 of a (4096, 65536) matrix."}


def test_problems_show_json():
    proc = cli("problems", "show", "level1/softmax", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["name"] == "level1/softmax"
    assert info["flops"] == 4096 * 65536 and info["bytes"] == 2 * 4096 * 65536 * 4
    assert info["inputs"] == [{"shape": [4096, 65536], "dtype": "float32"}]
    assert info["outputs"] == [{"shape": [4096, 65536], "dtype": "float32"}]
    assert "torch.softmax" in info["source"]


def test_problems_list_by_level(main):
    proc = main("problems", "list", "--level", "3", "--json")
    rows = json.loads(proc.stdout)
    assert proc.returncode == 0 and rows and {r["level"] for r in rows} == {3}
    empty = main("problems", "list", "--level", "4")  # no empty table: a level with no problems is named
    assert empty.returncode == 2 and empty.stdout == ""
    assert empty.stderr.strip() == "kernelcraft problems: no problems at level 4 (levels here: 1, 2, 3)"


def test_problems_show_at_full_sizes_says_a_cpu_times_small_ones(main):
    import torch

    shown = main("problems", "show", "level1/softmax")
    assert shown.returncode == 0 and "(4096, 65536)" in shown.stdout
    said = "note: this machine has no GPU: eval and run take the problem's small sizes here"
    assert (said in shown.stderr) == (not torch.cuda.is_available())
    assert said not in main("problems", "show", "level1/softmax", "--small").stderr


def test_problems_show_small(main):
    info = json.loads(main("problems", "show", "level1/softmax", "--small", "--json").stdout)
    assert info["inputs"] == [{"shape": [37, 1000], "dtype": "float32"}]


@needs_kernelbench
def test_problems_show_small_derives_for_upstream_files(main):
    info = json.loads(main("problems", "show", UPSTREAM_RELU, "--small", "--json").stdout)
    assert info["inputs"] == [{"shape": [256, 192], "dtype": "float32"}]
    assert info["sizes"]["source"] == "derived"
    info = json.loads(main("problems", "show", UPSTREAM_RELU, "--sizes", "dim=7", "--json").stdout)
    assert info["inputs"] == [{"shape": [4096, 7], "dtype": "float32"}]
    assert info["sizes_text"] == "full+user sizes dim=7 (full: 393216)"


def test_human_readable_show(main):
    proc = main("problems", "show", "level1/relu")
    assert proc.returncode == 0 and "level1/relu" in proc.stdout
    assert proc.stderr in ("", "note: this machine has no GPU: eval and run take the problem's small sizes here "
                                "(--size auto); `kernelcraft problems show --small` shows those\n")  # one line at most


@pytest.mark.parametrize("module", ["kernelcraft", "kernelcraft.cli"])
def test_python_dash_m_reports_a_subcommand_usage_error_in_one_line(module, tmp_path):
    """A usage error raised in a subcommand module (here export's) is one line and exit 2 under `python -m`
    too, not a traceback (cli.py run as __main__ is a second copy of the module)."""
    proc = subprocess.run([sys.executable, "-m", module, "export", "nope", tmp_path / "out.jsonl", "--kind", "sft",
                           "--store", tmp_path / "missing.db"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"kernelcraft export: no run store at {tmp_path / 'missing.db'}"]


def test_piped_tables_are_laid_out_wide():
    """Without a terminal (and no COLUMNS) tables are 160 wide, not rich's 80: columns are kept, not elided."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "kernelcraft", "problems", "list"], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**env, "PYTHONPATH": str(REPO / "src")})
    widths = [len(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and 80 < max(widths) <= 160, max(widths)


@pytest.mark.parametrize("argv", [("problems", "list"), ("problems", "show", "level1/relu")])
def test_piped_output_carries_no_trailing_padding(argv):
    """Piped, a table keeps its columns (each problem and its whole summary on one row) but no line is padded
    with spaces to the layout's width: each ends where its text does."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run([sys.executable, "-m", "kernelcraft", *argv], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**env, "PYTHONPATH": str(REPO / "src")})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) > 5
    assert [line for line in lines if line != line.rstrip()] == []
    if argv[1] == "list":
        assert any("level1/softmax" in line and "Softmax over dim=1 of a (4096, 65536) matrix." in line
                   for line in lines)


SLOW = '''import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(2.0)
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_eval_stops_within_seconds_of_ctrl_c_and_leaves_no_worker(tmp_path, signum):
    """Ctrl-C (or SIGTERM) while a candidate is judged: the worker is killed and eval exits 130 well before the
    verdict's end (40 trials of 2 s a call: 80 s and more). It used to judge on to the end (143 s with --trials
    5000), the candidate's worker running meanwhile."""
    import signal
    import time

    import psutil

    path = tmp_path / "slow.py"
    path.write_text(SLOW)
    env = {**os.environ, "KERNELCRAFT_LOCK_DIR": str(tmp_path / "locks")}  # no other test's holder to wait for
    proc = subprocess.Popen([sys.executable, "-m", "kernelcraft.cli", "eval", "level1/relu", str(path), "--device",
                             "cpu", "--no-compile-baseline", "--trials", "40", "--cache-dir", str(tmp_path / "c")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                            # as from a terminal: a test run started in the background (`cmd &`) ignores SIGINT, and
                            # a child inherits that (it then judged to its end and exited 0)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def ours() -> dict:  # kernelcraft's own processes under it (its fork server, workers): pid -> process
        found = {}
        try:
            for child in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if "kernelcraft" in " ".join(child.cmdline()):
                        found[child.pid] = child
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return found

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ours():  # its fork server or worker started
        time.sleep(0.5)
    time.sleep(8.0)  # into the trials, each call of the candidate 2 s
    workers = ours()
    assert workers, "no worker started"
    sent = time.monotonic()
    proc.send_signal(getattr(signal, signum))
    out, err = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err[-2000:]
    assert took < 45, (took, err[-2000:])
    assert "kernelcraft: interrupted" in err

    def alive(worker) -> bool:
        try:
            return worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    gone_by = time.monotonic() + 10  # a killed process group's exit, reaped by init
    while time.monotonic() < gone_by and [w for w in workers.values() if alive(w)]:
        time.sleep(0.2)
    assert not [w for w in workers.values() if alive(w)], [(w.pid, w.status()) for w in workers.values() if alive(w)]
