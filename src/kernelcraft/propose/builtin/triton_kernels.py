"""Triton kernel family of the built-in engineer: one Op plus a move's parameters -> a candidate file.

A candidate is the reference source verbatim, then Triton kernels and `class ModelNew(Model)` whose
`forward` launches them. Everything about sizes is read from the input at run time, and what belongs to
the module (weights, eps, the reduced dim) from `self`, so every move is right on any shape.

Four templates cover the seven kinds:
  pointwise   elementwise: flat 1-D tiles with a masked tail, the op's steps chained in fp32 registers;
              the grid is one program per tile, or capped at a few programs per SM that loop (persistent).
  reduction   softmax, log_softmax, reduce: a contiguous x seen as [outer, R, inner]; a program takes a tile
              of BLOCK_C "columns" (outer*inner of them, R elements each, `inner` apart) and BLOCK_R of R at a
              time. inner == 1 is the plain row case (several short rows per program); inner > 1 takes columns
              that sit side by side so loads coalesce. Softmax keeps all of R in one tile when it fits
              (falls back to an online running max/sum at run time when not); reduce splits R over
              programs when there are few columns and combines the fp32 partials with a second launch.
  norm        layernorm, rmsnorm: rows of N in registers (one read, one write) when N fits; longer rows are
              split over programs: per-chunk statistics (Welford or two-pass), merged per row by the writer.
  gemm        matmul: a program per BLOCK_M x BLOCK_N output tile (GROUP_M swizzle) and batch, a masked K loop of
              tl.dot into an fp32 accumulator; operands read through their strides (a transpose is a stride swap).
              input_precision "ieee" (exact fp32) or "tf32" (fp32 inputs only; `needs_relaxed` names those moves).

About 620 lines, over the 400 aimed at: most of it is kernel text (the norm family alone needs three
kernels: whole rows, chunk statistics, merge-and-write; matmul one GEMM), and the move lists with their
plain-words ideas. Every kind shares the header, the move/render entry points and the no-torch-compute
rule, which is why they stay in one family module; a second backend's family goes in a file of its own.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from string import Template

from kernelcraft.propose.builtin.plan import Op


@dataclass(frozen=True)
class Move:
    text: str  # the optimization idea in plain words; unique within a kind (the proposer keys on it)
    category: str  # a CATEGORIES tag (propose/base.py)
    params: dict  # template parameters (JSON-able)


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


def _softmax_moves(op: Op) -> list[tuple]:
    row = ("Whole row in one program: load the reduced extent once (up to {m} elements, short rows packed "
           "{t} elements per program), max/exp/sum in registers, one write; {w} warps")
    online = ("Online {name} in {b}-element tiles: one pass keeps a running max and rescaled sum, a second pass "
              "writes; {w} warps")
    name = op.kind.replace("_", "-")
    def rowp(m, t, w):
        return {"variant": "row", "ROW_MAX": m, "TILE": t, "num_warps": w}

    def onlinep(b, t, w):
        return {"variant": "online", "BLOCK_R": b, "TILE": t, "num_warps": w}

    return [
        (row.format(m=16384, t=4096, w=4), "memory", rowp(16384, 4096, 4)),
        (row.format(m=16384, t=4096, w=8), "memory", rowp(16384, 4096, 8)),
        (row.format(m=16384, t=2048, w=4), "parallelism", rowp(16384, 2048, 4)),
        (online.format(name=name, b=4096, w=8), "control", onlinep(4096, 4096, 8)),
        (row.format(m=8192, t=8192, w=8), "memory", rowp(8192, 8192, 8)),
        (online.format(name=name, b=1024, w=4), "control", onlinep(1024, 2048, 4)),
    ]


def _reduce_moves(op: Op) -> list[tuple]:
    split = ("Tiles of {t} elements over the reduced dim accumulated in fp32 registers, reduced once at the end; "
             "with few output columns the reduced dim is split over programs (aim: {s}) and the partials combined "
             "by a second launch; {w} warps")
    base = {"BLOCK_R": 1024, "TILE": 4096, "num_warps": 4, "split_target": 2048}
    return [
        (split.format(t=4096, s=2048, w=4), "parallelism", base),
        (split.format(t=2048, s=8192, w=4), "parallelism",
         {**base, "BLOCK_R": 256, "TILE": 2048, "split_target": 8192}),
        ("Long reduced tiles (4096 of R by few columns) to keep many loads in flight per program", "memory",
         {**base, "BLOCK_R": 4096, "TILE": 8192, "num_warps": 8}),
        (split.format(t=8192, s=2048, w=8), "parallelism", {**base, "TILE": 8192, "num_warps": 8}),
        ("One program per column tile walks the whole reduced dim: no partial buffer, a single launch", "control",
         {**base, "split_target": 0}),
    ]


def _norm_moves(op: Op) -> list[tuple]:
    row = ("Rows up to {m} elements held in registers: statistics and normalization from one read, one write "
           "(short rows packed {t} elements per program, {w} warps)")
    base = {"ROW_MAX": 16384, "TILE": 4096, "BLOCK_N": 2048, "num_warps": 8, "split_target": 2048, "welford": True}
    out = [(row.format(m=16384, t=4096, w=8), "memory", base),
           (row.format(m=16384, t=4096, w=4), "memory", {**base, "num_warps": 4}),
           (row.format(m=8192, t=8192, w=8), "memory", {**base, "ROW_MAX": 8192, "TILE": 8192}),
           ("Long rows split finer (aim: 4096 programs, 1024-element tiles) so few rows still fill the GPU; per-chunk "
            "statistics merged per row by the writing pass", "parallelism",
            {**base, "split_target": 4096, "BLOCK_N": 1024}),
           ("Long rows handled by one program each, looping over 2048-element tiles (no split, no partials)",
            "control", {**base, "split_target": 0})]
    if op.kind == "layernorm":
        out.append(("Two-pass statistics per chunk of a long row: the sum for the mean, then the squared deviations "
                    "(exact, the chunk re-read from L2) instead of one-pass Welford", "precision",
                    {**base, "welford": False}))
    return out


def _matmul_moves(op: Op) -> list[tuple]:
    exact = ("Tiled GEMM, {m}x{n} output tiles ({k}-wide K steps, {w} warps, {s} stages), GROUP_M=8 swizzle for L2 "
             "reuse, strided loads (transposes cost no copy), exact fp32 products (ieee) accumulated in fp32")
    tf32 = ("TF32 tensor cores for fp32 inputs: {m}x{n} tiles ({k}-wide K steps, {w} warps, {s} stages), fp32 "
            "accumulation; inputs rounded to TF32 (10-bit mantissa), so it needs a tolerance policy that admits "
            "TF32; fp16/bf16 inputs are unaffected")

    def p(m, n, k, w, s, prec):
        return {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8, "num_warps": w, "num_stages": s,
                "precision": prec}

    out = []
    for m, n, k, w, s, cat in ((128, 128, 32, 8, 3, "parallelism"), (64, 64, 32, 4, 4, "parallelism"),
                               (128, 64, 32, 4, 4, "memory"), (64, 128, 32, 4, 4, "memory")):
        out.append((exact.format(m=m, n=n, k=k, w=w, s=s), cat, p(m, n, k, w, s, "ieee")))
    for m, n, k, w, s in ((128, 128, 32, 8, 3), (128, 256, 32, 8, 3), (64, 128, 32, 4, 4)):
        out.append((tf32.format(m=m, n=n, k=k, w=w, s=s), "precision", p(m, n, k, w, s, "tf32")))
    return out


def needs_relaxed(move: Move) -> bool:
    """True for a move whose kernel is not exact in fp32 (TF32 tensor cores): a strict policy must skip it."""
    return move.params.get("precision") == "tf32"


_MOVES = {"matmul": _matmul_moves, "elementwise": _pointwise_moves,
          "softmax": _softmax_moves, "log_softmax": _softmax_moves,
          "reduce": _reduce_moves, "layernorm": _norm_moves, "rmsnorm": _norm_moves}


def moves(op: Op) -> list[Move]:
    """The moves for `op`, most promising first; each is right on any input shape."""
    if op.kind not in _MOVES:
        raise ValueError(f"no Triton kernel family for op kind {op.kind!r}")
    return [Move(text, category, dict(params)) for text, category, params in _MOVES[op.kind](op)]


def render(op: Op, reference_source: str, params: dict) -> str:
    """The whole candidate file for `op` with `params` (missing keys: the first move's)."""
    p = {**moves(op)[0].params, **params}
    signature, names = _forward_signature(reference_source)
    kernels, body = _RENDER[op.kind](op, p)  # kernel sources (module level), forward body
    head = (f"# ---- Triton kernels by kernelcraft's built-in engineer: {op.kind} {json.dumps(p, sort_keys=True)}\n"
            "import math\n\nimport torch\nimport triton\nimport triton.language as tl")
    if op.kind == "matmul":  # two inputs, read through their strides as they are
        if len(names) < 2:
            raise ValueError("a matmul reference needs a forward(self, A, B, ...)")
        first = f"a, b = {names[0]}, {names[1]}"
    else:
        first = f"x = {names[0]}.contiguous()"
    forward = (f"class ModelNew(Model):\n    {signature}\n        {first}\n"
               + _indent(body.strip("\n"), 8))
    return "\n\n\n".join(part.strip("\n") for part in (reference_source, head, *kernels, forward)) + "\n"


def _forward_signature(source: str) -> tuple[str, list[str]]:
    """(the reference forward's `def` line, the names of its positional inputs)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                    if len(names) >= 2:
                        ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
                        return f"def forward({ast.unparse(fn.args)}){ret}:", names[1:]
    raise ValueError("the reference has no `class Model` with a forward(self, x, ...)")


def _attr(path: str) -> str:
    """`self.<path>` as Python: "ln.weight" -> self.ln.weight, "net.0.weight" -> self.net[0].weight."""
    if not re.fullmatch(r"\w+(\.\w+)*", path):
        raise ValueError(f"not an attribute path: {path!r}")
    return "self" + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in path.split("."))


def _indent(text: str, n: int) -> str:
    return "\n".join((" " * n + line) if line.strip() else "" for line in text.split("\n"))


def _num(value) -> str:
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    return repr(value) if math.isfinite(value) else ('float("inf")' if value > 0 else '-float("inf")')


# ---------------------------------------------------------------- pointwise

def _tanh(u: str) -> str:  # 1 - 2 / (exp(2u) + 1): saturates to +-1 without overflow, NaN stays NaN
    return f"(1.0 - 2.0 / (tl.exp(2.0 * ({u})) + 1.0))"


def _pow(c: float) -> list[str]:
    special = {0.0: "tl.where(x != x, 1.0, 1.0)", 1.0: "x", 2.0: "x * x", 3.0: "x * x * x", 0.5: "tl.sqrt(x)",
               -0.5: "tl.rsqrt(x)", -1.0: "1.0 / x", -2.0: "1.0 / (x * x)"}
    if c in special:
        return [f"x = {special[c]}"]
    if c.is_integer():  # |x|^c with the sign of x for odd c, like torch.pow on negative bases
        sign = "tl.where(x < 0.0, -m, m)" if int(c) % 2 else "m"
        return [f"m = tl.exp2({_num(c)} * tl.log2(tl.abs(x)))", f"x = {sign}"]
    return [f"x = tl.exp2({_num(c)} * tl.log2(x))"]  # negative bases give NaN, like torch


def _step(name: str, args: list) -> list[str]:
    a = [_num(v) if v is not None else None for v in args]
    simple = {"relu": "tl.where(x < 0.0, 0.0, x)", "sigmoid": "1.0 / (1.0 + tl.exp(-x))", "tanh": _tanh("x"),
              "silu": "x / (1.0 + tl.exp(-x))", "gelu": "0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
              # 0.5 x (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
              "gelu_tanh": "x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))",
              "exp": "tl.exp(x)", "log": "tl.log(x)", "abs": "tl.abs(x)", "neg": "-x", "sqrt": "tl.sqrt(x)",
              "rsqrt": "tl.rsqrt(x)", "square": "x * x"}
    if name in simple:
        return [f"x = {simple[name]}"]
    if name == "elu":
        return [f"x = tl.where(x > 0.0, x, {a[0]} * (tl.exp(x) - 1.0))"]
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


_POINTWISE = Template('''
@triton.jit
def kc_pointwise_kernel(x_ptr, y_ptr, n, n_tiles, BLOCK: tl.constexpr):
    for tile in range(tl.program_id(0).to(tl.int64), n_tiles, tl.num_programs(0)):  # int64: no offset overflow
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask$hint).to(tl.float32)
$steps
        tl.store(y_ptr + offs, x.to(y_ptr.dtype.element_ty), mask=mask$hint)
''')


def _render_pointwise(op: Op, p: dict) -> tuple[list[str], str]:
    steps = [line for step in op.detail["steps"] for line in _step(step[0], list(step[1:]))]
    hint = ', eviction_policy="evict_first"' if p.get("evict_first") else ""
    kernel = _POINTWISE.substitute(steps=_indent("\n".join(steps), 8), hint=hint)
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
kc_pointwise_kernel[(programs,)](x, y, n, n_tiles, BLOCK={int(p["BLOCK"])}, num_warps={int(p["num_warps"])})
return y'''
    return [kernel], body


# ---------------------------------------------------------------- reductions over [outer, R, inner]

_TILES = '''
def kc_tiles(R, C, inner, row_max, block_r, tile):
    """(BLOCK_R, BLOCK_C, whole R in one tile) for reducing R in an [outer, R, inner] view. Columns that sit side
    by side in memory (inner > 1) are taken several at a time so that loads coalesce."""
    np2 = triton.next_power_of_2
    want_c = 1 if inner == 1 else min(np2(inner), 32)
    single = np2(R) * want_c <= row_max
    br = np2(R) if single else min(np2(R), block_r, max(1, tile // want_c))
    return br, min(np2(C), max(want_c, tile // br)), single
'''

# Column c (of C = outer * inner) starts at (c // inner) * R * inner + c % inner; its R elements are `inner` apart.
_COLUMNS = '''    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = c < C
    base = (c // inner) * R * inner + c % inner
    r = tl.arange(0, BLOCK_R)'''

_SOFTMAX = Template('''
@triton.jit
def kc_${name}_kernel(x_ptr, y_ptr, R, inner, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, SINGLE: tl.constexpr):
$columns
    if SINGLE:  # all of R in one tile: one read, one write
        offs = base[None, :] + r.to(tl.int64)[:, None] * inner
        mask = (r < R)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, 0)
        e = tl.exp(x - m[None, :])
        s = tl.sum(e, 0)
        tl.store(y_ptr + offs, ($single).to(y_ptr.dtype.element_ty), mask=mask)
    else:  # online: running max and a sum rescaled whenever the max grows, then a writing pass
        m_run = tl.full([BLOCK_C], -float("inf"), tl.float32)
        s_run = tl.zeros([BLOCK_C], tl.float32)
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            x = tl.load(x_ptr + offs, mask=(rr < R)[:, None] & cmask[None, :], other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_run, tl.max(x, 0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # no -inf - -inf while a column is all -inf
            s_run = s_run * tl.exp(m_run - m_safe) + tl.sum(tl.exp(x - m_safe[None, :]), 0)
            m_run = m_new
        $prelude
        for start in range(0, R, BLOCK_R):
            rr = start + r
            offs = base[None, :] + rr.to(tl.int64)[:, None] * inner
            mask = (rr < R)[:, None] & cmask[None, :]
            x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + offs, ($online).to(y_ptr.dtype.element_ty), mask=mask)
''')

_REDUCE = Template('''
@triton.jit
def kc_${name}_kernel(x_ptr, y_ptr, R, inner, C, chunk, div, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (column tile, split): R-range [split * chunk, split * chunk + chunk); result row `split` of y
$columns
    lo = tl.program_id(1) * chunk
    hi = tl.minimum(lo + chunk, R)
    acc = tl.full([BLOCK_R, BLOCK_C], $ident, tl.float32)
    for start in range(lo, hi, BLOCK_R):
        rr = start + r
        mask = (rr < hi)[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base[None, :] + rr.to(tl.int64)[:, None] * inner, mask=mask, other=$ident)
        acc = $combine
    out = $final
    tl.store(y_ptr + tl.program_id(1).to(tl.int64) * C + c, out.to(y_ptr.dtype.element_ty), mask=cmask)
''')


def _render_softmax(op: Op, p: dict) -> tuple[list[str], str]:
    if op.kind == "softmax":
        single, prelude = "e * (1.0 / s)[None, :]", "inv = 1.0 / s_run"
        online = "tl.exp(x - m_run[None, :]) * inv[None, :]"
    else:
        single, prelude, online = "x - (m + tl.log(s))[None, :]", "lse = m_run + tl.log(s_run)", "x - lse[None, :]"
    kernel = _SOFTMAX.substitute(name=op.kind, columns=_COLUMNS, single=single, prelude=prelude, online=online)
    row_max = int(p["ROW_MAX"]) if p["variant"] == "row" else 0
    block_r, tile, warps = int(p.get("BLOCK_R", 4096)), int(p["TILE"]), int(p["num_warps"])
    body = f'''
y = torch.empty_like(x)
if x.numel() == 0:
    return y
d = {int(op.detail["dim"])} % max(x.dim(), 1)
R = x.shape[d] if x.dim() else 1
inner = math.prod(x.shape[d + 1:])
C = x.numel() // R
br, bc, single = kc_tiles(R, C, inner, {row_max}, {block_r}, {tile})
warps = min(16, {warps} * max(1, br * bc // {tile}))
kc_{op.kind}_kernel[(triton.cdiv(C, bc),)](x, y, R, inner, C, BLOCK_R=br, BLOCK_C=bc, SINGLE=single, num_warps=warps)
return y'''
    return [_TILES, kernel], body


def _render_reduce(op: Op, p: dict) -> tuple[list[str], str]:
    kind = op.detail["op"]
    if kind in ("sum", "mean"):
        ident, combine, final = "0.0", "acc + x.to(tl.float32)", "tl.sum(acc, 0) / div"
    elif kind in ("max", "min"):
        ident = '-float("inf")' if kind == "max" else 'float("inf")'
        fn = "maximum" if kind == "max" else "minimum"
        combine = f"tl.{fn}(acc, x.to(tl.float32), propagate_nan=tl.PropagateNan.ALL)"
        final = f'tl.where(tl.max((acc != acc).to(tl.int32), 0) > 0, float("nan"), tl.{kind}(acc, 0))'  # NaN wins
    else:
        raise ValueError(f"unknown reduction {kind!r}")
    name = f"{kind}_reduce"
    kernel = _REDUCE.substitute(name=name, columns=_COLUMNS, ident=ident, combine=combine, final=final)
    dim = _attr(op.detail["dim_attr"]) if op.detail.get("dim_attr") else repr(op.detail.get("dim"))
    keep = bool(op.detail.get("keepdim"))
    div = "float(R)" if kind == "mean" else "1.0"
    block_r, tile, warps, target = int(p["BLOCK_R"]), int(p["TILE"]), int(p["num_warps"]), int(p["split_target"])
    body = f'''
dim = {dim}
if dim is None:  # all elements
    R, inner, shape = x.numel(), 1, {"[1] * x.dim()" if keep else "[]"}
else:
    d = dim % max(x.dim(), 1)
    R, inner, shape = (x.shape[d] if x.dim() else 1), math.prod(x.shape[d + 1:]), list(x.shape)
    if x.dim():
        {"shape[d] = 1" if keep else "del shape[d]"}
y = torch.empty(shape, dtype=x.dtype, device=x.device)
C = y.numel()
if C == 0:
    return y
br, bc, _ = kc_tiles(max(R, 1), C, inner, 0, {block_r}, {tile})
col_tiles = triton.cdiv(C, bc)
splits = max(1, min(triton.cdiv(R, br), triton.cdiv({target}, col_tiles), 1024)) if col_tiles < {target} else 1
chunk = triton.cdiv(triton.cdiv(max(R, 1), splits), br) * br
splits = triton.cdiv(max(R, 1), chunk)
if splits == 1:
    kc_{name}_kernel[(col_tiles, 1)](x, y, R, inner, C, chunk, {div}, BLOCK_R=br, BLOCK_C=bc, num_warps={warps})
    return y
part = torch.empty((splits, C), dtype=torch.float32, device=x.device)  # fp32 partials, one row per split
kc_{name}_kernel[(col_tiles, splits)](x, part, R, inner, C, chunk, 1.0, BLOCK_R=br, BLOCK_C=bc, num_warps={warps})
br, bc, _ = kc_tiles(splits, C, C, 0, {block_r}, {tile})
kc_{name}_kernel[(triton.cdiv(C, bc), 1)](part, y, splits, C, C, splits, {div}, BLOCK_R=br, BLOCK_C=bc,
                                          num_warps={warps})
return y'''
    return [_TILES, kernel], body


# ---------------------------------------------------------------- norms over rows of N

_NORM = '''
@triton.jit
def kc_norm_row_kernel(x_ptr, y_ptr, w_ptr, b_ptr, M, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if not RMS:
        x = tl.where(mask, x - (tl.sum(x, 1) / N)[:, None], 0.0)
    y = x * tl.rsqrt(tl.sum(x * x, 1) / N + eps)[:, None]
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        y = y + tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def kc_norm_stats_kernel(x_ptr, mean_ptr, m2_ptr, N, chunk, splits, BLOCK_N: tl.constexpr, RMS: tl.constexpr,
                         WELFORD: tl.constexpr):
    # program (row, split): mean and sum of squared deviations (RMS: sum of squares) of one chunk of the row
    row = tl.program_id(0).to(tl.int64)
    lo = tl.program_id(1).to(tl.int64) * chunk
    hi = tl.minimum(lo + chunk, N)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], tl.float32)
    if RMS or not WELFORD:
        for start in range(lo, hi, BLOCK_N):
            o = start + cols
            x = tl.load(x_ptr + row * N + o, mask=o < hi, other=0.0).to(tl.float32)
            if RMS:
                acc += x * x
            else:
                acc += x
    if RMS:
        m2 = tl.sum(acc, 0)
    elif WELFORD:  # one pass: a running mean and M2 per lane, merged across lanes at the end
        cnt = tl.zeros([BLOCK_N], tl.float32)
        mean = tl.zeros([BLOCK_N], tl.float32)
        for start in range(lo, hi, BLOCK_N):
            o = start + cols
            x = tl.load(x_ptr + row * N + o, mask=o < hi, other=0.0).to(tl.float32)
            cnt += (o < hi).to(tl.float32)
            delta = x - mean
            mean += tl.where(o < hi, delta / tl.maximum(cnt, 1.0), 0.0)
            acc += tl.where(o < hi, delta * (x - mean), 0.0)
        mu = tl.sum(cnt * mean, 0) / tl.sum(cnt, 0)
        m2 = tl.sum(acc, 0) + tl.sum(cnt * (mean - mu) * (mean - mu), 0)
    else:  # two passes over the chunk: the mean, then squared deviations from it
        mu = tl.sum(acc, 0) / (hi - lo).to(tl.float32)
        acc = tl.zeros([BLOCK_N], tl.float32)
        for start in range(lo, hi, BLOCK_N):
            o = start + cols
            x = tl.load(x_ptr + row * N + o, mask=o < hi, other=0.0).to(tl.float32)
            acc += tl.where(o < hi, (x - mu) * (x - mu), 0.0)
        m2 = tl.sum(acc, 0)
    if not RMS:
        tl.store(mean_ptr + row * splits + tl.program_id(1), mu)
    tl.store(m2_ptr + row * splits + tl.program_id(1), m2)


@triton.jit
def kc_norm_apply_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, m2_ptr, N, chunk, splits, eps,
                         BLOCK_N: tl.constexpr, BLOCK_S: tl.constexpr, RMS: tl.constexpr, HAS_W: tl.constexpr,
                         HAS_B: tl.constexpr):
    # program (row, split): merge the row's chunk statistics (Chan et al.), then normalize this chunk
    row = tl.program_id(0).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    m2 = tl.load(m2_ptr + row * splits + s, mask=s < splits, other=0.0)
    if RMS:
        var = tl.sum(m2, 0) / N
    else:
        cnt = tl.where(s < splits, tl.minimum(chunk, N - s.to(tl.int64) * chunk).to(tl.float32), 0.0)
        means = tl.load(mean_ptr + row * splits + s, mask=s < splits, other=0.0)
        mu = tl.sum(cnt * means, 0) / N
        var = (tl.sum(m2, 0) + tl.sum(cnt * (means - mu) * (means - mu), 0)) / N
    rstd = tl.rsqrt(var + eps)
    lo = tl.program_id(1).to(tl.int64) * chunk
    hi = tl.minimum(lo + chunk, N)
    cols = tl.arange(0, BLOCK_N)
    for start in range(lo, hi, BLOCK_N):
        o = start + cols
        x = tl.load(x_ptr + row * N + o, mask=o < hi, other=0.0).to(tl.float32)
        if RMS:
            y = x * rstd
        else:
            y = (x - mu) * rstd
        if HAS_W:
            y = y * tl.load(w_ptr + o, mask=o < hi, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(b_ptr + o, mask=o < hi, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * N + o, y.to(y_ptr.dtype.element_ty), mask=o < hi)
'''


def _render_norm(op: Op, p: dict) -> tuple[list[str], str]:
    d = op.detail
    rms = op.kind == "rmsnorm"
    ndim = 1 if rms else int(d["ndim"])
    eps = _attr(d["eps_attr"]) if d.get("eps_attr") else _num(d["eps"])
    weight = _attr(d["weight"]) if d.get("weight") else "None"
    bias = _attr(d["bias"]) if d.get("bias") and not rms else "None"
    row_max, tile, block_n, warps = int(p["ROW_MAX"]), int(p["TILE"]), int(p["BLOCK_N"]), int(p["num_warps"])
    flags = f"RMS={rms}, HAS_W=w is not None, HAS_B=b is not None"
    body = f'''
y = torch.empty_like(x)
N = math.prod(x.shape[max(x.dim() - {ndim}, 0):])
if x.numel() == 0:
    return y
M = x.numel() // N
w, b, eps = {weight}, {bias}, float({eps})
w_arg = x if w is None else w.reshape(-1)
b_arg = x if b is None else b.reshape(-1)
np2 = triton.next_power_of_2
if np2(N) <= {row_max}:  # whole rows in registers
    bn = np2(N)
    bm = min(np2(M), max(1, {tile} // bn))
    warps = min(16, {warps} * max(1, bm * bn // {tile}))
    kc_norm_row_kernel[(triton.cdiv(M, bm),)](x, y, w_arg, b_arg, M, N, eps, BLOCK_M=bm, BLOCK_N=bn, {flags},
                                              num_warps=warps)
    return y
splits = max(1, min(triton.cdiv({int(p["split_target"])}, M), triton.cdiv(N, {block_n}), 1024))
chunk = triton.cdiv(triton.cdiv(N, splits), {block_n}) * {block_n}
splits = triton.cdiv(N, chunk)
mean = torch.empty((M, splits), dtype=torch.float32, device=x.device)
m2 = torch.empty((M, splits), dtype=torch.float32, device=x.device)
kc_norm_stats_kernel[(M, splits)](x, mean, m2, N, chunk, splits, BLOCK_N={block_n}, RMS={rms},
                                  WELFORD={bool(p.get("welford", True))}, num_warps={warps})
kc_norm_apply_kernel[(M, splits)](x, y, w_arg, b_arg, mean, m2, N, chunk, splits, eps, BLOCK_N={block_n},
                                  BLOCK_S=np2(splits), {flags}, num_warps={warps})
return y'''
    return [_NORM], body


# ---------------------------------------------------------------- matmul: tiled GEMM over strided operands

_GEMM = '''
@triton.jit
def kc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     PREC: tl.constexpr):
    # program (tile, batch): a BLOCK_M x BLOCK_N tile of C[batch]; tiles are walked GROUP_M rows of tiles at a
    # time (swizzle) so that neighbouring programs share A rows and B columns in L2
    pid = tl.program_id(0)
    bid = tl.program_id(1).to(tl.int64)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    rk = tl.arange(0, BLOCK_K).to(tl.int64)
    a_ptrs = a_ptr + bid * s_ab + rm[:, None] * s_am + rk[None, :] * s_ak
    b_ptrs = b_ptr + bid * s_bb + rk[:, None] * s_bk + rn[None, :] * s_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PREC)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    c_ptrs = c_ptr + bid * s_cb + rm[:, None] * s_cm + rn[None, :] * s_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))
'''


def _render_matmul(op: Op, p: dict) -> tuple[list[str], str]:
    ta, tb = bool(op.detail.get("trans_a")), bool(op.detail.get("trans_b"))
    bm, bn, bk, group = int(p["BLOCK_M"]), int(p["BLOCK_N"]), int(p["BLOCK_K"]), int(p["GROUP_M"])
    prec = str(p.get("precision", "ieee"))
    if prec not in ("ieee", "tf32"):
        raise ValueError(f"unknown matmul precision {prec!r}")
    # op(A)[m, k] is A[k, m] when transposed: swap the last two dims' sizes and strides, no copy
    am, ak = (-1, -2) if ta else (-2, -1)
    bk_, bn_ = (-1, -2) if tb else (-2, -1)
    body = f'''
M, K, N = a.shape[{am}], a.shape[{ak}], b.shape[{bn_}]
batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
c = torch.empty((batch, M, N) if max(a.dim(), b.dim()) == 3 else (M, N), dtype=a.dtype, device=a.device)
if c.numel() == 0:
    return c  # K == 0 needs no case: the K loop runs no step and the zero accumulator is stored
s_a, s_b, s_c = a.stride(), b.stride(), c.stride()
s_ab = s_a[0] if a.dim() == 3 and a.shape[0] > 1 else 0  # a 2-D operand is shared by every batch
s_bb = s_b[0] if b.dim() == 3 and b.shape[0] > 1 else 0
s_cb = s_c[0] if c.dim() == 3 else 0
prec = "{prec}" if a.dtype == torch.float32 else "ieee"  # fp16/bf16 always take the tensor cores
grid = (triton.cdiv(M, {bm}) * triton.cdiv(N, {bn}), batch)
kc_matmul_kernel[grid](a, b, c, M, N, K, s_ab, s_a[{am}], s_a[{ak}], s_bb, s_b[{bk_}], s_b[{bn_}], s_cb, s_c[-2],
                       s_c[-1], BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, GROUP_M={group}, PREC=prec,
                       num_warps={int(p["num_warps"])}, num_stages={int(p["num_stages"])})
return c'''
    return [_GEMM], body


_RENDER = {"matmul": _render_matmul, "elementwise": _render_pointwise,
           "softmax": _render_softmax, "log_softmax": _render_softmax,
           "reduce": _render_reduce, "layernorm": _render_norm, "rmsnorm": _render_norm}
