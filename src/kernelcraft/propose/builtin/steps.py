"""Triton statements for plan.py's pointwise steps (relu, gelu, x * c, x + self.bias, ...), shared by every family that
applies steps: the pointwise family's kernels and the epilogues of GEMMs, convs, norms and softmax. Each statement
updates the fp32 tensor `x`; torch's definitions, with small results keeping their digits and NaN passing through as
torch's."""

from __future__ import annotations

from kernelcraft.propose.builtin.codegen import indent, num
from kernelcraft.propose.builtin.plan import is_own, operand_refs, own_steps


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


def _pow(c: float) -> list[str]:
    special = {0.0: "tl.where(x != x, 1.0, 1.0)", 1.0: "x", 2.0: "x * x", 3.0: "x * x * x", 0.5: "tl.sqrt(x)",
               -0.5: "tl.rsqrt(x)", -1.0: "1.0 / x", -2.0: "1.0 / (x * x)"}
    if c in special:
        return [f"x = {special[c]}"]
    if c.is_integer():  # |x|^c with the sign of x for odd c, like torch.pow on negative bases
        sign = "tl.where(x < 0.0, -m, m)" if int(c) % 2 else "m"
        return [f"m = tl.exp2({num(c)} * tl.log2(tl.abs(x)))", f"x = {sign}"]
    return [f"x = tl.exp2({num(c)} * tl.log2(x))"]  # negative bases give NaN, like torch


def _step(name: str, args: list) -> list[str]:
    a = [num(v) if v is not None else None for v in args]
    simple = {"relu": "tl.where(x < 0.0, 0.0, x)", "sigmoid": "1.0 / (1.0 + tl.exp(-x))", "tanh": _tanh("x"),
              "silu": "x / (1.0 + tl.exp(-x))", "gelu": "0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
              # 0.5 x (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
              "gelu_tanh": "x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))",
              "exp": "tl.exp(x)", "log": "tl.log(x)", "abs": "tl.abs(x)", "neg": "-x", "sqrt": "tl.sqrt(x)",
              "rsqrt": "tl.rsqrt(x)", "square": "x * x"}
    if name in simple:
        return [f"x = {simple[name]}"]
    if name in _ACTIVATIONS:
        return _ACTIVATIONS[name]()
    if name == "elu":
        return [f"x = tl.where(x > 0.0, x, {a[0]} * {_expm1('x')})"]
    if name == "leaky_relu":
        return [f"x = tl.where(x > 0.0, x, x * {a[0]})"]
    if name in ("hardtanh", "clamp"):  # where, not min/max: NaN passes through like torch
        lines = [f"x = tl.where(x < {a[0]}, {a[0]}, x)"] if a[0] is not None else []
        return lines + ([f"x = tl.where(x > {a[1]}, {a[1]}, x)"] if a[1] is not None else [])
    if name == "softplus":  # x where beta*x > threshold, else log1p(exp(beta*x)) / beta, computed stably
        return [f"z = {a[0]} * x", "u = tl.exp(-tl.abs(z))", "w = 1.0 + u",
                "lp = tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))",  # log1p(u), accurate for small u
                f"x = tl.where(z > {a[1]}, x, (tl.maximum(z, 0.0) + lp) / {a[0]})"]
    binary = {"add": "x + {}", "sub": "x - {}", "rsub": "{} - x", "mul": "x * {}", "div": "x / {}", "rdiv": "{} / x"}
    if name in binary:
        return ["x = " + binary[name].format(a[0])]
    if name == "pow":
        return _pow(float(args[0]))
    raise ValueError(f"unknown elementwise step {name!r}")


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def _softplus1() -> list[str]:  # sp = softplus(x) (beta 1, threshold 20, torch's defaults), computed stably
    return ["u = tl.exp(-tl.abs(x))", "w = 1.0 + u", "lp = tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))",
            "sp = tl.where(x > 20.0, x, tl.maximum(x, 0.0) + lp)"]


def _relu6_3(u: str) -> str:  # relu6(u + 3) / 6 by comparisons, so NaN passes through like torch
    return f"tl.where({u} < -3.0, 0.0, tl.where({u} > 3.0, 1.0, ({u} + 3.0) * 0.16666666666666666))"


_ACTIVATIONS = {  # steps of several statements (torch's definitions; small results keep their digits)
    "mish": lambda: _softplus1() + [f"x = x * {_tanh('sp')}"],  # x * tanh(softplus(x))
    "selu": lambda: [f"x = tl.where(x > 0.0, {_SELU_SCALE} * x, {_SELU_SCALE * _SELU_ALPHA} * {_expm1('x')})"],
    "hardsigmoid": lambda: [f"x = {_relu6_3('x')}"],
    "hardswish": lambda: [f"x = x * {_relu6_3('x')}"],
    "softsign": lambda: ["x = x / (1.0 + tl.abs(x))"],
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
    combine x with it, or with x as it was after the first k steps (("step", k): kept as x_step<k>)."""
    refs = operand_refs(steps)
    if refs and load is None:
        raise ValueError(f"steps reading tensors {refs} need a family that loads them")
    lines = [f"o{k} = {load(k)}" for k in range(len(refs))]
    kept = own_steps(steps)
    for i, step in enumerate(steps):
        if i in kept:
            lines.append(f"x_step{i} = x")
        if step[0] in TENSOR_OPS:
            operand = f"x_step{step[1][1]}" if is_own(step[1]) else f"o{refs.index(step[1])}"
            lines.append("x = " + TENSOR_OPS[step[0]].format(operand))
        else:
            lines += _step(step[0], list(step[1:]))
    return lines


def epilogue_on(var: str, steps: list, load, depth: int) -> str:
    """The statements applying `steps` (epilogue_lines, operands loaded by `load`) to the fp32 value `var` a kernel
    computed before storing it (x = var, the steps, var = x), each indented `depth`; "" without steps."""
    lines = epilogue_lines(steps, load)
    return indent("\n".join([f"x = {var}", *lines, f"{var} = x"]), depth) if lines else ""
