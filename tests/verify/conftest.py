"""Fixtures of the worker tests: a fork server, for the workers forked from one (test_forkserver.py, and
test_process.py's tests run under both worker starts)."""

from __future__ import annotations

import pytest

from kernelcraft.verify.forkserver import ForkServer
from kernelcraft.verify.process import sandbox_paths, worker_environment
from tests.helpers import CPU_WORKER_ENV


@pytest.fixture(scope="module")
def fork_server():
    server = ForkServer(worker_environment(CPU_WORKER_ENV)[0], *sandbox_paths())
    yield server
    server.close()
