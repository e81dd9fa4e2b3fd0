"""What the built-in engineer understood of a reference: the ops it recognized, in a small IR.

`analyze.py` produces it from the reference (torch.fx over the instantiated Model); the kernel
families (families/*, listed in registry.py) turn one Op plus tuning parameters into a candidate file. Values that
belong to the module (eps, weights, the reduced dim given at init) are named by attribute path, so the
generated ModelNew reads them from itself at run time: nothing about sizes is baked in.

Passes over a finished list of ops (each keeps every value ref right, `renumber`): `needed_ops` keeps what the
result reads, `merge_elementwise` makes an elementwise op read only as the next one's src part of it, `drop` removes
an op whose readers read another value instead. Steps that read the op's own earlier values (`Own`: ("step", k), or
("step", k, branch) with scalar steps applied to it apart) are split only where `can_cut`, the rest `shift`ed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Pointwise steps an `elementwise` op may chain, with their parameters (Python floats, or "self.<attr>" for one forward
# reads from the module, read again at run time: scalars.py):
#   ["relu"], ["sigmoid"], ["tanh"], ["silu"], ["gelu"] (erf), ["gelu_tanh"], ["exp"], ["log"], ["abs"],
#   ["neg"], ["sqrt"], ["rsqrt"], ["square"], ["mish"], ["selu"], ["hardsigmoid"], ["hardswish"], ["softsign"],
#   ["round_bf16"], ["round_fp16"] (a cast to bfloat16 / float16 inside fp32 math: x.to(torch.bfloat16)),
#   ["elu", alpha], ["leaky_relu", slope],
#   ["hardtanh", lo, hi], ["clamp", lo_or_None, hi_or_None], ["softplus", beta, threshold],
#   ["add", c], ["sub", c], ["rsub", c] (c - x), ["mul", c], ["div", c], ["rdiv", c] (c / x), ["pow", c]
# Steps with a tensor operand: ["tadd", ref], ["tsub", ref], ["trsub", ref] (ref - x), ["tmul", ref], ["tdiv", ref],
# ["trdiv", ref] (ref / x), ["tmin", ref], ["tmax", ref] (torch.minimum/maximum: NaN wins), broadcast by torch's
# rules; ref is a value ref: "x" (the forward's first input), ("input", i) (its input i >= 1), an int i (the result of
# ops[i]), or ("attr", path) (a parameter or buffer of the module). Any in an elementwise op; in an epilogue only
# parameters: any in a conv's (conv1d/2d/3d, conv_transpose1d/2d/3d), a channel norm's (batchnorm, groupnorm,
# instancenorm) or a softmax's (read at the output's coordinates: families/conv/operands.py), in a linear's those of
# one value or one per column. Or ref is ("step", k), the op's own value after its first k steps (0: what
# it reads, the src or the producer's result; x * sigmoid(x + b) is [["tadd", b], ["sigmoid"], ["tmul", ("step", 1)]]),
# or ("step", k, branch), that value with the scalar steps `branch` (no tensor step) applied to it apart, in registers
# (0.5 * x * f(x) is f's steps then ["tmul", ("step", 0, (("mul", 0.5),))]): `Own`. No tensor to read, no value ref
# (operand_refs and reads leave it out), so any op that applies steps takes it
TENSOR_STEPS = {"tadd", "tsub", "trsub", "tmul", "tdiv", "trdiv", "tmin", "tmax"}
UNARY = {"relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "exp", "log", "abs", "neg", "sqrt", "rsqrt",
         "square", "mish", "selu", "hardsigmoid", "hardswish", "softsign", "round_bf16", "round_fp16"}
WITH_PARAMS = {"elu": 1, "leaky_relu": 1, "hardtanh": 2, "clamp": 2, "softplus": 2, "add": 1, "sub": 1, "rsub": 1,
               "mul": 1, "div": 1, "rdiv": 1, "pow": 1}


@dataclass
class Op:
    """One recognized computation over `src` (a value ref: "x", the forward's first input, by default; matmul and
    losses read the forward's first two inputs, attention its first three). A forward of several ops is a chain:
    each op names its input.

    kind and detail:
      elementwise  {"steps": [[name, *params], ...]}              y = f_n(...f_1(x)), same shape and dtype as x
                   (with TENSOR_STEPS: the shape broadcast with their operands')
      softmax      {"dim": int}                                   torch.softmax(x, dim)
      log_softmax  {"dim": int}
                   (both may carry "steps": [[name, *params], ...], pointwise ops after them, as an epilogue)
      reduce       {"op": "sum"|"mean"|"max"|"min"|"logsumexp"|"norm2", "dim": int | [int, ...] | None,
                    "dim_attr": str | None, "keepdim": bool[, "pre": [[name, *params], ...]]}
                   (dim_attr: the module attribute holding dim, e.g. "dim", when the reference reads self.dim;
                    pre: pointwise steps applied to each element of src before it is reduced, tensor steps too
                    (their operands broadcast to src's shape, read by the reduce kernel: a prologue, so
                    mean((a - b) ** 2) reads a and b once and writes no elementwise result);
                    max/min are the values only, as torch.amax/amin; norm2 sqrt(sum(x^2)), torch.norm's p 2 or
                    "fro"; a list of dims: several adjacent ones, sorted,
                    all counted from the front or all from the back, reduced as one)
      layernorm    {"ndim": int, "eps": float, "weight": str | None, "bias": str | None}
                   (over the trailing `ndim` dims; weight/bias: attribute paths such as "ln.weight")
      rmsnorm      {"eps": float, "eps_attr": str | None, "weight": str | None}   over the last dim:
                   x * rsqrt(mean(x^2, -1, keepdim=True) + eps) [* weight]; over another dim, "dim": int and
                   "dim_attr": str | None (the module attribute forward reads it from), weight None (a weight is a
                   tensor step after it); x / sqrt(mean(x^2) + eps) is the same op
                   (both may carry "steps": [[name, *params], ...], pointwise ops after the norm, as an epilogue)
      matmul       {"trans_a": bool, "trans_b": bool, "dtype": str}  y = op(A) @ op(B), A and B the forward's first
                   two inputs (not only x): both 2-D, or both 3-D with equal batch (bmm, or matmul of 3-D
                   tensors); op = transpose of the last two dims when trans_* (A.T, A.t(), A.transpose(-2, -1)).
                   Matvec is a matmul with B of shape (K, 1). Output dtype = input dtype, fp32 accumulation.
                   dtype: A's in the problem's get_inputs ("float32", "float16", ...; 16-bit ones get 16-bit
                   moves). May carry "steps": the pointwise ops after the product, as an epilogue. A of 3 dims or
                   more times a 2-D B (torch.matmul's broadcast, or an einsum spelling it: "bijl,lk->bijk") is one
                   GEMM over A's leading dims, the output (..., M, N). May carry "mask": a triangle detail (below)
                   applied after the steps, torch.triu/tril of the product over its last two dims.
      argreduce    {"op": "argmax"|"argmin", "dim": int | None, "dim_attr": str | None, "keepdim": bool}
                   int64 indices (dim None: into the flattened input); ties give the first index, NaN counts as
                   the extreme (torch's rules); also the indices of torch.max/min(x, dim)
      scan         {"op": "cumsum"|"cumprod", "dim": int, "dim_attr": str | None[, "reverse": True][, "exclusive": True]
                    [, "pre": [[name, *params], ...]]}
                   inclusive, along dim; reverse: from the end (flip(scan(flip(x, dim)), dim), as torch spells it);
                   exclusive: entry r the scan of entries 0..r-1, entry 0 the identity (cat of zeros_like (cumsum) or
                   ones_like (cumprod) of one slice and the scan of x narrowed to all but its last entry);
                   pre: pointwise steps applied to each element of src as it is loaded, tensor steps too where
                   every operand has src's shape (analyze_families.scan_reads: cumsum(x * mask) reads the mask in place)
      pool2d       {"pool": "max"|"avg"|"adaptive_avg", "dims": 2|1, "kernel": [kh, kw], "stride": [sh, sw],
                    "padding": [ph, pw], "dilation": [dh, dw], "ceil_mode": bool, "count_include_pad": bool,
                    "output_size": [oh | None, ow | None] | None}
                   over the last `dims` dims of x, (N, C, H, W) or (C, H, W); 1-D pooling is H = 1 (pairs
                   [1, k], [1, s], [0, p], [1, d], output_size [1, o]). max/avg: kernel..dilation are ints
                   (avg: dilation [1, 1]; count_include_pad is avg's, False for max), output_size None;
                   adaptive_avg: output_size (None keeps the input's size), the four geometry keys None, bins
                   [floor(i*H/OH), ceil((i+1)*H/OH)). Output sizes: families/pool/kernels.py kc_pool_out.
      pool3d       {"pool": "max"|"avg"|"adaptive_avg"|"adaptive_max", "kernel": [kd, kh, kw], "stride": [sd, sh, sw],
                    "padding": [pd, ph, pw], "dilation": [dd, dh, dw], "ceil_mode": bool, "count_include_pad": bool,
                    "output_size": [od | None, oh | None, ow | None] | None}
                   pool2d's keys lifted to 3-D, over the last three dims of x, (N, C, D, H, W) or (C, D, H, W):
                   max/avg: kernel..dilation are ints (avg: dilation [1, 1, 1]; count_include_pad avg's, False for
                   max), output_size None; adaptive_avg/adaptive_max: output_size (None keeps the input's size), the
                   four geometry keys None, bins [floor(i*D/OD), ceil((i+1)*D/OD)) along each dim. Max NaN
                   propagates as in torch; no indices, no divisor_override. Output sizes: families/pool3d's
                   kc_pool3d_out.
      triangle     {"op": "triu"|"tril", "diagonal": int, "diagonal_attr": str | None}   torch.triu/tril(x, diagonal)
                   over the last two dims of x (2 dims or more): entry (i, j) kept where j - i >= diagonal (triu) or
                   <= diagonal (tril), else 0; diagonal_attr: the attribute holding it, read at run time
      linear       {"weight": str, "bias": str | None, "steps": [[name, *params], ...], "weight_kn": bool (absent:
                   False)}   y = steps(x @ weight.T + bias); weight_kn: the weight is held (K, N), y = x @ weight
                   over the last dim of x (nn.Linear or F.linear), the pointwise ops after it folded into `steps`
                   like a conv's epilogue (tensor steps too, over parameters of one value or one per column, shape
                   (), (1,), (N,), (1, 1) or (1, N): read along the columns; a conv's take any parameter, read at the
                   output's coordinates)
      conv2d       {"stride": [sh, sw], "padding": [ph, pw], "dilation": [dh, dw], "groups": int, "module": str | None,
                    "groups_attr": str | None, "weight": str, "bias": str | None, "steps": [[name, *params], ...],
                    "pool": pool2d detail | None[, "bn": batchnorm detail]}
                   y = pool(steps(bn(conv2d(x, weight, bias)))): `bn` an eval batchnorm folded in (per-channel scale
                   and shift, present only when folded), `steps` the pointwise epilogue (elementwise names),
                   `pool` a pooling that follows. module: the nn.Conv2d's path, whose stride/padding/dilation/groups
                   the kernel reads at run time (they may depend on sizes, as a depthwise conv's groups do); for
                   F.conv2d the values given (groups by attribute when read from self).
      conv1d       the keys of conv2d, the hyper-parameters lifted to a one-row conv2d's ([1, s], [0, p], [1, d])
      conv3d       {"stride": [sd, sh, sw], "padding": [pd, ph, pw], "dilation": [dd, dh, dw], "groups", "module",
                    "groups_attr", "weight", "bias", "steps"}   y = steps(conv3d(x, weight, bias)) over x
                   (N, C, D, H, W) or (C, D, H, W); the keys mean what conv2d's do (nn.Conv3d or F.conv3d; no pool;
                   the steps' parameter operands read at the output's coordinates, as a conv2d's)
      conv_transpose2d {"stride": [sh, sw], "padding": [ph, pw], "output_padding": [oph, opw], "dilation": [dh, dw],
                    "groups", "module", "groups_attr", "weight", "bias", "steps"}
                   y = steps(conv_transpose2d(x, weight, bias)), weight (C_in, C_out/groups, KH, KW), x (N, C, H, W)
                   or (C, H, W); output size (H - 1)*sh - 2*ph + dh*(KH - 1) + oph + 1 (W alike); module: the
                   nn.ConvTranspose2d's path, read at run time as conv2d's; padding_mode zeros only, no output_size;
                   the steps' parameter operands read at the output's coordinates (conv_transpose1d: the keys of
                   conv_transpose2d, lifted to a one-row one's as conv1d's are)
      conv_transpose3d {"stride": [sd, sh, sw], "padding": [pd, ph, pw], "output_padding": [opd, oph, opw],
                    "dilation": [dd, dh, dw], "groups", "module", "groups_attr", "weight", "bias", "steps"}
                   y = steps(conv_transpose3d(x, weight, bias)), weight (C_in, C_out/groups, KD, KH, KW), x
                   (N, C, D, H, W) or (C, D, H, W); each output size (D - 1)*sd - 2*pd + dd*(KD - 1) + opd + 1; the
                   keys mean what conv_transpose2d's do (nn.ConvTranspose3d, read at run time, or F.conv_transpose3d)
      loss         {"fn": "mse"|"l1"|"smooth_l1"|"huber", "reduction": "mean"|"sum"|"none", "param": float | None,
                    "param_attr": str | None}   of the first two inputs (prediction, target), of equal shapes;
                   param: smooth_l1's beta, huber's delta (None for mse, l1); param_attr: the attribute holding it
                   ("beta", or "crit.beta" for a loss module); reduction "none" keeps the input's shape
      cross_entropy {"reduction": "mean"|"sum"|"none", "ignore_index": int, "ignore_index_attr": str | None}
                   F.cross_entropy(logits, targets) of the first two inputs: logits (N, C, *d) or (C,), int class
                   targets (N, *d) or (); no class weights, no label smoothing; targets equal to ignore_index add
                   nothing and are not counted by the mean (all ignored: NaN)
      kl_div_logits {"dim": int, "reduction": "batchmean"|"sum"|"mean"}   of the first two inputs a, b (equal shapes):
                   F.kl_div(log_softmax(a, dim), log_softmax(b, dim), reduction, log_target=True), i.e.
                   KL(softmax(b) || softmax(a)) summed over dim, then over rows (/ a.shape[0] for batchmean,
                   / numel for mean)
      kl_div       {"reduction": "batchmean"|"sum"|"mean"|"none", "log_target": bool, "log_input": bool}   F.kl_div(input,
                   b) of the first two inputs a, b (equal shapes), input = log(a) when log_input (torch.log of the
                   first input, fused) else a: pointwise exp(b) * (b - input) if log_target else xlogy(b, b) - b * input
                   (a target 0 adds 0), summed (/ a.shape[0] for batchmean, / numel for mean), or kept ("none")
      triplet_margin {"margin": float, "margin_attr": str | None, "eps": float, "eps_attr": str | None, "swap": bool,
                   "reduction": "mean"|"sum"|"none"}   F.triplet_margin_loss(a, p, n) of the first three inputs (one
                   shape) with p = 2: per row of the last dim max(margin + d(a, p) - d(a, n), 0), d(x, y) =
                   ||x - y + eps||_2 (swap: d(a, n) replaced by min(d(a, n), d(p, n))); mean / sum over the rows, or
                   the rows' losses (shape a.shape[:-1]); *_attr: where forward reads the number at run time
      batchnorm    {"eps": float, "eps_attr": str | None, "weight": str | None, "bias": str | None,
                    "running_mean": str, "running_var": str}   eval mode over (N, C, *spatial): per channel
                   (x - running_mean) / sqrt(running_var + eps) [* weight] [+ bias]
      instancenorm {"eps", "eps_attr", "weight", "bias" as batchnorm, "spatial": int | None}   statistics per (n, c)
                   over the spatial dims, affine per channel; spatial: the module's spatial dims (an input with
                   spatial + 1 dims is unbatched), None for F.instance_norm
      groupnorm    {"groups": int, "groups_attr": str | None, "eps", "eps_attr", "weight", "bias"}   statistics per
                   (n, group) over C/groups channels and the spatial dims, affine per channel
                   (*_attr, for all of them: where forward reads the value at run time, e.g. "eps" or "norm.eps";
                    all three may carry "steps", the pointwise ops after the norm, as an epilogue)
      view         {"flatten": [start, end]} | {"shape": [int | ["size", ref, dim], ...]} | {"squeeze": int | None}
                   | {"unsqueeze": int}
                   a free reshape (x.flatten(start, end), x.reshape/view of literal sizes, -1 allowed, or of a size
                   read at run time from a value ref, as x.view(x.size(0), -1); x.squeeze(d) (None: every dim of size
                   1), x.unsqueeze(d)): no kernel, only within a chain
      cat          {"dim": int, "parts": [ref, ...]}   torch.cat of the values `parts` (src: the first) along dim, all
                   of one dtype and equal sizes elsewhere
      lstm, gru    {"module": str, "result": "output"|"h_n"|"c_n", "index": int | None, "states": [ref, ...]}
                   one result of the nn.LSTM / nn.GRU at attribute path `module` over src, the input sequence
                   ((T, B, F), (B, T, F) with batch_first, or unbatched (T, F)); states: the initial states as
                   passed, [h0, c0] for lstm, [h0] for gru, [] for zeros. Everything else is the module's, read at
                   run time (layers, directions, batch_first, bias, weights; proj_size refused, dropout only in
                   eval mode, where it is the identity); torch's gate order (LSTM i, f, g, o; GRU r, z, n with
                   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))). result: the output sequence (the last layer's
                   h_t, directions side by side), h_n or c_n (c_n: lstm; (layers * directions, B, H));
                   index: only that entry of the result along its first dim, as x[index] (h_n, c_n: one layer
                   and direction) or, of the output, along its time dim (out[:, index] with batch_first). One op
                   per result read (each computes the whole recurrence: families/recurrent)
      attention    {"causal": bool, "scale": float | None, "scale_attr": str | None}   of the first three inputs as
                   passed, q (..., L, E), k (..., S, E), v (..., S, Ev) with equal leading dims:
                   softmax(q @ k^T * scale, dim=-1) @ v, output (..., L, Ev) in q's dtype; scale None: 1/sqrt(E), read
                   from q at run time; scale_attr: the attribute holding a given scale. causal: torch's is_causal,
                   aligned top-left (query i sees keys j <= i, for any L and S). F.scaled_dot_product_attention
                   without attn_mask, dropout or GQA, or the same written by hand (analyze_attention.py)
    """

    kind: str
    detail: dict = field(default_factory=dict)
    src: object = "x"  # the value it reads: "x", ("input", i) or an earlier op's index


def operand_refs(steps) -> list:
    """The tensor operands of elementwise `steps`, each once, in order of first use (the kernel's o0, o1, ...): their
    value refs, not the op's own values (Own)."""
    refs = []
    for step in steps:
        if step[0] in TENSOR_STEPS and not is_own(step[1]) and step[1] not in refs:
            refs.append(step[1])
    return refs


def argument_refs(op: Op) -> list:
    """The tensor operands a chain passes to `op`'s helper (o0, o1, ...): an elementwise op's, and those of any op's
    prologue ("pre"); the other families read their epilogue's parameters themselves."""
    if op.kind == "elementwise":
        return operand_refs(op.detail.get("steps") or [])
    return operand_refs(op.detail.get("pre") or [])


class Own(tuple):
    """A tensor step's operand that is the op's own value: ("step", k), its value after its first k steps (x in
    x * f(x)), or ("step", k, branch), that value with the scalar steps `branch` ((name, *params), ...; no tensor
    step) applied to it apart, computed in registers beside the chain (0.5 * x in 0.5 * x * f(x)). A tuple, so it is
    hashable (chains hold it), equal to the literal it spells and JSON as a list; `Own.of` reads any such tuple."""

    __slots__ = ()

    def __new__(cls, k: int, branch=()):
        branch = tuple(tuple(s) for s in branch)
        return super().__new__(cls, ("step", k, branch) if branch else ("step", k))

    def __getnewargs__(self):  # copies and pickles rebuild it from (k, branch), not from the tuple it is
        return self.k, self.branch

    @classmethod
    def of(cls, ref) -> Own:
        return ref if isinstance(ref, Own) else cls(ref[1], ref[2] if len(ref) > 2 else ())

    @property
    def k(self) -> int:
        return self[1]

    @property
    def branch(self) -> tuple:
        return self[2] if len(self) > 2 else ()


def is_own(ref) -> bool:
    """Whether a tensor step's operand is the op's own value (Own: ("step", k) or ("step", k, branch))."""
    return isinstance(ref, tuple) and len(ref) in (2, 3) and ref[0] == "step"


def own_steps(steps) -> set[int]:
    """The k of every own value (Own) that `steps` read: the points where the kernel keeps x."""
    return {Own.of(s[1]).k for s in steps if s[0] in TENSOR_STEPS and is_own(s[1])}


def can_cut(steps, n: int) -> bool:
    """Whether steps[n:] can run on their own over the value steps[:n] make (in another op, or after a producer's
    epilogue): none of them reads an own value from before step n (a branch's own steps read nothing else)."""
    return not any(k < n for k in own_steps(steps[n:]))


def shift(steps, d: int):
    """`steps` (a list or tuple, of lists or tuples) with each own value ("step", k[, branch]) read as
    ("step", k + d[, branch]): what they read once d more steps come first (d < 0: once the first -d steps are gone,
    can_cut)."""
    def moved(s):
        if s[0] in TENSOR_STEPS and is_own(s[1]):
            own = Own.of(s[1])
            return type(s)([s[0], Own(own.k + d, own.branch)])
        return s
    return type(steps)(moved(s) for s in steps)


@dataclass
class Analysis:
    ops: list[Op]  # in forward order (each reads its src); the last one's result is the forward's
    unsupported: list[str] = field(default_factory=list)  # what it could not cover, in words ("conv2d", …)
    n_inputs: int = 1
    error: str | None = None  # the reference could not be traced (the reason)
    untraceable: str | None = None  # what its forward does that torch.fx cannot trace, in words (untraceable.py)

    @property
    def single(self) -> Op | None:
        """The op, when the forward is exactly one covered op over its first input(s) and nothing else."""
        if len(self.ops) != 1 or self.unsupported or self.error:
            return None
        op = self.ops[0]
        refs = operand_refs(op.detail.get("steps") or [])  # an epilogue's parameters are read by its family
        plain = op.src == "x" and op.kind not in ("view", "cat") and not (op.kind == "elementwise" and refs) \
            and not operand_refs(op.detail.get("pre") or []) \
            and all(isinstance(r, tuple) and r[0] == "attr" for r in refs) and not states(op)
        return op if plain else None

    @property
    def chain(self) -> list[Op] | None:
        """The ops, when the forward is a sequence of recognized ops (chain.py renders it) and not one plain op."""
        if not self.ops or self.unsupported or self.error or self.single is not None:
            return None
        return self.ops


def size_refs(op: Op) -> list:
    """The values a view's sizes are read from (its "shape" entries ["size", ref, dim])."""
    return [s[1] for s in op.detail.get("shape") or [] if isinstance(s, list)] if op.kind == "view" else []


RECURRENT = ("lstm", "gru")  # kinds whose initial states are value refs of their detail ("states")


def states(op: Op) -> list:
    """The initial states a recurrent op reads besides its input (none: zeros, or another kind)."""
    return list(op.detail.get("states") or []) if op.kind in RECURRENT else []


def reads(op: Op) -> list:
    """Every value ref `op` reads: its src, its steps' and its prologue's tensor operands, a view's size sources, a
    cat's parts, a recurrent op's initial states."""
    return [op.src, *operand_refs(op.detail.get("steps") or []), *operand_refs(op.detail.get("pre") or []),
            *size_refs(op),
            *(op.detail.get("parts") or [] if op.kind == "cat" else []), *states(op)]


def renumber(op: Op, new) -> None:
    """Make every value ref `op` reads (those `reads` lists) `new(ref)` instead."""
    op.src = new(op.src)
    for key in ("steps", "pre"):
        if key in op.detail:
            op.detail[key] = [[s[0], new(s[1])] if s[0] in TENSOR_STEPS else s for s in op.detail[key]]
    if op.kind == "view" and "shape" in op.detail:
        op.detail["shape"] = [["size", new(s[1]), s[2]] if isinstance(s, list) else s for s in op.detail["shape"]]
    if op.kind == "cat":
        op.detail["parts"] = [new(r) for r in op.detail["parts"]]
    if states(op):
        op.detail["states"] = [new(r) for r in op.detail["states"]]


def needed_ops(ops: list[Op], out) -> list[Op]:
    """The ops the forward's result `out` (a value ref) reads, directly or not, in order and renumbered: the others
    compute what the reference throws away. The result is then the last op (or no op, when it is an input)."""
    keep, todo = set(), [out]
    while todo:
        if isinstance(ref := todo.pop(), int) and ref not in keep:
            keep.add(ref)
            todo += reads(ops[ref])
    new = {old: i for i, old in enumerate(sorted(keep))}
    for i in keep:
        renumber(ops[i], lambda ref: new[ref] if isinstance(ref, int) else ref)
    return [ops[i] for i in sorted(keep)]


def drop(ops: list[Op], i: int, into) -> list[Op]:
    """`ops` without ops[i], in order and renumbered: what read its result reads the value ref `into` instead (an
    earlier op's index, or an input)."""
    def new(ref):
        if not isinstance(ref, int):
            return ref
        return into if ref == i else ref - 1 if ref > i else ref

    rest = ops[:i] + ops[i + 1:]
    for op in rest:
        renumber(op, new)
    return rest


def readers(ops: list[Op], i: int) -> list[int]:
    """Which ops read the result of ops[i], once per read (an op reading it twice is listed twice)."""
    return [j for j, op in enumerate(ops) for ref in reads(op) if ref == i]


def merge_elementwise(ops: list[Op]) -> list[Op]:
    """`ops` with each elementwise op whose result is read only as the src of a later elementwise op (not as an
    operand, by nothing else, and not the forward's result, the last op) merged into that op: one op, the steps
    concatenated, reading the first one's src, so its result makes no pass over memory of its own. Renumbered."""
    for i, op in enumerate(ops):
        if op.kind == "elementwise" and len(found := readers(ops, i)) == 1 \
                and (later := ops[found[0]]).kind == "elementwise" and later.src == i:
            later.detail["steps"] = op.detail["steps"] + shift(later.detail["steps"], len(op.detail["steps"]))
            later.src = op.src
            return merge_elementwise(drop(ops, i, op.src))
    return ops
