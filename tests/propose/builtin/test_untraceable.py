"""A reference torch.fx cannot trace is said in words (what its forward does), the raw error kept after them."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.proposer import BuiltinProposer, CoverageError
from tests.propose.builtin.test_analyze import write


@pytest.mark.parametrize("forward, words", [
    ("for i in range(x.shape[1]):\n    x = x + 1\nreturn x", "uses a tensor value as a Python integer"),
    ("return x * int(x.shape[0])", "turns a tensor value into a Python number"),
    ("if x.sum() > 0:\n    return x\nreturn -x", "branches on a tensor value"),
    ("n = [1, 2, 3][:x.shape[0]]\nreturn x * len(n)", "slices with a bound computed from a tensor"),
    ("for row in x:\n    pass\nreturn x", "iterates over a tensor value"),
    ("return x * len(x)", "calls len() on a tensor"),
])
def test_each_known_trace_error_is_said_in_words(tmp_path, forward, words):
    analysis = analyze(write(tmp_path, forward))
    assert analysis.single is None and analysis.ops == []
    assert words in analysis.untraceable and analysis.error  # the raw exception is kept beside the words


def test_a_failing_constructor_is_not_a_trace_error(tmp_path):
    analysis = analyze(write(tmp_path, "return x", "raise RuntimeError('no')"))
    assert analysis.error == "RuntimeError: no" and analysis.untraceable is None


def test_the_lstm_loop_is_said_in_words_with_the_raw_error_after_them():
    with pytest.raises(CoverageError) as err:
        BuiltinProposer("cpu").coverage(load_problem("level3/lstm_loop"), "triton")
    message = str(err.value)
    assert message.startswith("the built-in engineer cannot trace level3/lstm_loop: its forward uses a tensor value "
                              "as a Python integer")
    assert "torch.fx cannot trace; try --model with an LLM." in message
    assert message.endswith("torch.fx said: TypeError: 'Proxy' object cannot be interpreted as an integer")
    assert "\n" not in message
