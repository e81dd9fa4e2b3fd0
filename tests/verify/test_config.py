"""VerifyConfig: the older `small` spelling becomes a size, and a worker start that does not exist is refused when the
config is made, not when the first worker starts."""

import pytest

from kernelcraft.verify import VerifyConfig
from kernelcraft.verify.config import WORKER_STARTS


def test_small_is_read_as_a_size():
    assert (VerifyConfig(small=True).size, VerifyConfig(small=True).small) == ("small", None)
    assert VerifyConfig(small=False).size == "full"
    assert VerifyConfig().size == "auto"


def test_an_unknown_worker_start_is_refused():
    with pytest.raises(ValueError, match="worker_start must be one of"):
        VerifyConfig(worker_start="thread")
    assert VerifyConfig().worker_start in WORKER_STARTS


def test_a_gpu_keeps_workers_started_ahead_and_a_cpu_worker_one_thread():
    config = VerifyConfig()
    assert config.standby_workers >= 1 and config.cpu_threads == 1 and config.device_lock
