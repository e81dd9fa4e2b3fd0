"""A search run on a real GPU: NVRTC kernels served by the scripted chat server, full problem size."""

from __future__ import annotations

import pytest

from kernelcraft.search import RunConfig, start_run
from kernelcraft.spec import RunSpec
from kernelcraft.verify import TimingConfig, Verifier, VerifyConfig
from tests.helpers import FIXTURES
from tests.llm_server import Reply, Rule
from tests.search.conftest import code

pytestmark = pytest.mark.gpu


def test_tree_on_a_gpu_finds_the_correct_nvrtc_kernel(store, relu, serve, proposer, tmp_path):
    honest = (FIXTURES / "relu_nvrtc.py").read_text()
    wrong = honest.replace("x[i] < 0.0f ? 0.0f : x[i]", "x[i] < 0.0f ? 0.0f : x[i] + 1.0f")
    assert wrong != honest
    server = serve([Rule(r"Propose \d+ distinct", [Reply('```json\n[{"idea": "one thread per element", '
                                                         '"category": "parallelism"}, {"idea": "add one", '
                                                         '"category": "precision"}]\n```')]),
                    Rule("applies this idea: one thread", [Reply(code(honest))]),
                    Rule("applies this idea: add one", [Reply(code(wrong))])])
    config = VerifyConfig(cache_dir=tmp_path / "cache", timing=TimingConfig(budget_s=1.0), compile_baseline=False)
    with Verifier("cuda", config) as verifier:
        out = start_run(store, relu, proposer(server), verifier,
                        RunSpec(RunConfig(strategy="tree", backend="cuda_nvrtc", rounds=1, ideas=2, impls=1)),
                        out_dir=tmp_path)
    statuses = {c.key: c.status for c in store.candidates(out.run_id)}
    assert statuses == {"r01/i00/m00": "ok", "r01/i01/m00": "incorrect"}
    assert out.best.key == "r01/i00/m00" and out.best.result.device.startswith("NVIDIA")
    assert 0.0 <= out.gpu_idle_fraction < 1.0
