"""The triangle kernels: flat tiles of the contiguous tensor (each entry's row and column decoded from its index) or
2-D tiles of one matrix (rows and columns from the program id), both storing zeros outside the triangle without
loading there."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.family import Names, Rendered, TritonKernel
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

# the entries a triangle keeps, row i, column j (int64), by the run-time diagonal `diag`
KEPT = {"triu": "{j} - {i} >= diag", "tril": "{j} - {i} <= diag"}

_FLAT = Template('''
offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: no offset overflow
inside = offs < n
j = offs % W
i = (offs // W) % H
v = tl.load(x_ptr + offs, mask=inside & ($kept), other=0$hint)
tl.store(y_ptr + offs, v, mask=inside$hint)
''')

_TILES = Template('''
# program: tile (ti, tj) of matrix m, tiles walked row-major within each matrix
pid = tl.program_id(0).to(tl.int64)
tiles_h = tl.cdiv(H, BLOCK_H)
tiles_w = tl.cdiv(W, BLOCK_W)
m = pid // (tiles_h * tiles_w)
t = pid % (tiles_h * tiles_w)
i = ((t // tiles_w) * BLOCK_H + tl.arange(0, BLOCK_H))[:, None]
j = ((t % tiles_w) * BLOCK_W + tl.arange(0, BLOCK_W))[None, :]
inside = (i < H) & (j < W)
offs = m * H * W + i * W + j
v = tl.load(x_ptr + offs, mask=inside & ($kept), other=0)
tl.store(y_ptr + offs, v, mask=inside)
''')


def triangle(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    if d["op"] not in KEPT:
        raise ValueError(f"unknown triangle {d['op']!r}")
    kept = KEPT[d["op"]].format(i="i", j="j")
    diagonal = f"int({attr(d['diagonal_attr'])})" if d.get("diagonal_attr") else repr(int(d["diagonal"]))
    block, warps = int(p.BLOCK), int(p.num_warps)
    head = f'''
y = torch.empty_like(x)
if x.dim() < 2:
    raise ValueError("torch.{d["op"]} takes a tensor of 2 dims or more")
n = x.numel()
if n == 0:
    return y
H, W = x.shape[-2], x.shape[-1]
diag = {diagonal}  # torch.{d["op"]}'s diagonal
'''
    if p.BLOCK_H:
        bh = int(p.BLOCK_H)
        bw = max(1, block // bh)
        kernel = TritonKernel(names(f"kc_{d['op']}_tiles_kernel"), ("x_ptr", "y_ptr", "H", "W", "diag"),
                              ("BLOCK_H", "BLOCK_W"), _TILES.substitute(kept=kept),
                              comment=f"torch.{d['op']} over 2-D tiles of each matrix")
        grid = f"(n // (H * W) * triton.cdiv(H, {bh}) * triton.cdiv(W, {bw}),)"
        launch = kernel.launch(grid, ["x", "y", "H", "W", "diag"], {"BLOCK_H": bh, "BLOCK_W": bw}, num_warps=warps)
    else:
        hint = ', eviction_policy="evict_first"' if p.evict_first else ""
        kernel = TritonKernel(names(f"kc_{d['op']}_kernel"), ("x_ptr", "y_ptr", "n", "H", "W", "diag"), ("BLOCK",),
                              _FLAT.substitute(kept=kept, hint=hint),
                              comment=f"torch.{d['op']} over flat tiles")
        launch = kernel.launch(f"(triton.cdiv(n, {block}),)", ["x", "y", "n", "H", "W", "diag"], {"BLOCK": block},
                               num_warps=warps)
    return Rendered((kernel,), head + f"{launch}\nreturn y")
