"""Shared fixtures: a private cache directory, a session-wide CPU verifier, the `gpu` marker; Ctrl-C stops the
shared verifiers' work at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.verify import Verifier, VerifyConfig
from tests.helpers import INTERRUPTED, close_shared, small_config


# The tests read what the CLI prints as a pipe gets it (no terminal: cli.common.PIPED_WIDTH wide). pytest-xdist's
# workers are started with COLUMNS=80 and LINES=24, which rich would honour, breaking lines the tests read whole.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def pytest_keyboard_interrupt(excinfo):
    """Ctrl-C: the session's shared verifiers, torn down next, stop what they are judging instead of finishing it."""
    INTERRUPTED.set()


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is false)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory) -> Path:
    """One cache for the session, so a C++ build made by one test is found by the next."""
    return tmp_path_factory.mktemp("kc-cache")


@pytest.fixture
def cache_config(tmp_path) -> VerifyConfig:
    """CPU verification settings whose cache lives in this test's own tmp dir."""
    return small_config(tmp_path / "cache")


@pytest.fixture(scope="session")
def cpu_verifier(cache_root):
    """The CPU verifier every verifier test shares (small sizes, 3 trials, 0.3 s of timing)."""
    verifier = Verifier("cpu", small_config(cache_root))
    yield verifier
    close_shared(verifier)


@pytest.fixture(scope="session")
def relu_problem():
    return load_problem("level1/relu")
