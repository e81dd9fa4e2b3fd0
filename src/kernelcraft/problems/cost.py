"""A problem's work, computed rather than typed in: FLOPs, the bytes it must move, its outputs' shapes.

The reference runs once on the meta device (shapes only, no memory, no time) under a dispatch mode
that counts every ATen op: matmul, convolution and attention through torch's FLOP formulas, every
other op as one FLOP per element it touches. The byte floor is one read of every input and parameter
and one write of every output: what a perfect fused kernel moves. The same pass follows which tensors
are alive, so the reference's peak memory (inputs, parameters, intermediates, outputs) is known before
anything is allocated on a device.

nn.GRU, nn.LSTM and nn.RNN are counted whole, from their weights' shapes (`_Recurrent`): on the meta device torch
runs them as Python decompositions, one op at a time for every step of every layer (KernelBench's level3/42, a
6-layer bidirectional GRU over 512 steps: 16 s a count, and deriving its CPU sizes counts it 13 times). The
formula gives the decomposition's matmul FLOPs exactly and its other FLOPs within a few percent.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from kernelcraft.errors import ProblemError

# Ops that only move metadata or allocate: no arithmetic.
_FREE = {"view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "squeeze",
         "unsqueeze", "detach", "alias", "slice", "select", "as_strided", "empty", "empty_like",
         "empty_strided", "lift_fresh", "clone", "contiguous", "_to_copy", "copy_", "zeros", "ones",
         "full", "new_empty", "new_zeros", "split", "split_with_sizes", "unbind", "flatten",
         "unflatten", "view_as", "expand_as", "_reshape_alias", "clamp_min_", "fill_", "zero_",
         "arange", "scalar_tensor", "lift_fresh_copy", "randn", "rand", "randint", "normal_",
         "uniform_", "random_"}
_TENSOR_CORE = (torch.float16, torch.bfloat16)


@dataclass
class TensorSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * torch.empty((), dtype=self.dtype).element_size()

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "dtype": str(self.dtype).replace("torch.", "")}


@dataclass
class Cost:
    flops: int
    bytes: int
    matmul_flops: int  # the part done by matmul/conv/attention: what tensor cores could take
    matmul_dtype: str | None  # their input dtype
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    params_bytes: int = 0  # the model's parameters and buffers
    peak_bytes: int = 0  # the forward's most memory alive at once: inputs, parameters, intermediates, outputs

    @property
    def input_bytes(self) -> int:
        return sum(s.nbytes for s in self.inputs)

    @property
    def output_bytes(self) -> int:
        return sum(s.nbytes for s in self.outputs)

    @property
    def intensity(self) -> float:
        return self.flops / max(self.bytes, 1)

    def to_dict(self) -> dict:
        return {"flops": self.flops, "bytes": self.bytes, "matmul_flops": self.matmul_flops,
                "matmul_dtype": self.matmul_dtype, "intensity": round(self.intensity, 3),
                "inputs": [s.to_dict() for s in self.inputs], "outputs": [s.to_dict() for s in self.outputs],
                "params_bytes": self.params_bytes, "peak_bytes": self.peak_bytes}


class _Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.flops = 0
        self.matmul_flops = 0
        self.matmul_dtype: str | None = None
        # Storages created inside the forward, alive now: id -> [bytes, tensors still holding it].
        self._live: dict[int, list[int]] = {}
        self._seen: set[int] = set()
        self.live_bytes = self.peak_live = 0

    def _track(self, values) -> None:
        for t in tree_flatten(values)[0]:
            if not isinstance(t, torch.Tensor) or id(t) in self._seen:
                continue
            key = t.untyped_storage()._cdata
            entry = self._live.get(key)
            if entry is None:
                entry = self._live[key] = [t.untyped_storage().nbytes(), 0]
                self.live_bytes += entry[0]
                self.peak_live = max(self.peak_live, self.live_bytes)
            entry[1] += 1
            self._seen.add(id(t))
            weakref.finalize(t, self._release, key, id(t))

    def _release(self, key: int, ident: int) -> None:
        self._seen.discard(ident)
        entry = self._live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                self.live_bytes -= entry[0]
                del self._live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self._track(out)
        packet = func._overloadpacket
        name = packet.__name__.rstrip("_") if packet.__name__ not in _FREE else packet.__name__
        if packet in flop_registry:
            n = int(flop_registry[packet](*args, **kwargs, out_val=out))
            self.flops += n
            self.matmul_flops += n
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None:
                self.matmul_dtype = str(first.dtype).replace("torch.", "")
        elif name not in _FREE and packet.__name__ not in _FREE:
            tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            self.flops += max((t.numel() for t in tensors), default=0)
        return out


# The dense call of each recurrent op: its gates a step, and the other FLOPs a hidden unit a step a layer and
# direction the decomposition counts (measured on small GRU, LSTM and RNN calls: 17 to 18.4, and 4.2)
_RECURRENT = {torch.gru: (3, 18), torch.lstm: (4, 18), torch.rnn_tanh: (1, 4), torch.rnn_relu: (1, 4)}


class _Recurrent(TorchFunctionMode):
    """A dense (not packed) torch.gru / lstm / rnn_* call on meta tensors counted whole into `counter`: its
    matmul FLOPs 2 x (steps x batch) x every weight matrix's size, its other FLOPs per hidden unit, its outputs
    made as empty meta tensors (tracked by the counter like any op's), and beside them what the decomposition holds
    at its fullest: the last layer's output sequence, each direction's steps stacked, a step's gates (its peak was
    measured at 3.1x the output sequence for one direction, 4.1x for two)."""

    def __init__(self, counter: _Counter):
        super().__init__()
        self.counter = counter

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        dense = len(args) == 9 and isinstance(args[3], bool) and isinstance(args[0], torch.Tensor)
        if func not in _RECURRENT or kwargs or not dense or not args[0].is_meta:
            return func(*args, **kwargs)
        x, hx, params, _, layers, _, _, bidirectional, _ = args
        gates, per_unit = _RECURRENT[func]
        states = list(hx) if isinstance(hx, (tuple, list)) else [hx]
        directions = 2 if bidirectional else 1
        rows = x.numel() // max(x.shape[-1], 1)  # steps x batch
        hidden = params[1].shape[0] // gates  # w_hh: (gates x hidden, hidden or proj)
        matmul = 2 * rows * sum(w.numel() for w in params if w.dim() == 2)
        counter = self.counter
        counter.flops += matmul + per_unit * rows * hidden * layers * directions
        counter.matmul_flops += matmul
        counter.matmul_dtype = str(x.dtype).replace("torch.", "")
        output = torch.empty((*x.shape[:-1], directions * states[0].shape[-1]), dtype=x.dtype, device="meta")
        finals = tuple(torch.empty(h.shape, dtype=h.dtype, device="meta") for h in states)
        held = (1 + directions) * output.numel() + rows // max(x.shape[0], 1) * gates * hidden * directions * 2
        counter.peak_live = max(counter.peak_live, counter.live_bytes + held * x.element_size())
        return (output, *finals)


def _specs(values) -> list[TensorSpec]:
    return [TensorSpec(tuple(t.shape), t.dtype) for t in tree_flatten(values)[0] if isinstance(t, torch.Tensor)]


def compute_cost(module) -> Cost:
    """Count the work of one forward pass of a loaded problem module (sizes as the module has them)."""
    torch.manual_seed(0)
    try:
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
    except (RuntimeError, NotImplementedError) as exc:
        if "meta" not in str(exc):
            raise
        # A constructor that reads a value (`.item()` on a linspace of drop rates, as Swin's do) cannot
        # run on meta: it is built on the CPU, then its parameters become shapes only.
        with torch.random.fork_rng():
            model = module.Model(*module.get_init_inputs()).to("meta")
    valued = None  # a forward that reads a value: why it could not run on shapes alone
    with torch.device("meta"):
        inputs = module.get_inputs()
        counter = _Counter()
        try:
            with torch.no_grad(), counter, _Recurrent(counter):
                out = model(*inputs)
        except (RuntimeError, NotImplementedError) as exc:
            if "meta" not in str(exc):
                raise
            valued = exc
    if valued is not None:
        model, inputs, counter, out = _counted_on_cpu(module, model, inputs, valued)
    inputs_s, outputs_s = _specs(inputs), _specs(out)
    params = sum(TensorSpec(tuple(p.shape), p.dtype).nbytes for p in
                 list(model.parameters()) + list(model.buffers()))
    moved = sum(s.nbytes for s in inputs_s) + sum(s.nbytes for s in outputs_s) + params
    # An output that is an input (or a view of one) was never created inside the forward: the peak
    # counts inputs and parameters once, then whatever the forward had alive at its fullest.
    peak = sum(s.nbytes for s in inputs_s) + params + counter.peak_live
    return Cost(counter.flops, moved, counter.matmul_flops, counter.matmul_dtype, inputs_s, outputs_s,
                params, peak)


CPU_COUNT_LIMIT = 2 * 1024 ** 3  # bytes of inputs and parameters a forward may hold to be counted on the CPU


def _counted_on_cpu(module, meta_model, meta_inputs, exc: Exception):
    """A forward that reads a value (a branch on `x.sum() > 0`, an `.item()`) cannot run on shapes alone: it is
    run on the CPU, on the problem's own inputs, where they are small enough; else the problem says why."""
    held = sum(s.nbytes for s in _specs(meta_inputs)) + sum(
        TensorSpec(tuple(t.shape), t.dtype).nbytes for t in list(meta_model.parameters()) + list(meta_model.buffers()))
    if held > CPU_COUNT_LIMIT:
        raise ProblemError(f"its forward reads tensor values ({_first_line(exc)}), so its work cannot be counted "
                           f"from shapes alone, and at these sizes ({held / 1024 ** 3:.1f} GiB of inputs and "
                           "parameters) it is not run on the CPU to count it") from None
    with torch.random.fork_rng():
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    counter = _Counter()
    with torch.no_grad(), counter:
        out = model(*inputs)
    return model, inputs, counter, out


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def uses_tensor_cores(cost: Cost) -> bool:
    return cost.matmul_dtype in ("float16", "bfloat16")
