"""What analyze() reads out of nn.LSTM and nn.GRU calls: each spelling of the call and of its results (the output
sequence, h_n, c_n, one entry of them) as one lstm / gru op per result read, what the ops read (initial states
from inputs, buffers or another LSTM), and what it must refuse, by name."""

from __future__ import annotations

import pytest

from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from tests.helpers import KERNELBENCH
from tests.propose.builtin.test_analyze import write

X = "[torch.randn(4, 2, 3)]"
X_STATES = "[torch.randn(4, 2, 3), torch.randn(2, 2, 5), torch.randn(2, 2, 5)]"


def ops(tmp_path, forward: str, init: str, inputs: str = X, args: str = "x"):
    analysis = analyze(write(tmp_path, forward, init, inputs=inputs, args=args))
    assert not analysis.unsupported and analysis.error is None, analysis
    return [(op.kind, op.src, op.detail) for op in analysis.ops]


def result(module: str, which: str, index=None, states=()) -> dict:
    return {"module": module, "result": which, "index": index, "states": list(states)}


LSTM = "self.lstm = nn.LSTM(3, 5, 2)"
GRU = "self.gru = nn.GRU(3, 5, 2)"
IN1, IN2 = ("input", 1), ("input", 2)


@pytest.mark.parametrize("forward, init, args, inputs, want", [
    ("return self.lstm(x)[0]", LSTM, "x", X, [("lstm", "x", result("lstm", "output"))]),
    ("out, (h, c) = self.lstm(x, (h0, c0))\nreturn h", LSTM, "x, h0, c0", X_STATES,
     [("lstm", "x", result("lstm", "h_n", states=[IN1, IN2]))]),
    ("out, state = self.lstm(x, hx=[h0, c0])\nreturn state[1]", LSTM, "x, h0, c0", X_STATES,
     [("lstm", "x", result("lstm", "c_n", states=[IN1, IN2]))]),
    ("return self.lstm(input=x)[1][0][-1]", LSTM, "x", X, [("lstm", "x", result("lstm", "h_n", index=-1))]),
    ("out, _ = self.lstm(x)\nreturn out[-1]", LSTM, "x", X, [("lstm", "x", result("lstm", "output", index=-1))]),
    ("out, _ = self.lstm(x)\nreturn out[:, 2, :]", "self.lstm = nn.LSTM(3, 5, batch_first=True)", "x", X,
     [("lstm", "x", result("lstm", "output", index=2))]),
    ("out, h = self.gru(x, h0)\nreturn out", GRU, "x, h0", "[torch.randn(4, 2, 3), torch.randn(2, 2, 5)]",
     [("gru", "x", result("gru", "output", states=[IN1]))]),
    ("return self.gru(x, self.h0)[1]", GRU + "\nself.register_buffer('h0', torch.zeros(2, 2, 5))", "x", X,
     [("gru", "x", result("gru", "h_n", states=[("attr", "h0")]))]),
    ("return self.gru(torch.tanh(x), h0 * 0.5)[1]", GRU, "x, h0", "[torch.randn(4, 2, 3), torch.randn(2, 2, 5)]",
     [("elementwise", "x", {"steps": [["tanh"]]}), ("elementwise", IN1, {"steps": [["mul", 0.5]]}),
      ("gru", 0, result("gru", "h_n", states=[1]))]),
])
def test_each_spelling_is_one_op_per_result(tmp_path, forward, init, args, inputs, want):
    assert ops(tmp_path, forward, init, inputs, args) == want


def test_a_result_read_twice_is_one_op_and_two_results_are_two(tmp_path):
    assert ops(tmp_path, "out, (h, c) = self.lstm(x)\nreturn out * out[0]", LSTM) == [
        ("lstm", "x", result("lstm", "output", index=0)), ("lstm", "x", result("lstm", "output")),
        ("elementwise", 1, {"steps": [["tmul", 0]]})]
    found = ops(tmp_path, "out, (h, c) = self.lstm(x)\nreturn h + c + h", LSTM)
    assert [d["result"] for k, _, d in found if k == "lstm"] == ["h_n", "c_n"]


def test_a_linear_over_the_last_step_and_an_unused_head_pruned(tmp_path):
    init = "self.lstm = nn.LSTM(3, 5, 2, batch_first=True)\nself.fc = nn.Linear(5, 2)"
    assert [(k, s, d.get("index")) for k, s, d in ops(tmp_path, "out, _ = self.lstm(x)\nreturn self.fc(out[:, -1, :])",
                                                       init)] == [("lstm", "x", -1), ("linear", 0, None)]
    found = ops(tmp_path, "out, state = self.lstm(x)\nout = self.fc(out[:, -1, :])\nreturn state[0]", init)
    assert found == [("lstm", "x", result("lstm", "h_n"))]  # (KernelBench's LSTMHn: the head is thrown away)


def test_another_lstms_state_pair_is_read_as_its_two_results(tmp_path):
    found = ops(tmp_path, "_, state = self.enc(x)\nreturn self.dec(x, state)[0]",
                "self.enc = nn.LSTM(3, 5)\nself.dec = nn.LSTM(3, 5)")
    assert found == [("lstm", "x", result("enc", "h_n")), ("lstm", "x", result("enc", "c_n")),
                     ("lstm", "x", result("dec", "output", states=[0, 1]))]


def test_the_single_op_is_one_without_states(tmp_path):
    assert analyze(write(tmp_path, "return self.gru(x)[0]", GRU, inputs=X)).single is not None
    with_states = analyze(write(tmp_path, "return self.gru(x, h0)[0]", GRU, args="x, h0",
                                inputs="[torch.randn(4, 2, 3), torch.randn(2, 2, 5)]"))
    assert with_states.single is None and len(with_states.chain) == 1  # its states are passed: a chain of one


@pytest.mark.parametrize("forward, init, args, missing", [
    ("return self.lstm(x)[0]", "self.lstm = nn.LSTM(3, 5, proj_size=2)", "x", "lstm with proj_size"),
    ("return self.lstm(x, (h0, c0))[0]", LSTM, "x, h0=None, c0=None",
     "lstm initial state h0 left to forward's default (get_inputs does not pass it)"),
    ("out, _ = self.lstm(x)\nreturn out[:, :, :2]", LSTM, "x", "lstm output subscript"),
    ("out, _ = self.lstm(x)\nreturn out[:, 0]", LSTM, "x", "lstm output subscript"),  # a batch entry, not a step
    ("return self.lstm(x)[1][0][:, 0]", LSTM, "x", "lstm h_n subscript"),
    ("return self.gru(x)[2]", GRU, "x", "gru[2]"),
    ("return self.lstm(x)[1][2]", LSTM, "x", "lstm state[2]"),
    ("return self.gru(x, (x, x))[0]", GRU, "x", "gru"),
    ("return self.gru(x).count(0)", GRU, "x", "gru's result tuple read as a whole"),
    ("return torch.stack(self.lstm(x)[1])", LSTM, "x", "lstm's (h_n, c_n) read as a whole"),
    ("return self.rnn(x)[0]", "self.rnn = nn.RNN(3, 5)", "x", "rnn"),
])
def test_refusals_say_what(tmp_path, forward, init, args, missing):
    analysis = analyze(write(tmp_path, forward, init, inputs=X, args=args))
    assert analysis.error is None and missing in analysis.unsupported, analysis


def test_the_suite_problem_is_an_lstm_then_a_linear():
    analysis = analyze(load_problem("level3/lstm_classifier"))
    assert [(op.kind, op.src) for op in analysis.chain] == [("lstm", "x"), ("linear", 0)]
    assert analysis.chain[0].detail == result("lstm", "output", index=-1)


KERNELBENCH_RECURRENT = {  # upstream problem: its op's kind, result and states
    "level3/36_LSTMHn": ("lstm", "h_n", [IN1, IN2]),
    "level3/42_GRUBidirectionalHidden": ("gru", "h_n", [IN1]),
}


@pytest.mark.skipif(not (KERNELBENCH / "level3").is_dir(), reason="no KernelBench copy")
@pytest.mark.parametrize("name", sorted(KERNELBENCH_RECURRENT))
def test_kernelbench_recurrent_problems_are_read(name):
    analysis = analyze(load_problem(KERNELBENCH / f"{name}.py"))
    assert analysis.chain is not None, analysis
    kind, which, states = KERNELBENCH_RECURRENT[name]
    assert [(op.kind, op.detail["result"], op.detail["states"]) for op in analysis.chain] == [(kind, which, states)]
