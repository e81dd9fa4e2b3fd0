"""The profiler's parsing and summaries over real recorded ncu output, and its errors, on any machine.

tests/fixtures/ncu/raw_h100.csv is the unedited stdout of a real `ncu --csv --page raw` run on an H100
(ncu 2025.3.1; its README says how it was made): a shared-memory kernel with 32-way bank conflicts, the
same kernel without them, and torch's softmax. What ncu itself does is tested on a GPU
(test_profile_gpu.py); here only what needs no ncu: reading its output, the words made of it, and the
errors said when ncu is missing, the device is no GPU, or a profile runs too long.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from kernelcraft.verify.profile import Profile, ProfileError, check_device, find_ncu, render, summarize
from kernelcraft.verify.profile.ncu import METRICS, parse_raw, run_command, tool_error
from kernelcraft.verify.profile.summary import short_name, summarize_kernel
from tests.helpers import FIXTURES, REPO

RECORDED = (FIXTURES / "ncu" / "raw_h100.csv").read_text()


@pytest.fixture(scope="module")
def launches():
    return parse_raw(RECORDED)


def test_the_raw_page_is_read_into_one_typed_record_per_launch(launches):
    assert [(k.id, k.name[:30]) for k in launches] == [
        (0, "smem_conflict"), (1, "smem_conflict"), (2, "void at::<unnamed>::cunn_SoftM")]
    first = launches[0]
    assert first.device == "NVIDIA H100 80GB HBM3"
    assert (first.block, first.grid) == ("(256, 1, 1)", "(262144, 1, 1)")
    # numbers with thousands separators, their units from the units row
    assert first.number("gpu__time_duration.sum") == 16_759_648.0 and first.units["gpu__time_duration.sum"] == "ns"
    assert first.number("dram__bytes.sum.per_second") == pytest.approx(31_149_729_158.99)
    assert first.units["dram__bytes.sum.per_second"] == "byte/s"
    assert first.number("launch__occupancy_limit_registers") == 8.0
    # text stays text, and is never taken for a number
    assert first.values["launch__cluster_scheduling_policy"] == "PolicySpread"
    assert first.number("launch__cluster_scheduling_policy") is None


def test_every_metric_the_summary_asks_for_is_in_the_recorded_output(launches):
    asked = [m for m in METRICS.split(",") if not m.startswith("regex:")]
    missing = [m for m in asked if m not in launches[0].values]
    assert not missing
    stalls = [m for m in launches[0].values if m.startswith("smsp__average_warps_issue_stalled_")]
    assert len(stalls) == 19  # the regex matched every stall reason gh100 has


def test_output_without_a_csv_gives_no_launches():
    assert parse_raw("") == []
    assert parse_raw("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") == []


def test_scaled_units_are_brought_to_base_units():
    text = ('"ID","Process ID","Kernel Name","gpu__time_duration.sum","dram__bytes.sum.per_second"\n'
            '"","","","msecond","Gbyte/s"\n"0","1","k","1.5","2,435.34"\n')
    (k,) = parse_raw(text)
    assert k.number("gpu__time_duration.sum") == pytest.approx(1.5e6) and k.units["gpu__time_duration.sum"] == "ns"
    assert k.number("dram__bytes.sum.per_second") == pytest.approx(2.43534e12)


def test_the_conflicted_launch_reads_as_bank_conflicted(launches):
    k = summarize_kernel([launches[0]], 1.0)
    assert k.verdict_kind == "bank_conflicted"
    # conflicts over wavefronts, loads and stores together
    assert k.conflict_ratio == pytest.approx((4_162_982_275 + 65_016_764) / (4_297_200_003 + 67_113_916))
    assert 31 < k.conflict_ways < 33  # a stride of 32 floats: 32-way
    assert "97% of shared-memory wavefronts" in k.verdict and "32-way" in k.verdict
    # the shared-memory pipe is what stalls it
    assert [s.reason for s in k.stalls] == ["mio_throttle", "short_scoreboard", "barrier"]
    assert k.stalls[0].share == pytest.approx(80.27 / 212.49, rel=0.01)
    assert k.dram_pct == pytest.approx(0.93) and k.memory_pct == pytest.approx(99.84)


def test_the_same_kernel_without_conflicts_reads_as_such(launches):
    k = summarize_kernel([launches[1]], 1.0)
    assert k.conflict_ratio < 0.01 and k.verdict_kind == "compute_bound"
    assert k.sm_pct == pytest.approx(68.43)


def test_softmax_reads_as_memory_bound_with_its_occupancy_and_stalls(launches):
    k = summarize_kernel([launches[2]], 1.0)
    assert k.verdict_kind == "memory_bound" and k.verdict.startswith("memory-bound: DRAM at 73% of peak")
    assert k.dram_gbps == pytest.approx(2435.34, rel=1e-4)
    assert k.l2_hit_pct == pytest.approx(59.25)
    assert (k.achieved_occupancy_pct, k.theoretical_occupancy_pct) == (pytest.approx(93.28), 100.0)
    assert k.blocks_per_sm == 2 and k.limiters == ["registers", "warps"]  # 1024 threads: two blocks fill an SM
    assert k.stalls[0].reason == "long_scoreboard" and "global" in k.stalls[0].words
    assert (k.registers, k.block_size, k.grid_size) == (32, 1024, 4096)
    assert k.short == "at::cunn_SoftMaxForward"


def test_a_call_is_ranked_by_kernel_with_launches_of_one_function_taken_together(launches):
    p = summarize(launches, {"smem_conflict"}, "candidate", "probe", "probe_problem", "2025.3.1.0")
    assert [(k.short, k.launches, k.custom) for k in p.kernels] == [
        ("smem_conflict", 2, True), ("at::cunn_SoftMaxForward", 1, False)]
    assert sum(k.share for k in p.kernels) == pytest.approx(1.0)
    assert p.total_us == pytest.approx((16_759_648 + 1_716_160 + 214_688) / 1e3)
    merged = p.kernels[0]
    # time-weighted: mostly the conflicted launch
    assert merged.dram_pct == pytest.approx((0.93 * 16_759_648 + 9.06 * 1_716_160) / 18_475_808)
    assert merged.verdict_kind == "bank_conflicted"


def test_the_summary_in_words(launches):
    p = summarize(launches, {"smem_conflict"}, "candidate", "probe", "probe_problem", "2025.3.1.0")
    text = render(p)
    lines = text.splitlines()
    assert lines[0] == ("Nsight Compute, one call of the candidate: 2 kernels, 18.690 ms of kernel time on "
                        "NVIDIA H100 80GB HBM3")
    assert lines[1].startswith("1. smem_conflict (yours) x2: 98.9% of the time (18.476 ms) — bank-conflicted")
    assert "DRAM 1.7% of peak" in lines[2] and "L2 hit 50%" in lines[2] and "occupancy 94% of 100% theoretical" in lines[2]
    assert lines[3].startswith("   stalls: MIO queue full")
    assert lines[4].startswith("2. at::cunn_SoftMaxForward: 1.1% of the time") and "memory-bound" in lines[4]
    assert len(lines) == 7


def test_a_profile_survives_json(launches):
    p = summarize(launches, {"smem_conflict"}, "reference", "probe", "probe_problem", "2025.3.1.0")
    data = json.loads(json.dumps(p.to_dict()))
    assert Profile.from_dict(data) == p
    assert data["summary"] == render(p)
    assert data["kernels"][0]["conflict_ratio"] == pytest.approx(p.kernels[0].conflict_ratio)


@pytest.mark.parametrize("name, short", [
    ("smem_conflict", "smem_conflict"),
    ("void relu_kernel<float, 4>(const float *, float *, long long)", "relu_kernel"),
    ("void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>, "
     "std::array<char *, 2>>(int, T2, T3)", "at::native::vectorized_elementwise_kernel"),
    ("triton_poi_fused_relu_0", "triton_poi_fused_relu_0"),
    # as ncu 2025.3.1 named torch.relu's kernel on an H100 (its brackets do not balance)
    ("void vectorized_elementwise_kernel<4, unnamed>::launch_clamp_scalar(TensorIteratorBase &, Scalar, Scalar, "
     "ClampLimits)::[lambda() (instance 1)]::operator ()() lambda() (instance 7)]::operator ()() lambda(float) "
     "(instance 1)], array<char *, 2>>(int, T2, T3)", "vectorized_elementwise_kernel"),
])
def test_short_names(name, short):
    assert short_name(name) == short


# -- errors ---------------------------------------------------------------------------------------------

def _no_ncu_env(monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for name in ("CUDA_HOME", "CUDA_PATH", "KERNELCRAFT_NCU"):
        monkeypatch.delenv(name, raising=False)


def test_ncu_missing_is_said_in_one_line(monkeypatch, tmp_path):
    _no_ncu_env(monkeypatch, tmp_path)
    with pytest.raises(ProfileError) as err:
        find_ncu()
    assert err.value.reason == "ncu_missing" and "ncu" in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv("KERNELCRAFT_NCU", str(tmp_path / "nowhere" / "ncu"))
    with pytest.raises(ProfileError, match="KERNELCRAFT_NCU=.* is not an executable file"):
        find_ncu()


def test_kernelcraft_profile_without_ncu_exits_1_with_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "KERNELCRAFT_NCU")}
    env["PATH"] = str(tmp_path)  # the interpreter is named by its path; nothing else is on PATH
    cmd = [sys.executable, "-m", "kernelcraft.cli", "profile", "level1/relu",
           str(FIXTURES / "profile" / "relu_stream.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("kernelcraft profile: Nsight Compute's `ncu` was not found")
    proc = subprocess.run(cmd + ["--json"], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 1 and json.loads(proc.stdout)["reason"] == "ncu_missing"


def test_run_with_profile_where_it_cannot_is_a_usage_error(monkeypatch, tmp_path, capsys):
    from kernelcraft import cli

    _no_ncu_env(monkeypatch, tmp_path)
    code = cli.main(["run", "level1/relu", "--profile", "--device", "cpu", "--store", str(tmp_path / "runs.db")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kernelcraft run: --profile: Nsight Compute's `ncu` was not found")
    assert err.count("\n") == 1


def test_no_gpu_is_said_in_one_line():
    with pytest.raises(ProfileError, match="hardware counters need a CUDA GPU; the device given is cpu") as err:
        check_device("cpu")
    assert err.value.reason == "no_gpu"
    if not torch.cuda.is_available():
        with pytest.raises(ProfileError, match="none is visible here"):
            check_device("cuda:0")


def test_a_profile_past_its_time_is_stopped_with_everything_it_started(tmp_path):
    """The same runner ncu goes through, on a real process tree that sleeps (no stand-in for ncu)."""
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "open('child.pid', 'w').write(str(child.pid))\n"
              "time.sleep(120)\n")
    start = time.monotonic()
    with pytest.raises(ProfileError) as err:
        run_command([sys.executable, "-c", script], tmp_path, dict(os.environ), timeout=3)
    assert err.value.reason == "timeout" and "longer than 3 s" in str(err.value)
    assert time.monotonic() - start < 30
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):  # the group was killed: the grandchild is gone too
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the child of the timed-out process is still alive")


def test_what_ncu_reports_is_classified():
    # the message ncu prints when counters are restricted to admins (NVIDIA's ERR_NVGPUCTRPERM page)
    perm = tool_error("==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
                      "permission to access NVIDIA GPU Performance Counters on the target device 0.\n")
    assert perm.reason == "counters_not_permitted" and "ERR_NVGPUCTRPERM" in str(perm)
    other = tool_error("==ERROR== The application returned an error code (1).\n")
    assert other.reason == "ncu_failed" and str(other) == "ncu: The application returned an error code (1)."
    assert tool_error(RECORDED) is None


def test_the_terminal_view_of_kernelcraft_profile(launches):
    from rich.console import Console

    from kernelcraft.report.terminal import profile_view

    cand = summarize(launches, {"smem_conflict"}, "candidate", "c", "level1/relu", "2025.3.1.0").to_dict()
    ref = summarize(launches[2:], set(), "reference", "level1/relu", "level1/relu", "2025.3.1.0").to_dict()
    console = Console(width=200, record=True)
    console.print(profile_view({"profile": cand, "reference": ref, "reference_error": None, "candidate": "c",
                                "backend": "cuda_nvrtc", "problem": "level1/relu", "device": "cuda:0"}))
    text = console.export_text()
    assert "smem_conflict (yours)" in text and "bank-conflicted: 94% of shared-memory wavefronts" in text
    assert "73% (2435 GB/s)" in text and "smem_conflict stalls: MIO queue full" in text
    assert "kernel time under ncu: candidate 18.690 ms, reference 0.2147 ms" in text
    console = Console(width=200, record=True)
    console.print(profile_view({"profile": cand, "reference": None, "reference_error": "the reference failed under "
                                "ncu: boom", "candidate": "c", "backend": "cuda_nvrtc", "problem": "level1/relu",
                                "device": "cuda:0"}))
    assert "the reference was not profiled: the reference failed under ncu: boom" in console.export_text()
