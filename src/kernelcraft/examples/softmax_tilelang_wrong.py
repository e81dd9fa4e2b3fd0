"""WRONG on purpose (the verifier must say `incorrect`): softmax_tilelang.py clearing the sum at each chunk
(`clear=True`), so a row longer than one chunk is divided by its last chunk's sum alone.

Softmax over dim=1 (level1/softmax, (4096, 65536)) in TileLang: one CTA of 256 threads a row.

The row is walked in chunks of 4096 columns held in a register fragment: a first walk reduces the row's max
(`T.reduce_max` without clearing: across chunks), a second the sum of exp(x - max), a third writes
exp(x - max) / sum. Masked tails (-inf in, nothing out), so any row length runs; an all -inf row gives NaN like
torch. The row count and length are symbolic (`T.dynamic`): one compiled kernel a dtype, whatever the shape. fp16
and bf16 are computed in fp32. Inputs of other ranks: dim 1 is moved last first.
"""
import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

BLOCK = 4096
THREADS = 256
DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


@tilelang.jit(out_idx=[-1])
def softmax(dtype: str):
    m = T.dynamic("m")
    n = T.dynamic("n")

    @T.prim_func
    def softmax_rows(X: T.Tensor((m, n), dtype), Y: T.Tensor((m, n), dtype)):
        with T.Kernel(m, threads=THREADS) as row:
            x = T.alloc_fragment((1, BLOCK), "float32")
            row_max = T.alloc_fragment((1,), "float32")
            row_sum = T.alloc_fragment((1,), "float32")
            T.fill(row_max, -T.infinity("float32"))
            T.fill(row_sum, 0.0)
            for t in T.serial(T.ceildiv(n, BLOCK)):
                for i, j in T.Parallel(1, BLOCK):
                    x[i, j] = T.if_then_else(t * BLOCK + j < n, T.cast(X[row, t * BLOCK + j], "float32"),
                                             -T.infinity("float32"))
                T.reduce_max(x, row_max, dim=1, clear=False)
            for t in T.serial(T.ceildiv(n, BLOCK)):
                for i, j in T.Parallel(1, BLOCK):
                    x[i, j] = T.if_then_else(t * BLOCK + j < n,
                                             T.exp(T.cast(X[row, t * BLOCK + j], "float32") - row_max[i]), 0.0)
                T.reduce_sum(x, row_sum, dim=1, clear=True)
            for t in T.serial(T.ceildiv(n, BLOCK)):
                for i, j in T.Parallel(1, BLOCK):
                    if t * BLOCK + j < n:
                        Y[row, t * BLOCK + j] = T.cast(
                            T.exp(T.cast(X[row, t * BLOCK + j], "float32") - row_max[i]) / row_sum[i], dtype)

    return softmax_rows


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.dim() != 2
        if moved:  # softmax over dim 1 of an N-d tensor: make dim 1 the contiguous last dim
            x = x.movedim(1, -1)
        shape = x.shape
        x = x.contiguous().view(-1, shape[-1]) if x.numel() else x.reshape(-1, shape[-1])
        if x.numel() == 0:
            y = torch.empty_like(x)
        else:
            y = softmax(DTYPES[x.dtype])(x)
        y = y.view(shape)
        return y.movedim(-1, 1) if moved else y
