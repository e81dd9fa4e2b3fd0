"""Nsight Compute (`ncu`) as a tool: where it is, what it is asked to collect, how it is run, and its raw
CSV page read into typed per-kernel records.

The command is fixed: `--clock-control none` (ncu must never lock or change the GPU's clocks: other work
on the device runs at its own clocks, and timings taken after ncu must not change), `--profile-from-start
off` (only what the target brackets with cudaProfilerStart/Stop is profiled: one call, after warm-up),
`--csv --page raw --metrics …` (one row per kernel launch, then a units row; numbers carry thousands
separators). Its stdout holds `==PROF==` lines before the CSV; the target's own output never reaches it
(the target sends its stdout and stderr to a file).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kernelcraft.errors import PROFILE_ENVIRONMENT, PROFILE_REASONS, ProfileError  # noqa: F401 - raised here

# What a summary reads (summary.py). Each name asked for comes back with its .avg/.max/.min/.sum roll-ups
# where it has them; the stall ratios are asked for by pattern (one per stall reason the chip has).
METRICS = ",".join([
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram__bytes.sum.per_second",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks", "launch__registers_per_thread", "launch__block_size", "launch__grid_size",
    "launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic",
    "lts__t_sector_hit_rate.pct",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__inst_executed.sum", "sm__cycles_elapsed.avg",
    r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio",
])

# Why a profile could not be had (the error lives on the floor the faces catch it from).
REASONS, ENVIRONMENT = PROFILE_REASONS, PROFILE_ENVIRONMENT


def find_ncu() -> str:
    """The ncu executable: $KERNELCRAFT_NCU, else `ncu` on PATH, else $CUDA_HOME/bin/ncu."""
    named = os.environ.get("KERNELCRAFT_NCU")
    if named:
        if not (Path(named).is_file() and os.access(named, os.X_OK)):
            raise ProfileError("ncu_missing", f"KERNELCRAFT_NCU={named} is not an executable file")
        return named
    found = shutil.which("ncu")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if found is None and home and os.access(Path(home) / "bin" / "ncu", os.X_OK):
        found = str(Path(home) / "bin" / "ncu")
    if found is None:
        raise ProfileError("ncu_missing", "Nsight Compute's `ncu` was not found on PATH (nor in $CUDA_HOME/bin): "
                                          "install Nsight Compute, or name it with KERNELCRAFT_NCU=/path/to/ncu")
    return found


def ncu_version(ncu: str) -> str:
    """`2025.3.1.0`, from `ncu --version` (empty when it says nothing recognisable)."""
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"Version\s+(\d[\w.]*)", out)
    return m.group(1) if m else ""


def command(ncu: str, target: list[str]) -> list[str]:
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
            "--metrics", METRICS, *target]


@dataclass
class Completed:
    returncode: int
    stdout: str
    stderr: str


def run_command(cmd: list[str], cwd: Path, env: dict, timeout: float, preexec=None) -> Completed:
    """Run `cmd` in its own process group, its output to files in `cwd`; past `timeout` seconds the whole
    group (ncu, the target and whatever the target started) is killed and ProfileError("timeout") raised."""
    out_path, err_path = Path(cwd) / "ncu.out", Path(cwd) / "ncu.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=preexec)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ProfileError("timeout", f"profiling took longer than {timeout:.0f} s and was stopped "
                                          "(ncu replays every kernel a few dozen times: many or long kernels take long)")
    return Completed(proc.returncode, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def tool_error(output: str) -> ProfileError | None:
    """What ncu's own output says went wrong, if anything it reports did."""
    if "ERR_NVGPUCTRPERM" in output:
        return ProfileError("counters_not_permitted",
                            "the GPU's performance counters are not permitted for this user (ERR_NVGPUCTRPERM): "
                            "run as root or with CAP_PERFMON, or let users read them (the driver option "
                            "NVreg_RestrictProfilingToAdminUsers=0)")
    errors = [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]
    if errors:
        return ProfileError("ncu_failed", "ncu: " + errors[0].removeprefix("==ERROR==").strip())
    return None


# -- the raw CSV page ----------------------------------------------------------------------------------

@dataclass
class KernelCounters:
    """One kernel launch as ncu's raw page gives it: identity columns, then metric -> value (a number where
    it reads as one, else the text) and metric -> unit."""

    id: int
    name: str
    device: str
    block: str
    grid: str
    values: dict[str, float | str | None] = field(default_factory=dict, repr=False)
    units: dict[str, str] = field(default_factory=dict, repr=False)

    def number(self, metric: str) -> float | None:
        value = self.values.get(metric)
        return value if isinstance(value, float) else None


_HEADER = '"ID","Process ID"'
_IDENTITY = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC"}
# Units ncu may scale a value into -> (factor, the base unit the summary reads: ns, byte, byte/s).
_SCALE = {f"{prefix}{unit}": (factor, base)
          for prefix, factor in (("", 1.0), ("K", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12))
          for unit, base in (("byte", "byte"), ("byte/s", "byte/s"), ("byte/second", "byte/s"))}
_SCALE.update({"us": (1e3, "ns"), "usecond": (1e3, "ns"), "ms": (1e6, "ns"), "msecond": (1e6, "ns"),
               "s": (1e9, "ns"), "second": (1e9, "ns")})


def parse_raw(text: str) -> list[KernelCounters]:
    """Every kernel row of `ncu --csv --page raw` output (whatever precedes the header is skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(_HEADER)), None)
    if start is None:
        return []
    rows = list(csv.reader(line for line in lines[start:] if line.startswith('"')))
    header, rows = rows[0], rows[1:]
    units = rows.pop(0) if rows and rows[0] and rows[0][0] == "" else [""] * len(header)
    kernels = []
    for row in rows:
        if len(row) != len(header) or not row[0].strip().isdigit():
            continue
        cells = dict(zip(header, row))
        k = KernelCounters(int(cells["ID"]), cells.get("Kernel Name", ""), cells.get("device__attribute_display_name", ""),
                           cells.get("Block Size", ""), cells.get("Grid Size", ""))
        for name, unit, cell in zip(header, units, row):
            if name in _IDENTITY:
                continue
            value = _number(cell)
            if isinstance(value, float) and unit in _SCALE:
                factor, unit = _SCALE[unit]
                value *= factor
            k.values[name], k.units[name] = value, unit
        kernels.append(k)
    return kernels


def _number(cell: str) -> float | str | None:
    text = cell.strip()
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text
