"""Rows read as tasks: the export's layout, verl's arguments, values as pandas hands them over."""

from __future__ import annotations

import numpy as np
import pytest

from kernelcraft.errors import ConfigError
from kernelcraft.rl import Task
from kernelcraft.rl.task import Settings
from tests.rl.conftest import row


def test_a_row_gives_the_problem_and_the_settings_it_was_judged_under():
    task = Task.from_row(row("level1/relu", best_speedup_eager=1.5))
    assert task.problem.name == "level1/relu" and "class Model" in task.problem.source
    assert task.backend == "triton" and task.best_known("eager") == 1.5 and task.best_known("compile") is None
    assert task.settings == Settings(device="cpu", policy="strict", size="small", trials=3, compile_baseline=False,
                                     timing_budget_s=0.2)
    assert len(task.sha) == 64


def test_values_from_parquet_through_pandas_read_as_plain_python():
    r = row("level1/relu", device="cuda:3", small=np.bool_(False), trials=np.int64(4), timing_budget_s=float("nan"),
            runs=np.array(["a", "b"]), compile_baseline=None)
    r["extra_info"]["policy"] = {"name": np.str_("relaxed"), "fp32": np.float64(1e-2)}
    s = Task.from_row(r).settings
    assert s == Settings(device="cuda", policy="relaxed", size="full", trials=4, compile_baseline=True,
                         timing_budget_s=6.0)


def test_verl_parts_without_extra_info_take_the_verifier_defaults():
    task = Task.from_parts(row("level1/relu")["reward_model"]["ground_truth"], None)
    assert task.backend is None and task.settings == Settings()
    assert Task.from_row(row("level1/relu"), device="cpu").settings.device == "cpu"


def test_rows_that_are_not_kernelcraft_rows_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="kernelcraft scores its own rows"):
        Task.from_row({**row("level1/relu"), "data_source": "gsm8k"})
    with pytest.raises(ConfigError, match="ground_truth must be the reference"):
        Task.from_parts("42", {})
