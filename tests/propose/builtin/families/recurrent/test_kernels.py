"""nn.LSTM and nn.GRU on the recurrent family's kernels against torch, in eval mode like the verifier, on small odd
shapes: one and two layers, one and two directions, batch-first or not, unbatched input, with and without bias and
initial states (forward inputs or buffers), one time step and several, every result (the output sequence, h_n, c_n,
one entry of each), and every move."""

import pytest
import torch

from kernelcraft.problems import load_problem
from kernelcraft.propose.base import Request
from kernelcraft.propose.builtin import chain, registry
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.family import TritonKernel
from kernelcraft.propose.builtin.plan import Op
from kernelcraft.propose.builtin.proposer import BuiltinProposer
from kernelcraft.propose.parse import parse_kernel
from tests.propose.builtin.chain_check import check_chain
from tests.propose.builtin.kernel_check import DEVICE, assert_no_torch_compute, load
from tests.propose.builtin.test_analyze import write

LSTM = "self.rnn = nn.LSTM({args})"
GRU = "self.rnn = nn.GRU({args})"


def check(tmp_path, forward: str, init: str, cases: list, args: str = "x", move: int = 0):
    """check_chain on the reference's ops: one op (without states) is a single op, anything else a chain."""
    first = ", ".join(f"torch.randn{tuple(s)}" for s in cases[0])
    single = analyze(write(tmp_path, forward, init, inputs=f"[{first}]", args=args)).single is not None
    return check_chain(tmp_path, forward, init, cases, args=args, move=move, single=single)


@pytest.mark.parametrize("args, forward, cases", [
    ("3, 5", "return self.rnn(x)[0]", [[(4, 2, 3)], [(1, 3, 3)]]),
    ("3, 6, 2, batch_first=True", "out, (h, c) = self.rnn(x)\nreturn out", [[(2, 5, 3)], [(3, 1, 3)]]),
    ("4, 5, 2, bidirectional=True", "out, (h, c) = self.rnn(x, (h0, c0))\nreturn out",
     [[(3, 2, 4), (4, 2, 5), (4, 2, 5)], [(1, 3, 4), (4, 3, 5), (4, 3, 5)]]),
    ("3, 7, 2, batch_first=True, bidirectional=True", "out, (h, c) = self.rnn(x, (h0, c0))\nreturn h",
     [[(2, 3, 3), (4, 2, 7), (4, 2, 7)], [(5, 1, 3), (4, 5, 7), (4, 5, 7)]]),
    ("3, 5, 2", "out, state = self.rnn(x, (h0, c0))\nreturn state[1]",
     [[(3, 2, 3), (2, 2, 5), (2, 2, 5)], [(1, 1, 3), (2, 1, 5), (2, 1, 5)]]),
    ("3, 5, 1, bias=False, bidirectional=True", "return self.rnn(x)[1][1]", [[(3, 2, 3)]]),
    ("3, 5, 2, batch_first=True", "out, _ = self.rnn(x)\nreturn out[:, -1, :]", [[(2, 4, 3)], [(3, 1, 3)]]),
    ("3, 5, 2, bidirectional=True", "out, (h, c) = self.rnn(x)\nreturn out[1] * 2.0", [[(3, 2, 3)]]),
    ("3, 5, 2", "h = self.rnn(x)[1][0]\nreturn h[-1]", [[(3, 2, 3)]]),
])
def test_lstm_matches_torch(tmp_path, args, forward, cases):
    check(tmp_path, forward, LSTM.format(args=args), cases, args="x, h0, c0" if "h0" in forward else "x")


@pytest.mark.parametrize("args, forward, cases", [
    ("3, 5", "return self.rnn(x)[0]", [[(4, 2, 3)], [(1, 3, 3)]]),
    ("3, 6, 2, batch_first=True", "out, h = self.rnn(x, h0)\nreturn out",
     [[(2, 5, 3), (2, 2, 6)], [(3, 1, 3), (2, 3, 6)]]),
    ("4, 5, 2, bidirectional=True", "out, h = self.rnn(x, h0)\nreturn out",
     [[(3, 2, 4), (4, 2, 5)], [(1, 3, 4), (4, 3, 5)]]),
    ("3, 7, 2, bidirectional=True, bias=False", "out, h = self.rnn(x, hx=h0)\nreturn h",
     [[(3, 2, 3), (4, 2, 7)], [(2, 1, 3), (4, 1, 7)]]),
    ("3, 5, 2, batch_first=True", "return self.rnn(x)[1][-1]", [[(2, 4, 3)]]),
])
def test_gru_matches_torch(tmp_path, args, forward, cases):
    check(tmp_path, forward, GRU.format(args=args), cases, args="x, h0" if "h0" in forward else "x")


def test_unbatched_inputs_and_buffer_states(tmp_path):
    init = "self.rnn = nn.LSTM(3, 5, 2, batch_first=True)\nself.register_buffer('h0', torch.randn(2, 5))\n" \
           "self.register_buffer('c0', torch.randn(2, 5))"
    check(tmp_path, "out, (h, c) = self.rnn(x, (self.h0, self.c0))\nreturn out", init, [[(4, 3)], [(1, 3)]])
    check(tmp_path, "return self.rnn(x)[1]", "self.rnn = nn.GRU(3, 5, 2, bidirectional=True)", [[(4, 3)]])


def test_one_lstm_feeds_another_its_states(tmp_path):
    init = "self.enc = nn.LSTM(3, 5)\nself.dec = nn.LSTM(4, 5)"
    ops, _ = check(tmp_path, "_, state = self.enc(x)\nout, _ = self.dec(y, state)\nreturn out", init,
                         [[(3, 2, 3), (2, 2, 4)]], args="x, y")
    assert [op.detail["result"] for op in ops] == ["h_n", "c_n", "output"] and ops[2].detail["states"] == [0, 1]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_every_move(tmp_path, kind):
    """Hidden units over several programs and K steps, batch rows over several programs, two layers both ways."""
    init = f"self.rnn = nn.{kind.upper()}(3, 37, 2, bidirectional=True, batch_first=True)"
    forward = "out, _ = self.rnn(x)\nreturn out"
    op = analyze(write(tmp_path, forward, init, inputs="[torch.randn(17, 3, 3)]")).single
    assert op is not None and op.kind == kind
    for k in range(len(registry.moves(op))):
        check_chain(tmp_path, forward, init, [[(17, 3, 3)]], move=k, single=True)


def test_dropout_is_the_identity_in_eval_mode_and_refused_in_training(tmp_path):
    init = "self.rnn = nn.GRU(3, 5, 2, dropout=0.5)"
    _, source = check(tmp_path, "return self.rnn(x)[0]", init, [[(4, 2, 3)]])
    module = load(source, tmp_path)
    with pytest.raises(ValueError, match="dropout between layers in training mode"):
        module.ModelNew().train()(torch.randn(4, 2, 3, device=DEVICE))


def test_the_suite_problem_through_the_engineer(tmp_path):
    """The engineer's first implementation of level3/lstm_classifier at its SMALL_SIZES: the LSTM leads the chain."""
    problem = load_problem("level3/lstm_classifier")
    engineer = BuiltinProposer("cpu")
    ops = engineer.coverage(problem, "triton").chain
    assert chain.lead(ops) == 0 and engineer.moves(ops, "triton")[0].params == registry.moves(ops[0])[0].params
    parsed = parse_kernel(engineer.ask(Request("implement", problem, "triton")).text)
    assert parsed.error is None
    assert_no_torch_compute(parsed.source)
    module = load(parsed.source, tmp_path)
    for key, value in problem.load(small=True).SMALL_SIZES.items():
        setattr(module, key, value)
    torch.manual_seed(0)
    inputs = [t.to(DEVICE) for t in module.get_inputs()]
    torch.manual_seed(1)
    ref = module.Model(*module.get_init_inputs()).to(DEVICE).eval()
    torch.manual_seed(1)
    new = module.ModelNew(*module.get_init_inputs()).to(DEVICE).eval()
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), ref(*inputs), rtol=1e-4, atol=1e-4)


def test_the_step_kernel_compiles_once_for_every_time_step():
    """Its per-step offsets are not specialized on their values (Triton would compile a variant for t == 1 and for
    each multiple of 16 otherwise); a name the kernel does not take is an error."""
    for kind in ("lstm", "gru"):
        op = Op(kind, {"module": "rnn", "result": "output", "index": None, "states": []})
        kernel = registry.parts(op, registry.moves(op)[0].params).blocks[1]
        assert set(kernel.unspecialized) <= set(kernel.params) and "t" in kernel.unspecialized
        assert kernel.source().splitlines()[1].startswith("@triton.jit(do_not_specialize=['t', 'hp_off'")
        with pytest.raises(ValueError, match="no run-time parameters"):
            TritonKernel("kc_k", ("a",), (), "pass", unspecialized=("b",)).source()
