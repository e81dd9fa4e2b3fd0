"""Cat family: torch.cat of several values along one dim (plan.py's `cat` op, only inside a chain: its parts are
the forward's inputs or earlier ops' results). The output is allocated once; each part is copied into its slice by
one launch of a flat copy kernel: the output seen as (outer, total * inner) rows, a part as (outer, size * inner),
so every load and store runs along contiguous memory whatever the dim."""

from __future__ import annotations

from dataclasses import dataclass

from kernelcraft.propose.builtin.families.cat.ops import DETAILS
from kernelcraft.propose.builtin.family import Family, Names, Params, Rendered, TritonKernel
from kernelcraft.propose.builtin.plan import Op

_COPY = '''
offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: no offset overflow
mask = offs < n
row = offs // cols
v = tl.load(src_ptr + offs, mask=mask)
tl.store(dst_ptr + row * dst_cols + offset + (offs - row * cols), v, mask=mask)
'''


@dataclass(frozen=True)
class Copy(Params):
    BLOCK: int = 4096  # elements per program
    num_warps: int = 8

    def idea(self) -> str:
        return (f"Each part copied into its slice of one output by a flat {self.BLOCK}-element tile kernel "
                f"({self.num_warps} warps), contiguous loads and stores along the rows")

    def category(self) -> str:
        return "parallelism"


def moves(op: Op) -> list[Copy]:
    return [Copy(4096, 8), Copy(1024, 4), Copy(8192, 8)]


def render(op: Op, p: Copy, names: Names) -> Rendered:
    kernel = TritonKernel(names("kc_cat_kernel"), ("src_ptr", "dst_ptr", "n", "cols", "dst_cols", "offset"),
                          ("BLOCK",), _COPY)
    launch = kernel.launch(f"(triton.cdiv(n, {int(p.BLOCK)}),)", ["part", "y", "n", "cols", "dst_cols", "offset"],
                           {"BLOCK": int(p.BLOCK)}, num_warps=int(p.num_warps))
    return Rendered((kernel,), f'''
first = parts[0]
if first.dim() == 0:
    raise ValueError("torch.cat takes tensors of one dim or more")
d = {int(op.detail["dim"])} % first.dim()
for part in parts:
    if part.dtype != first.dtype or part.dim() != first.dim() or \\
            any(part.shape[k] != first.shape[k] for k in range(first.dim()) if k != d):
        raise ValueError("cat of parts of other dtypes or sizes: torch's promotion and checks are not followed")
shape = list(first.shape)
shape[d] = 0
for part in parts:
    shape[d] += part.shape[d]
y = torch.empty(shape, dtype=first.dtype, device=first.device)
inner = math.prod(shape[d + 1:])
dst_cols = shape[d] * inner
offset = 0
for part in parts:
    cols = part.shape[d] * inner
    n = part.numel()
    if n > 0:
        {launch}
    offset += cols
return y''')


FAMILY = Family("cat", "triton", ("cat",), Copy, moves, render,
                details=DETAILS)
