"""The op kinds the gemm family serves, typed (Family.details; steps by plan.py's grammar)."""

from typing import NotRequired, TypedDict

from kernelcraft.propose.builtin.families.triangle.ops import Triangle
from kernelcraft.propose.builtin.plan import Steps


class Matmul(TypedDict, total=False):
    """y = op(A) @ op(B), A and B the forward's first two inputs (not only x): both 2-D, or both 3-D with equal batch
    (bmm, or matmul of 3-D tensors); op = transpose of the last two dims when trans_* (A.T, A.t(),
    A.transpose(-2, -1)). Matvec is a matmul with B of shape (K, 1). Output dtype = input dtype, fp32 accumulation.
    dtype: A's in the problem's get_inputs ("float32", "float16", ...; 16-bit ones get 16-bit moves). steps: the
    pointwise ops after the product, as an epilogue. A of 3 dims or more times a 2-D B (torch.matmul's broadcast, or
    an einsum spelling it: "bijl,lk->bijk") is one GEMM over A's leading dims, the output (..., M, N). mask: a
    triangle applied after the steps, torch.triu/tril of the product over its last two dims."""

    trans_a: bool
    trans_b: bool
    dtype: str
    steps: Steps
    mask: Triangle


class Linear(TypedDict):
    """y = steps(x @ weight.T + bias) over the last dim of x (nn.Linear or F.linear), the pointwise ops after it folded
    into `steps` like a conv's epilogue (tensor steps too, over parameters of one value or one per column, shape (),
    (1,), (N,), (1, 1) or (1, N): read along the columns). weight_kn: the weight is held (K, N), y = x @ weight
    (absent: False)."""

    weight: str
    bias: str | None
    steps: Steps
    weight_kn: NotRequired[bool]


DETAILS = {"matmul": Matmul, "linear": Linear}
