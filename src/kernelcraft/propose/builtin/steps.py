"""Triton statements for plan.py's pointwise steps (relu, gelu, x * c, x + self.bias, ...), shared by every family that
applies steps: the pointwise family's kernels and the epilogues of GEMMs, convs, norms and softmax. Each statement
updates the fp32 tensor `x`; torch's definitions, with small results keeping their digits and NaN passing through as
torch's."""

from __future__ import annotations

from kernelcraft.propose.builtin.codegen import indent, num
from kernelcraft.propose.builtin.plan import Own, is_own, operand_refs, own_steps


# Below |u| = 1/16 the closed forms of tanh and of exp(u) - 1 lose a small result's digits to cancellation (a
# relative error of 1e-3 at u = 1e-4); there they take their Taylor polynomials, exact to about 1e-9 relative.
_SMALL = 0.0625


def _tanh(u: str) -> str:  # 1 - 2 / (exp(2u) + 1): saturates to +-1 without overflow, NaN stays NaN
    s = f"({u}) * ({u})"
    poly = f"({u}) * (1.0 + {s} * (-0.3333333333333333 + {s} * (0.13333333333333333 - 0.05396825396825397 * {s})))"
    return f"tl.where(tl.abs({u}) < {_SMALL}, {poly}, 1.0 - 2.0 / (tl.exp(2.0 * ({u})) + 1.0))"


def _expm1(u: str) -> str:
    poly = f"({u}) * (1.0 + ({u}) * (0.5 + ({u}) * (0.16666666666666666 + ({u}) * (0.041666666666666664 + ({u}) * 0.008333333333333333))))"
    return f"tl.where(tl.abs({u}) < {_SMALL}, {poly}, tl.exp({u}) - 1.0)"


def _pow(c: float, v: str) -> list[str]:
    special = {0.0: f"tl.where({v} != {v}, 1.0, 1.0)", 1.0: v, 2.0: f"{v} * {v}", 3.0: f"{v} * {v} * {v}",
               0.5: f"tl.sqrt({v})", -0.5: f"tl.rsqrt({v})", -1.0: f"1.0 / {v}", -2.0: f"1.0 / ({v} * {v})"}
    if c in special:
        return [f"{v} = {special[c]}"]
    if c.is_integer():  # |x|^c with the sign of x for odd c, like torch.pow on negative bases
        sign = f"tl.where({v} < 0.0, -m, m)" if int(c) % 2 else "m"
        return [f"m = tl.exp2({num(c)} * tl.log2(tl.abs({v})))", f"{v} = {sign}"]
    return [f"{v} = tl.exp2({num(c)} * tl.log2({v}))"]  # negative bases give NaN, like torch


def _step(name: str, args: list, v: str = "x") -> list[str]:
    """The statements applying step `name` (with `args`) to the fp32 tensor variable `v` (a chain's x, or a branch
    of it beside x: Own); the temporaries they use (m, z, u, w, lp, sp) live within the step."""
    a = [num(p) if p is not None else None for p in args]
    simple = {"relu": f"tl.where({v} < 0.0, 0.0, {v})", "sigmoid": f"1.0 / (1.0 + tl.exp(-{v}))", "tanh": _tanh(v),
              "silu": f"{v} / (1.0 + tl.exp(-{v}))",
              "gelu": f"0.5 * {v} * (1.0 + tl.math.erf({v} * 0.7071067811865476))",
              # 0.5 x (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
              "gelu_tanh": f"{v} / (1.0 + tl.exp(-1.5957691216057308 * ({v} + 0.044715 * {v} * {v} * {v})))",
              "exp": f"tl.exp({v})", "log": f"tl.log({v})", "abs": f"tl.abs({v})", "neg": f"-{v}",
              "sqrt": f"tl.sqrt({v})", "rsqrt": f"tl.rsqrt({v})", "square": f"{v} * {v}",
              "round_bf16": f"{v}.to(tl.bfloat16).to(tl.float32)", "round_fp16": f"{v}.to(tl.float16).to(tl.float32)"}
    if name in simple:
        return [f"{v} = {simple[name]}"]
    if name in _ACTIVATIONS:
        return _ACTIVATIONS[name](v)
    if name == "elu":
        return [f"{v} = tl.where({v} > 0.0, {v}, {a[0]} * {_expm1(v)})"]
    if name == "leaky_relu":
        return [f"{v} = tl.where({v} > 0.0, {v}, {v} * {a[0]})"]
    if name in ("hardtanh", "clamp"):  # where, not min/max: NaN passes through like torch
        lines = [f"{v} = tl.where({v} < {a[0]}, {a[0]}, {v})"] if a[0] is not None else []
        return lines + ([f"{v} = tl.where({v} > {a[1]}, {a[1]}, {v})"] if a[1] is not None else [])
    if name == "softplus":  # x where beta*x > threshold, else log1p(exp(beta*x)) / beta, computed stably
        return [f"z = {a[0]} * {v}", "u = tl.exp(-tl.abs(z))", "w = 1.0 + u",
                "lp = tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))",  # log1p(u), accurate for small u
                f"{v} = tl.where(z > {a[1]}, {v}, (tl.maximum(z, 0.0) + lp) / {a[0]})"]
    binary = {"add": "{v} + {c}", "sub": "{v} - {c}", "rsub": "{c} - {v}", "mul": "{v} * {c}", "div": "{v} / {c}",
              "rdiv": "{c} / {v}"}
    if name in binary:
        return [f"{v} = " + binary[name].format(v=v, c=a[0])]
    if name == "pow":
        return _pow(float(args[0]), v)
    raise ValueError(f"unknown elementwise step {name!r}")


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _softplus1(v: str) -> list[str]:  # sp = softplus(v) (beta 1, threshold 20, torch's defaults), computed stably
    return [f"u = tl.exp(-tl.abs({v}))", "w = 1.0 + u", "lp = tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))",
            f"sp = tl.where({v} > 20.0, {v}, tl.maximum({v}, 0.0) + lp)"]


def _relu6_3(u: str) -> str:  # relu6(u + 3) / 6 by comparisons, so NaN passes through like torch
    return f"tl.where({u} < -3.0, 0.0, tl.where({u} > 3.0, 1.0, ({u} + 3.0) * 0.16666666666666666))"


_ACTIVATIONS = {  # steps of several statements on a variable v (torch's definitions; small results keep their digits)
    "mish": lambda v: _softplus1(v) + [f"{v} = {v} * {_tanh('sp')}"],  # x * tanh(softplus(x))
    "selu": lambda v: [f"{v} = tl.where({v} > 0.0, {_SELU_SCALE} * {v}, {_SELU_SCALE * _SELU_ALPHA} * {_expm1(v)})"],
    "hardsigmoid": lambda v: [f"{v} = {_relu6_3(v)}"],
    "hardswish": lambda v: [f"{v} = {v} * {_relu6_3(v)}"],
    "softsign": lambda v: [f"{v} = {v} / (1.0 + tl.abs({v}))"],
}


def step_lines(steps: list) -> list[str]:
    """Triton statements applying `steps` ([name, *params] each) to the fp32 tensor `x`, in order; tensor steps may
    read only the chain's own earlier values (("step", k): epilogue_lines)."""
    return epilogue_lines(steps, None)


TENSOR_OPS = {"tadd": "x + {0}", "tsub": "x - {0}", "trsub": "{0} - x", "tmul": "x * {0}", "tdiv": "x / {0}",
              "trdiv": "{0} / x",  # torch.minimum / maximum: a NaN on either side gives NaN
              "tmin": "tl.where((x != x) | ({0} != {0}), x + {0}, tl.where({0} < x, {0}, x))",
              "tmax": "tl.where((x != x) | ({0} != {0}), x + {0}, tl.where({0} > x, {0}, x))"}


def epilogue_lines(steps: list, load) -> list[str]:
    """step_lines for steps that may have tensor operands: operand k (plan.operand_refs order) is first loaded as
    o<k> = load(k), an fp32 expression shaped like x's tile (`load` None: the steps may have none); the tensor steps
    combine x with it, or with x as it was after the first k steps (("step", k): kept as x_step<k>), or with a
    scalar branch of that (("step", k, branch): x_branch<i>, made from x_step<k> where step i reads it)."""
    refs = operand_refs(steps)
    if refs and load is None:
        raise ValueError(f"steps reading tensors {refs} need a family that loads them")
    lines = [f"o{k} = {load(k)}" for k in range(len(refs))]
    kept = own_steps(steps)
    for i, step in enumerate(steps):
        if i in kept:
            lines.append(f"x_step{i} = x")
        if step[0] in TENSOR_OPS and is_own(step[1]):
            operand, branch = _own(Own.of(step[1]), i)
            lines += branch
            lines.append("x = " + TENSOR_OPS[step[0]].format(operand))
        elif step[0] in TENSOR_OPS:
            lines.append("x = " + TENSOR_OPS[step[0]].format(f"o{refs.index(step[1])}"))
        else:
            lines += _step(step[0], list(step[1:]))
    return lines


def _own(own: Own, i: int) -> tuple[str, list[str]]:
    """The variable holding the own value step i reads, and the statements making it: x_step<k> as kept, or, with
    a branch, x_branch<i> computed from it by the same step renderers beside x (which they leave alone)."""
    if not own.branch:
        return f"x_step{own.k}", []
    v = f"x_branch{i}"
    return v, [f"{v} = x_step{own.k}", *(line for s in own.branch for line in _step(s[0], list(s[1:]), v))]


def epilogue_on(var: str, steps: list, load, depth: int) -> str:
    """The statements applying `steps` (epilogue_lines, operands loaded by `load`) to the fp32 value `var` a kernel
    computed before storing it (x = var, the steps, var = x), each indented `depth`; "" without steps."""
    lines = epilogue_lines(steps, load)
    return indent("\n".join([f"x = {var}", *lines, f"{var} = x"]), depth) if lines else ""
