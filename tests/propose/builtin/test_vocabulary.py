"""One op vocabulary: the region cutter (apply/regions.py) reads which op is which kind from what the kernel
families declare in their own folders (`Family.cut`), and it agrees with how the engineer reads the same calls
(spellings.py): an op the engineer takes as a pointwise step, a reduction or a matrix product is cut as one."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import fx

from kernelcraft.apply.regions import constant_nodes, op_kind, partition
from kernelcraft.propose.builtin import vocabulary
from kernelcraft.propose.builtin.plan import UNARY, WITH_PARAMS
from kernelcraft.propose.builtin.registry import all_families
from kernelcraft.propose.builtin.spellings import FUNCS, MATMUL_FUNCS, MATMUL_METHODS, METHODS, REDUCE

def fused_gate(x):  # an op no family declares: the cutter leaves it "other"
    return x * torch.sigmoid(x)


fx.wrap("fused_gate")  # traced as one call

STEPS = UNARY | set(WITH_PARAMS) | {"minimum", "maximum", "clamp_min", "clamp_max", "relu6", "masked_fill"}


@pytest.fixture
def families_plus(monkeypatch):
    """The registry's families and `extra`, the vocabulary built again from them (and again after the test)."""
    def use(*extra):
        monkeypatch.setattr(vocabulary, "all_families", lambda: (*all_families(), *extra))
        vocabulary.vocabulary.cache_clear()
    yield use
    vocabulary.vocabulary.cache_clear()


def test_what_the_engineer_reads_as_a_step_a_reduction_or_a_product_is_cut_as_one():
    for fn, canonical in FUNCS.items():
        name = fn.__name__
        if canonical in STEPS:
            assert vocabulary.kind_of(name) == "pointwise", (name, canonical)
        elif canonical in REDUCE:
            assert vocabulary.kind_of(name) == "reduce", (name, canonical)
    for method, canonical in METHODS.items():
        if canonical in STEPS:
            assert vocabulary.kind_of(method) == "pointwise", (method, canonical)
    for name in {fn.__name__ for fn in MATMUL_FUNCS} | MATMUL_METHODS:
        assert vocabulary.kind_of(name) == "matmul", name


def test_a_family_declares_its_ops_in_its_own_folder_and_the_cutter_makes_regions_of_them(families_plus):
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(fused_gate(x) + 1.0)

    graph = fx.symbolic_trace(Model())
    gate = next(n for n in graph.graph.nodes if n.target is fused_gate)
    assert op_kind(gate) == "other"

    gemm = next(f for f in all_families() if f.name == "gemm")
    families_plus(dataclasses.replace(gemm, name="gates", kinds=("gate",), cut={"attention": ("fused_gate",)}))
    assert op_kind(gate) == "attention"
    groups = partition(graph.graph, constant_nodes(graph.graph))
    head = next(g for g in groups if g.head is gate)
    assert head.kind == "attention" and len(head.nodes) == 3  # the gate starts a region; its pointwise tail joins


def test_two_kinds_claiming_one_name_is_an_error_naming_both(families_plus):
    gemm = next(f for f in all_families() if f.name == "gemm")
    families_plus(dataclasses.replace(gemm, name="rival", cut={"reduce": ("addmm",)}))
    with pytest.raises(vocabulary.VocabularyError, match=r"'addmm' is cut as linear \(family gemm\) and as reduce "
                                                         r"\(family rival\)"):
        vocabulary.kind_of("addmm")
