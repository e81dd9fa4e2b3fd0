"""CUDA tensors and events unpickled on the receiver's ordinal of the one GPU both sides share (verify/ipc.py):
what torch's rebuilders are called with, checked without a GPU by pickling calls of stand-ins."""

from __future__ import annotations

import pickle

import pytest
import torch.multiprocessing.reductions as reductions

from kernelcraft.verify import ipc
from kernelcraft.verify.process import UnsafeReply, safe_loads


class Sent:
    """Pickles as a call of the named torch rebuilder with the given arguments (as torch's CUDA reductions do)."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def stand_ins(monkeypatch) -> list:
    """torch's rebuilders replaced (after the data was pickled: it names them) by recorders of their calls."""
    seen = []
    monkeypatch.setattr(reductions, "rebuild_cuda_tensor", lambda *args: seen.append(("tensor", args)) or "t")
    monkeypatch.setattr(reductions, "rebuild_event", lambda device, handle: seen.append(("event", device)) or "e")
    return seen


def cuda_tensor(device: int):
    return Sent(reductions.rebuild_cuda_tensor, "cls", (2,), (1,), 0, "storage", "dtype", device, b"h", 8, 0, False,
                b"r", 0, b"e", True)


def test_a_cuda_tensor_opens_on_the_receivers_ordinal(monkeypatch):
    data = pickle.dumps({"inputs": [cuda_tensor(3)], "event": Sent(reductions.rebuild_event, 3, b"h")})
    sent_on_0, sent_on_5 = pickle.dumps([cuda_tensor(0)]), pickle.dumps([cuda_tensor(5)])
    calls = stand_ins(monkeypatch)
    assert ipc.loads(data, 0) == {"inputs": ["t"], "event": "e"}
    assert calls[0][0] == "tensor" and calls[0][1][6] == 0 and calls[0][1][7] == b"h"  # the rest as sent
    assert calls[1] == ("event", 0)
    calls.clear()
    ipc.loads(sent_on_0, 2)  # the worker's cuda:0 is the supervisor's cuda:2
    assert calls[0][1][6] == 2
    calls.clear()
    ipc.loads(sent_on_5, None)  # no GPU here: as sent
    assert calls[0][1][6] == 5


def test_a_reply_is_still_refused_what_it_may_not_hold(monkeypatch):
    reply, unsafe = pickle.dumps([cuda_tensor(0)]), pickle.dumps(Sent(print, "x"))
    calls = stand_ins(monkeypatch)
    assert safe_loads(reply, 1) == ["t"] and calls[0][1][6] == 1
    with pytest.raises(UnsafeReply):
        safe_loads(unsafe, 1)
