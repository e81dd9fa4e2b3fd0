"""The IR's passes over a list of ops (plan.py): which ops read a result, dropping an op with its readers renumbered,
and merging consecutive elementwise ops into one, every kind of value ref kept right; steps that read the op's own
earlier values ("step", k), where they may be split and how they read once moved."""

from kernelcraft.propose.builtin.plan import (Op, can_cut, drop, is_own, merge_elementwise, operand_refs, own_steps,
                                              readers, reads, shift)


def ew(src, *steps) -> Op:
    return Op("elementwise", {"steps": [list(s) for s in steps]}, src)


def test_readers_lists_each_read():
    ops = [Op("linear", {"steps": []}), ew(0, ("relu",)), ew(1, ("tmul", 1)), Op("cat", {"dim": 0, "parts": [2, 0]}, 2)]
    assert (readers(ops, 0), readers(ops, 1), readers(ops, 2), readers(ops, 3)) == ([1, 3], [2, 2], [3, 3], [])


def test_drop_renumbers_every_kind_of_ref():
    ops = [Op("linear", {"steps": []}), ew(0, ("relu",)), ew(1, ("tadd", 0), ("tmul", ("attr", "w"))),
           Op("view", {"shape": [["size", 1, 0], -1]}, 2), Op("cat", {"dim": 0, "parts": [3, 1, "x"]}, 3),
           Op("lstm", {"module": "rnn", "result": "output", "index": None, "states": [1, ("input", 1)]}, 4)]
    out = drop(ops, 1, 0)  # what read op 1 reads op 0 instead
    assert [(op.kind, op.src) for op in out] == [("linear", "x"), ("elementwise", 0), ("view", 1), ("cat", 2),
                                                 ("lstm", 3)]
    assert out[1].detail["steps"] == [["tadd", 0], ["tmul", ("attr", "w")]]
    assert out[2].detail["shape"] == [["size", 0, 0], -1]
    assert out[3].detail["parts"] == [2, 0, "x"] and out[4].detail["states"] == [0, ("input", 1)]


def test_an_elementwise_op_read_only_as_the_next_ones_src_merges_into_it():
    ops = [Op("softmax", {"dim": 1}), ew(0, ("relu",), ("tadd", ("input", 1))), Op("reduce", {"op": "sum"}, "x"),
           ew(1, ("tmul", 2), ("sigmoid",)), ew(3, ("mul", 2.0)), Op("layernorm", {}, 4)]
    out = merge_elementwise(ops)
    assert [(op.kind, op.src) for op in out] == [("softmax", "x"), ("reduce", "x"), ("elementwise", 0),
                                                 ("layernorm", 2)]
    assert out[2].detail["steps"] == [["relu"], ["tadd", ("input", 1)], ["tmul", 1], ["sigmoid"], ["mul", 2.0]]


def test_no_merge_where_the_result_is_read_otherwise():
    as_operand = [ew("x", ("relu",)), ew(0, ("tmul", 0))]  # read as src and as operand
    two_readers = [ew("x", ("relu",)), ew(0, ("neg",)), ew(0, ("tadd", 1))]
    not_elementwise = [ew("x", ("relu",)), Op("softmax", {"dim": 1}, 0)]
    for ops in (as_operand, two_readers, not_elementwise):
        kinds = [(op.kind, op.src, op.detail.get("steps")) for op in ops]
        assert [(op.kind, op.src, op.detail.get("steps")) for op in merge_elementwise(ops)] == kinds


def test_own_values_are_no_value_refs():
    steps = [["tadd", ("attr", "b")], ["relu"], ["tmul", ("step", 1)], ["tsub", ("step", 0)], ["tadd", 0]]
    assert is_own(("step", 1)) and not is_own(("attr", "step")) and not is_own(0)
    assert operand_refs(steps) == [("attr", "b"), 0] and own_steps(steps) == {0, 1}
    assert reads(Op("elementwise", {"steps": steps}, 1)) == [1, ("attr", "b"), 0]


def test_steps_split_only_where_the_rest_reads_no_own_value_before_the_cut():
    steps = [["relu"], ["tadd", ("step", 0)], ["sigmoid"], ["tmul", ("step", 2)]]
    assert [n for n in range(5) if can_cut(steps, n)] == [0, 2, 4]
    assert shift(steps[2:], -2) == [["sigmoid"], ["tmul", ("step", 0)]]
    assert shift((("tmul", ("step", 0)), ("neg",)), 3) == (("tmul", ("step", 3)), ("neg",))  # a chain's tuples


def test_a_merged_op_reads_its_own_values_past_the_first_ones_steps():
    ops = merge_elementwise([ew("x", ("relu",), ("tadd", ("step", 0))), ew(0, ("tanh",), ("tmul", ("step", 0)))])
    assert [(op.src, op.detail["steps"]) for op in ops] == [
        ("x", [["relu"], ["tadd", ("step", 0)], ["tanh"], ["tmul", ("step", 2)]])]
