"""The cluster's verifier with one GPU actor (Ray started here): the verdict and the timings of this machine's
verifier, the GPU named on the result."""

from __future__ import annotations

import pytest

pytest.importorskip("ray")

from kernelcraft.candidate import Candidate  # noqa: E402
from kernelcraft.cluster.pool import ClusterVerifier  # noqa: E402
from kernelcraft.inputs import as_problem  # noqa: E402
from kernelcraft.verify import Job, TimingConfig, Verifier, VerifyConfig  # noqa: E402

pytestmark = pytest.mark.gpu


def test_one_gpu_actor_judges_as_this_machine_does(tmp_path):
    import torch

    config = VerifyConfig(timing=TimingConfig(budget_s=1.0), cache_dir=tmp_path / "cache")
    problem = as_problem("level1/softmax")
    candidates = [Candidate.from_file("example:softmax_triton"), Candidate.from_file("example:softmax_nvrtc")]
    with ClusterVerifier("local", "cuda", config, actors=1) as cluster:
        there = cluster.evaluate_many([Job(problem, c) for c in candidates])
        usage = cluster.usage()
    with Verifier("cuda:0", config) as direct:
        here = direct.evaluate_many([Job(problem, c) for c in candidates])
    assert [str(r.status) for r in there] == [str(r.status) for r in here] == ["ok", "ok"]
    assert {r.device for r in there} == {torch.cuda.get_device_name(0)} and all(r.node for r in there)
    assert usage[0]["name"] == torch.cuda.get_device_name(0) and usage[0]["judged"] == 2
    for a, b in zip(there, here):  # the same kernel on the same GPU: the same time, within the timings' spread
        assert abs(a.runtime_ms - b.runtime_ms) <= 0.15 * b.runtime_ms + a.runtime.iqr_ms + b.runtime.iqr_ms
