"""What an evaluation holds on the device, estimated before anything is allocated, and the fingerprints that
prove inputs unchanged without a private copy of them."""

from __future__ import annotations

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.problems.cost import compute_cost
from kernelcraft.verify.memory import (CONTEXT_BYTES, FLUSH_MIN_BYTES, KEEP_CACHED, GiB, fingerprint, need, new_key,
                                      release_cache)
from tests.helpers import FIXTURES


def test_the_cost_pass_sees_the_references_peak():
    cost = compute_cost(load_problem(FIXTURES / "problems" / "relu_too_large.py").load())
    elements = 65536 * 1048576
    assert cost.input_bytes == cost.output_bytes == 4 * elements
    assert cost.params_bytes == 0
    assert cost.peak_bytes == 2 * 4 * elements  # the input and the output, alive together


def test_intermediates_count_toward_the_peak():
    module = load_problem("level2/gemm_gelu_scale").load()
    cost = compute_cost(module)
    assert cost.peak_bytes > cost.input_bytes + cost.params_bytes + cost.output_bytes  # the GEMM's output lives on


def test_need_is_one_trial_whatever_the_trial_count():
    cost = compute_cost(load_problem(FIXTURES / "problems" / "relu_too_large.py").load())
    n = need(cost, l2_bytes=50 << 20)
    assert n.reference == cost.peak_bytes and n.candidate_outputs == 2 * cost.output_bytes
    assert n.flush == FLUSH_MIN_BYTES and n.total > 3 * 256 * GiB
    assert "GiB" in n.describe()
    # a context for each process on the device: the supervisor, the worker judging, each standby worker
    assert need(cost, 50 << 20, processes=5).contexts - n.contexts == 2 * CONTEXT_BYTES


@pytest.mark.parametrize("make", [lambda: torch.randn(37, 1000), lambda: torch.randn(64, 33).T,
                                  lambda: torch.randint(0, 7, (5, 3)), lambda: torch.randn(9, dtype=torch.float16),
                                  lambda: torch.ones(3, dtype=torch.bool)])
def test_a_fingerprint_sees_any_change_and_nothing_else(make):
    x = make()
    key = new_key()
    before = fingerprint([x, 3], key)
    assert before[1] is None
    assert fingerprint([x, 3], key) == before
    flat = x.view(-1) if x.is_contiguous() else x.T.reshape(-1)  # the storage's own order
    if x.dtype == torch.bool:
        flat[-1] = ~flat[-1]
    else:
        flat[len(flat) // 2] += 1
    assert fingerprint([x, 3], key) != before


def test_a_fingerprint_sees_a_nan_where_a_nan_was_not_and_keys_differ():
    x = torch.randn(100)
    key = new_key()
    before = fingerprint([x], key)
    x[50] = float("nan")
    assert fingerprint([x], key) != before
    assert fingerprint([x], key) == fingerprint([x], key)
    assert fingerprint([x], new_key()) != fingerprint([x], key)


def test_fingerprints_of_several_tensors_are_each_their_own():
    key = new_key()
    a, b = torch.arange(100.0), torch.arange(100.0)
    prints = fingerprint([a, 7, b, a.view(10, 10)], key)
    assert prints[1] is None and len(prints) == 4
    assert prints[0] != prints[2]  # the same bytes at another position of the list: salted apart
    assert prints[3] != prints[0]  # one storage, two positions
    b[99] = 0.0
    after = fingerprint([a, 7, b, a.view(10, 10)], key)
    assert [x == y for x, y in zip(after, prints)] == [True, True, False, True]


def test_the_cpu_has_no_cache_to_release():
    assert release_cache(torch.device("cpu")) is False


@pytest.mark.gpu
def test_the_supervisors_cache_goes_back_only_above_what_it_may_keep():
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    small = torch.empty(KEEP_CACHED // 4, dtype=torch.uint8, device=device)
    del small
    assert release_cache(device) is False  # a few unused blocks are kept: no device-wide sync for them
    assert torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) > 0
    big = torch.empty(2 * KEEP_CACHED, dtype=torch.uint8, device=device)
    del big
    assert release_cache(device) is True
    assert torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) == 0


def test_a_problem_larger_than_the_hosts_memory_is_refused_on_the_cpu_before_anything_is_allocated():
    from kernelcraft.verify.memory import ProblemTooLarge, check_fits

    cost = compute_cost(load_problem(FIXTURES / "problems" / "relu_too_large.py").load())
    with pytest.raises(ProblemTooLarge, match=r"needs ~1025\.0 GiB .* of host memory; this machine has "
                                              r"\d+\.\d GiB available of \d+\.\d GiB"):
        check_fits("relu_too_large", "full sizes", cost, torch.device("cpu"), 0, processes=5)
    small = compute_cost(load_problem("level1/relu").load())
    assert check_fits("relu", "small", small, torch.device("cpu"), 0, processes=5).flush == 0


def test_eval_refuses_it_in_one_line_with_exit_2(tmp_path):
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    problem = FIXTURES / "problems" / "relu_too_large.py"
    candidate = REPO / "benchmarks" / "candidates" / "triton" / "relu.py"
    proc = subprocess.run([sys.executable, "-m", "kernelcraft.cli", "eval", str(problem), str(candidate), "--device",
                           "cpu", "--size", "full", "--cache-dir", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "needs ~1025.0 GiB" in proc.stderr and "GiB available" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
