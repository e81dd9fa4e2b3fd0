"""A device shared by several processes: timing phases never overlap, checks never overlap a timing phase.

The lock is tested across real processes (the flock is per open file, so threads would pass too, but what
users run is several `kernelcraft` processes); then four concurrent `kernelcraft eval` runs on the CPU
must give the verdicts a lone one gives, with their timing windows disjoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kernelcraft.verify.devicelock import DeviceLock, device_key
from tests.helpers import FIXTURES, REPO

HOLD = """
import json, os, sys, time
from pathlib import Path
from kernelcraft.verify.devicelock import DeviceLock
lock = DeviceLock("test-device", Path(sys.argv[1]))
if len(sys.argv) > 4:  # a gate: say this holder has started (its imports done), then wait for the test's go
    (Path(sys.argv[1]) / f"ready-{sys.argv[2]}-{os.getpid()}").touch()  # named by pid: two never share a name
    while not Path(sys.argv[4]).exists():
        time.sleep(0.005)
with lock.held(shared=sys.argv[2] == "shared"):
    start = time.time()
    (Path(sys.argv[1]) / f"holding-{sys.argv[2]}-{os.getpid()}").touch()  # for a test waiting until it holds
    time.sleep(float(sys.argv[3]))
    end = time.time()
print(json.dumps([start, end]))
"""


def _hold(tmp_path: Path, mode: str, seconds: float, gate: Path | None = None) -> subprocess.Popen:
    """A process holding the lock for `seconds`; with a `gate`, it takes the lock only once that file exists."""
    args = [sys.executable, "-c", HOLD, str(tmp_path), mode, str(seconds), *([str(gate)] if gate else [])]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)


def _wait_for(tmp_path: Path, pattern: str, count: int, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while len(list(tmp_path.glob(pattern))) < count:
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _windows(procs) -> list[list[float]]:
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        out.append(json.loads(stdout))
    return sorted(out)


def _disjoint(windows) -> bool:
    return all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))


def test_exclusive_holders_take_turns(tmp_path):
    windows = _windows([_hold(tmp_path, "exclusive", 0.4) for _ in range(3)])
    assert _disjoint(windows), windows


def test_shared_holders_overlap_but_never_an_exclusive_one(tmp_path):
    # both shared holders started (their imports can take many seconds on a loaded machine), then let in together
    gate = tmp_path / "go"
    shared = [_hold(tmp_path, "shared", 2.0, gate) for _ in range(2)]
    _wait_for(tmp_path, "ready-shared-*", 2, 180, "the shared holders never started")
    gate.touch()
    _wait_for(tmp_path, "holding-shared-*", 2, 30, "the shared holders never got the lock")
    exclusive = _hold(tmp_path, "exclusive", 0.2)
    s1, s2 = _windows(shared)
    (e,) = _windows([exclusive])
    assert s2[0] < s1[1]  # the two checks ran at once
    assert e[0] >= max(s1[1], s2[1]) - 0.01  # the timing waited for both


def test_a_dead_holder_releases_the_device(tmp_path):
    holder = _hold(tmp_path, "exclusive", 30)
    time.sleep(0.5)
    holder.kill()
    holder.wait()
    start = time.perf_counter()
    with DeviceLock("test-device", tmp_path).held() as waited:
        pass
    assert waited < 5 and time.perf_counter() - start < 5


def test_devices_are_named_for_what_they_are():
    assert device_key(torch.device("cpu")).startswith("cpu-")


def _eval(tmp_path: Path, i: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "kernelcraft.cli", "eval", "level1/relu", str(FIXTURES / "relu_triton.py"),
           "--device", "cpu", "--json", "--budget", "0.3", "--no-compile-baseline", "--trials", "2",
           "--cache-dir", str(tmp_path / f"cache{i}")]
    env = {**os.environ, "KERNELCRAFT_LOCK_DIR": str(tmp_path / "locks"), "PYTHONPATH": str(REPO / "src")}
    (tmp_path / "locks").mkdir(exist_ok=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
@pytest.mark.serial  # beside another pytest worker on two cores, a CPU outside clock saw 2.2x an honest call's time
def test_concurrent_evaluations_on_one_device_take_turns_timing(tmp_path):
    """The CPU form of the shared-GPU bar: four `kernelcraft eval` at once give a lone one's verdict, and no
    two timing phases overlap (the GPU form, with speedups within 5%, is in test_verifier_gpu.py)."""
    alone = _eval(tmp_path, 99)
    out, err = alone.communicate(timeout=300)
    lone = json.loads(out)
    procs = [_eval(tmp_path, i) for i in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    assert [r["status"] for r in results] == [lone["status"]] * 4 == ["ok"] * 4, [r["message"] for r in results]
    windows = sorted(w for r in results for w in r["device_held"])
    assert len(windows) >= 4 and _disjoint(windows), windows


def test_a_bounded_wait_gives_up_at_its_bound_and_says_who_held_the_device(tmp_path):
    """A run's verdict waits for a device another process holds no longer than the run's budget (a 0.5-minute region
    once waited 25 minutes behind another process's long check)."""
    from kernelcraft.verify.devicelock import DeviceBusy

    holder = _hold(tmp_path, "exclusive", 3.0)
    _wait_for(tmp_path, "holding-exclusive-*", 1, 30, "the holder never took the lock")
    start = time.monotonic()
    with pytest.raises(DeviceBusy, match=rf"pid {holder.pid}\) for the whole 0\.\d s"):
        with DeviceLock("test-device", tmp_path).held(until=time.time() + 0.5):
            pass
    assert 0.45 <= time.monotonic() - start < 2.0
    with DeviceLock("test-device", tmp_path).held(until=time.time() + 30) as waited:  # bounded, long enough: held
        assert waited > 0.5
    _windows([holder])


def test_a_verdict_that_cannot_have_the_device_by_its_callers_deadline_is_not_judged(tmp_path, monkeypatch):
    """Candidate.wait_until (a run's wall budget's end): the device held by another process past it, the verdict is
    a verifier_error (device_busy), given at the deadline, not when the other process lets go."""
    from kernelcraft.candidate import Candidate
    from kernelcraft.problems import load_problem
    from kernelcraft.verify import Verifier
    from tests.helpers import small_config

    monkeypatch.setenv("KERNELCRAFT_LOCK_DIR", str(tmp_path / "locks"))
    source = (FIXTURES / "relu_triton.py").read_text()
    with Verifier("cpu", small_config(tmp_path / "cache")) as verifier:
        problem = load_problem("level1/relu")
        verifier.target(problem)  # the baselines first: measured with the device free
        with DeviceLock(device_key(torch.device("cpu"))).held():
            start = time.monotonic()
            result = verifier.evaluate(problem, Candidate(source, "relu", wait_until=time.time() + 2.0))
            waited = time.monotonic() - start
    assert result.status == "verifier_error" and result.reasons == ["device_busy"], (result.status, result.message)
    assert result.message.startswith(f"the device was held by another kernelcraft process (pid {os.getpid()})")
    assert waited < 30
