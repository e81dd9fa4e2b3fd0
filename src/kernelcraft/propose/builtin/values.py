"""The abstract values analyze.py's interpreter gives fx nodes: what a tensor is in terms of the forward's inputs."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.plan import TENSOR_STEPS, Own

X = "x"  # the base of chains over the first input; ("input", i) over input i >= 1; an int: an emitted Op's result


@dataclass(frozen=True)
class Ew:  # steps applied pointwise to base (no steps: the base itself)
    base: object
    steps: tuple = ()


@dataclass(frozen=True)
class MeanSq:  # post(mean(src**2, dim, keepdim=True)): kept pending, it may be an rmsnorm denominator
    src: Ew
    post: tuple = ()
    dim: int = -1  # the one dim the mean is over


@dataclass(frozen=True)
class Prod:  # a product of rmsnorm factors: the input (src), 1/rms (eps, over inv_src, along dim), a weight
    src: Ew | None = None
    eps: float | None = None
    inv_src: Ew | None = None
    weight: str | None = None
    dim: int = -1


@dataclass(frozen=True)
class Flipped:  # src.flip(dim), kept pending: read only by a cumsum/cumprod along dim (a reverse scan) or a flip back
    src: Ew
    dim: int


@dataclass(frozen=True)
class Pair:  # torch.max/min(x, dim): (values, indices), resolved by the getitem/.values that follows
    src: Ew
    op: str
    dim: int
    keepdim: bool


@dataclass(frozen=True)
class Operand:  # a transposed view (last two dims swapped) of forward input `index`, pending a matmul
    index: int
    trans: bool


@dataclass(frozen=True)
class LogSoftmaxIn:  # log_softmax of forward input `index` over dim, pending the kl_div that reads it
    index: int
    dim: int


@dataclass(frozen=True)
class Shape:  # input.shape (or input.size()) of forward input `index`, pending the subscript that takes one size
    index: int


@dataclass(frozen=True)
class SizePow:  # coef * size ** power, where size is forward input `index`'s size along `dim` (>= 0), a number
    index: int
    dim: int
    power: float = 1.0
    coef: float = 1.0


@dataclass(frozen=True)
class ScaledQ:  # the first input q times const * E ** epow (E: q's last size), pending the q @ k^T of an attention
    const: float = 1.0
    epow: float = 0.0


@dataclass(frozen=True)
class Scores:  # q @ k^T of the first two inputs (k's last two dims swapped), times const * E ** epow: maybe
    const: float = 1.0  # the scores of an attention, decided by what consumes them
    epow: float = 0.0
    causal: bool = False  # the keys past each query's diagonal filled with -inf (a causal mask held as a buffer)
    k_t: bool = False  # the second input is k^T itself, (..., E, S): passed transposed, not transposed in forward


@dataclass(frozen=True)
class Probs:  # softmax(scores, dim=-1), pending the product with v (the third input) that makes it an attention
    scores: Scores


@dataclass(frozen=True)
class Attr:  # a parameter or buffer, by attribute path
    path: str


@dataclass(frozen=True)
class AttrView:  # views of a parameter or buffer with literal arguments (self.b.view(1, -1, 1, 1)): an operand only
    path: str
    views: tuple  # ((method, args), ...) in the order forward applies them; method: view, reshape, (un)squeeze

    @property
    def ref(self) -> tuple:
        """The operand reference plan.py reads: ("attr", path, views); codegen.parameter renders it."""
        return ("attr", self.path, self.views)


@dataclass(frozen=True)
class AttrT:  # the transpose (.T, .t()) of a 2-D parameter, pending the matmul that reads it as a linear's weight
    path: str


@dataclass(frozen=True)
class TensorSize:  # t.size(dim) / t.shape[dim] of a value that is not a forward input (node: t's fx node)
    node: object
    dim: int


@dataclass(frozen=True)
class TensorShape:  # t.shape / t.size() of such a value, pending the subscript that takes one size
    node: object


@dataclass(frozen=True)
class Device:  # a tensor's .device, read only by torch.tensor(number, device=...): a number
    pass


class Pending:
    """A value a family's recognizer returned that its readers resolve (an nn.LSTM's (output, (h_n, c_n)) tuple):
    `item(ix, node, key)` is the value of its subscript node[key], `realize(ix)` the chain it stands for when anything
    else reads it (None when it is no tensor the IR can read: it notes why). A subclass whose result reads a chain
    has it as `src`, so the interpreter sees what the pending value still reads (chains_in)."""

    def item(self, ix, node, key):
        return ix.refuse("getitem", node)

    def realize(self, ix):
        return None


UNKNOWN = object()  # a tensor the IR cannot describe (results of unsupported ops)


def chains_in(v) -> list[Ew]:
    """The chains a value is made of (itself, or the chains inside a pending rmsnorm piece or max/min pair)."""
    if isinstance(v, Ew):
        return [v]
    return [c for f in ("src", "inv_src") if isinstance(c := getattr(v, f, None), Ew)]


def own_value(chain: Ew, other) -> Own | None:
    """How `chain` can read `other` as its own value (plan.Own), when other is a chain over the same base: ("step", k)
    when other's steps start chain's (x and f(x) in x * f(x)); ("step", k, branch) when other shares chain's first
    k steps (k may be 0: the base itself) and the rest of its steps, `branch`, are scalar steps reading no other value
    (0.5 * x and f(x) in 0.5 * x * f(x)): computed beside chain, no op of its own. Else None."""
    if not (isinstance(chain, Ew) and isinstance(other, Ew) and other.base == chain.base):
        return None
    k = next((i for i, (a, b) in enumerate(zip(chain.steps, other.steps)) if a != b),
             min(len(chain.steps), len(other.steps)))
    branch = other.steps[k:]
    return None if any(s[0] in TENSOR_STEPS for s in branch) else Own(k, branch)


def mentions(v, i) -> bool:
    """Whether value v reads the result of op i: as the base of a chain or as a tensor operand of its steps."""
    return any(c.base == i or any(s[0] in TENSOR_STEPS and s[1] == i for s in c.steps) for c in chains_in(v))
