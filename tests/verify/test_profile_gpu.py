"""Nsight Compute for real, on known kernels (tests/fixtures/profile/, all on the suite's level1/relu at its
full size, 4096 x 16384 fp32): a streaming copy must read as memory-bound near DRAM peak; a kernel with
forced 32-way shared-memory bank conflicts must show them, and its padded twin must not.

Skipped without a CUDA device (the `gpu` marker), and without ncu on this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.verify import Verifier, VerifyConfig
from kernelcraft.verify.profile import Profiler, ProfileError, find_ncu
from tests.helpers import FIXTURES, REPO

pytestmark = pytest.mark.gpu
KNOWN = FIXTURES / "profile"


@pytest.fixture(scope="module")
def profiler(tmp_path_factory):
    try:
        find_ncu()
    except ProfileError as exc:
        pytest.skip(str(exc))
    return Profiler("cuda:0", tmp_path_factory.mktemp("kc-profile-cache"))


@pytest.fixture(scope="module")
def relu():
    return load_problem("level1/relu")


def own(profile, name: str):
    (kernel,) = [k for k in profile.kernels if k.short == name]
    assert kernel.custom
    return kernel


def test_a_streaming_copy_reads_as_memory_bound_near_dram_peak(profiler, relu):
    p = profiler.run(relu, Candidate.from_file(KNOWN / "relu_stream.py"))
    k = own(p, "relu_stream")
    assert p.kernels[0] is k and k.share > 0.99 and k.launches == 1
    assert k.dram_pct >= 70, p.to_dict()["summary"]
    assert k.verdict_kind == "memory_bound" and k.verdict.startswith("memory-bound")
    assert k.dram_gbps > 2000  # an H100's DRAM: 3.35 TB/s at peak
    assert p.ncu and p.device.startswith("NVIDIA")


def test_forced_bank_conflicts_are_reported_and_their_padded_twin_has_none(profiler, relu):
    conflicted = own(profiler.run(relu, Candidate.from_file(KNOWN / "relu_smem_conflict.py")), "relu_smem_staged")
    padded = own(profiler.run(relu, Candidate.from_file(KNOWN / "relu_smem_padded.py")), "relu_smem_staged")
    assert conflicted.conflict_ratio > 0.9 and conflicted.conflict_ways > 16  # 32-way: 31 of 32 wavefronts extra
    assert conflicted.verdict_kind == "bank_conflicted"
    # ncu counts a few conflicts even here (4% of wavefronts on an H100, 2026-11-24): "none" is an order less
    assert padded.conflict_ratio < 0.1 and padded.verdict_kind != "bank_conflicted"
    assert padded.conflict_ratio < conflicted.conflict_ratio / 10
    assert padded.time_us < conflicted.time_us


def test_the_reference_is_profiled_as_library_kernels(profiler, relu):
    p = profiler.run(relu, None)
    assert p.target == "reference" and p.kernels and not any(k.custom for k in p.kernels)
    assert p.kernels[0].verdict_kind == "memory_bound"  # torch's elementwise relu streams too


def test_a_candidate_that_fails_under_ncu_is_one_line(profiler, relu):
    with pytest.raises(ProfileError) as err:
        profiler.run(relu, Candidate.from_file(FIXTURES / "relu_raises.py"))
    assert err.value.reason == "target_failed"
    assert str(err.value) == "the candidate failed under ncu: RuntimeError: kc-fixture: forward exploded"


def test_the_verifier_profiles_at_the_sizes_it_judges(profiler, tmp_path):
    """The engine's path: Verifier.profile, sizes from the verifier's plan of the problem (here --sizes)."""
    problem = load_problem("level1/relu")
    with Verifier("cuda:0", VerifyConfig(sizes={"batch_size": 256}, cache_dir=tmp_path)) as verifier:
        p = verifier.profile(problem, Candidate.from_file(KNOWN / "relu_stream.py"))
    k = own(p, "relu_stream")
    assert k.grid_size <= 132 * 8 and k.time_us < 200  # 256 x 16384 floats: a sixteenth of the full size


def test_kernelcraft_profile_json(profiler):
    env = {k: v for k, v in os.environ.items() if k != "KERNELCRAFT_CACHE"}
    proc = subprocess.run([sys.executable, "-m", "kernelcraft.cli", "profile", "level1/relu",
                           str(KNOWN / "relu_smem_conflict.py"), "--json"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["profile"]["kernels"][0]["verdict_kind"] == "bank_conflicted"
    assert "bank-conflicted" in info["profile"]["summary"]
    assert info["reference"]["target"] == "reference" and info["reference_error"] is None
