"""Pointwise family (elementwise chains): flat 1-D tiles with a masked tail, the op's steps chained in fp32
registers; the grid is one program per tile, or capped at a few programs per SM that loop (persistent). Chains
with tensor operands (x + self.bias, x * y) take broadcast.py's kernel under the same moves."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.plan import Op, operand_refs
from kernelcraft.propose.builtin.scalars import Scalars
from kernelcraft.propose.builtin.triton_families.common import indent, num


def _pointwise_moves(op: Op) -> list[tuple]:
    flat = "Flat 1-D grid, one program per {b}-element tile ({w} warps), masked tail, steps fused in fp32 registers"
    return [
        (flat.format(b=4096, w=8), "parallelism", {"BLOCK": 4096, "num_warps": 8}),
        (flat.format(b=1024, w=4), "parallelism", {"BLOCK": 1024, "num_warps": 4}),
        (flat.format(b=2048, w=4), "parallelism", {"BLOCK": 2048, "num_warps": 4}),
        (flat.format(b=8192, w=8), "parallelism", {"BLOCK": 8192, "num_warps": 8}),
        ("Persistent grid: 8 programs per SM loop over 4096-element tiles, so launch and tail costs are paid once",
         "control", {"BLOCK": 4096, "num_warps": 8, "per_sm": 8}),
        ("Streaming cache hints: 4096-element tiles loaded and stored with evict_first, the data is touched once",
         "memory", {"BLOCK": 4096, "num_warps": 8, "evict_first": True}),
    ]

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


_POINTWISE = Template('''
@triton.jit
def kc_pointwise_kernel(${scalars}x_ptr, y_ptr, n, n_tiles, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):  # int64: no offset overflow
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask$hint).to(tl.float32)
$steps
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask$hint)
''')


def step_lines(steps: list) -> list[str]:
    """Triton statements applying `steps` ([name, *params] each) to the fp32 tensor `x`, in order."""
    return [line for step in steps for line in _step(step[0], list(step[1:]))]


TENSOR_OPS = {"tadd": "x + {}", "tsub": "x - {}", "trsub": "{} - x", "tmul": "x * {}", "tdiv": "x / {}",
              "trdiv": "{} / x"}


def epilogue_lines(steps: list, load) -> list[str]:
    """step_lines for steps that may have tensor operands: operand k (plan.operand_refs order) is first loaded as
    o<k> = load(k), an fp32 expression shaped like x's tile; the tensor steps combine x with it."""
    refs = operand_refs(steps)
    lines = [f"o{k} = {load(k)}" for k in range(len(refs))]
    for step in steps:
        if step[0] in TENSOR_OPS:
            lines.append("x = " + TENSOR_OPS[step[0]].format(f"o{refs.index(step[1])}"))
        else:
            lines += _step(step[0], list(step[1:]))
    return lines


def _render_pointwise(op: Op, p: dict) -> tuple[list[str], str]:
    if operand_refs(op.detail["steps"]):  # tensor operands: broadcast.py's kernel, its body reads x, o0, o1, ...
        from kernelcraft.propose.builtin.triton_families import broadcast

        return broadcast.render(op, p)
    steps = step_lines(op.detail["steps"])
    hint = ', eviction_policy="evict_first"' if p.get("evict_first") else ""
    s = Scalars.of(op)  # the numbers the steps read from the module: the kernel's first parameters
    kernel = _POINTWISE.substitute(steps=indent("\n".join(steps), 8), hint=hint, scalars=s.params)
    programs = "n_tiles"
    if p.get("per_sm"):  # persistent: a few programs per SM loop over the tiles
        programs = (f"min(n_tiles, {int(p['per_sm'])} * (torch.cuda.get_device_properties(x.device)"
                    ".multi_processor_count if x.is_cuda else 4))")
    body = f'''
y = torch.empty_like(x)
n = x.numel()
if n == 0:
    return y
n_tiles = triton.cdiv(n, {int(p["BLOCK"])})
programs = {programs}
kc_pointwise_kernel[(programs,)]({s.params}x, y, n, n_tiles, BLOCK={int(p["BLOCK"])}, num_warps={int(p["num_warps"])})
return y'''
    return [kernel], body


KINDS = {"elementwise": (_pointwise_moves, _render_pointwise)}
