"""CUDA tensors lent between the supervisor and its worker: one GPU, seen under two ordinals.

A worker sees one GPU (CUDA_VISIBLE_DEVICES holds only its supervisor's), as its `cuda:0`; the supervisor of the
machine's `cuda:3` knows the same card as 3. torch's CUDA IPC pickles a tensor with the sender's ordinal and opens
it on that ordinal on the receiving side, which on the other side names another card, or none: every candidate
judged on a GPU other than the first of a multi-GPU machine crashed its worker (seen on 4 H200s). Unpickled here,
a CUDA tensor or event is opened on the receiver's own ordinal of the card (the only one they share).
"""

from __future__ import annotations

import io
import pickle

_CUDA_TENSOR = ("torch.multiprocessing.reductions", "rebuild_cuda_tensor")
_CUDA_EVENT = ("torch.multiprocessing.reductions", "rebuild_event")
_DEVICE_ARG = 6  # rebuild_cuda_tensor(tensor_cls, size, stride, offset, storage_cls, dtype, storage_device, …)


class Unpickler(pickle.Unpickler):
    """Unpickles what the other side sent, opening CUDA tensors and events on `cuda_index` (None: as sent)."""

    def __init__(self, file, cuda_index: int | None):
        super().__init__(file)
        self.cuda_index = cuda_index

    def find_class(self, module: str, name: str):
        found = super().find_class(module, name)
        if self.cuda_index is None:
            return found
        index = self.cuda_index
        if (module, name) == _CUDA_TENSOR:
            def rebuild_here(*args):
                args = list(args)
                args[_DEVICE_ARG] = index
                return found(*args)
            return rebuild_here
        if (module, name) == _CUDA_EVENT:
            return lambda device, handle: found(index, handle)
        return found


def loads(data: bytes, cuda_index: int | None):
    return Unpickler(io.BytesIO(data), cuda_index).load()
