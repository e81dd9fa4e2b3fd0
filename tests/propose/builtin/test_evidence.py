"""The built-in engineer's evidence rows (propose/builtin/evidence.py): every record a row cites is a file under
benchmarks/results/ that the index lists, every rule names something its family defines, and every row says what
was measured, on what card."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from kernelcraft.propose.builtin.evidence import Evidence, family_evidence

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
ROWS = [(family, row) for family, rows in family_evidence().items() for row in rows]


def problems(family: str, row: Evidence, listed: set[str]) -> list[str]:
    """What is wrong with one row: a record the index does not list, an empty field, a commit that is no commit, a
    rule its family does not define."""
    found = [f"{name} is not in benchmarks/results/index.json" for name in row.records if name not in listed]
    found += ["it cites no record"] if not row.records else []
    found += [f"its {name} is empty" for name in ("finding", "value", "device") if not getattr(row, name).strip()]
    if row.code is not None and not re.fullmatch(r"[0-9a-f]{7,40}", row.code):
        found.append(f"code {row.code!r} is no commit")
    package = f"kernelcraft.propose.builtin.families.{family}"
    where, _, name = row.rule.rpartition(".")
    try:
        module = importlib.import_module(f"{package}.{where}" if where else package)
    except ModuleNotFoundError:
        return [*found, f"{row.rule}: no module {where} in {package}"]
    return found + ([] if hasattr(module, name) else [f"{row.rule} is not defined in {module.__name__}"])


@pytest.fixture(scope="module")
def listed() -> set[str]:
    return {e["file"] for e in json.loads((RESULTS / "index.json").read_text())["records"]}


def test_families_keep_their_evidence_as_rows():
    assert len({family for family, _ in ROWS}) >= 1 and all(isinstance(row, Evidence) for _, row in ROWS)


@pytest.mark.parametrize("family,row", ROWS, ids=[f"{f}:{r.rule}:{i}" for i, (f, r) in enumerate(ROWS)])
def test_a_row_cites_records_that_exist_and_a_rule_its_family_defines(family, row, listed):
    assert problems(family, row, listed) == []


def test_the_check_finds_what_it_looks_for(listed):
    planted = Evidence("kernels.NOT_A_RULE", " ", "measured", "NVIDIA H100", ("no-such-record.json",), "xyz")
    assert problems("conv_transpose", planted, listed) == [
        "no-such-record.json is not in benchmarks/results/index.json", "its value is empty", "code 'xyz' is no commit",
        "kernels.NOT_A_RULE is not defined in kernelcraft.propose.builtin.families.conv_transpose.kernels"]
