"""Softmax over dim=1 (level1/softmax, (4096, 65536)) in Helion: rows in tiles, each row's columns in chunks.

An online softmax in Helion's tile loops, which Helion lowers to one Triton kernel: the first loop over a row's
chunks keeps a running max and sum of exp, rescaling the sum whenever the max grows; the second writes
exp(x - max) / sum. The config is fixed (one row a program, 2,048 columns a chunk), so nothing is autotuned;
Helion masks the edges, so any shape runs. An all -inf row gives NaN like torch. Inputs of other ranks: dim 1
is moved last first.
"""
import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[1, 2048], num_warps=8), static_shapes=True)
def softmax_rows(x: torch.Tensor) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    block_m = hl.register_block_size(m)
    block_n = hl.register_block_size(n)
    for tile_m in hl.tile(m, block_size=block_m):
        m_run = hl.full([tile_m], float("-inf"), dtype=torch.float32)
        s_run = hl.zeros([tile_m], dtype=torch.float32)
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            m_new = torch.maximum(m_run, torch.amax(values, dim=1))
            # all -inf so far: subtract 0 instead, so exp(-inf - -inf) never makes a NaN
            m_safe = torch.where(m_new == float("-inf"), 0.0, m_new)
            s_run = s_run * torch.exp(m_run - m_safe) + torch.exp(values - m_safe[:, None]).sum(dim=1)
            m_run = m_new
        for tile_n in hl.tile(n, block_size=block_n):
            values = x[tile_m, tile_n].to(torch.float32)
            out[tile_m, tile_n] = (torch.exp(values - m_run[:, None]) / s_run[:, None]).to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = x.dim() != 2
        if moved:  # softmax over dim 1 of an N-d tensor: make dim 1 the contiguous last dim
            x = x.movedim(1, -1)
        rows = x.reshape(-1, x.shape[-1]).contiguous()
        if rows.numel() == 0:
            return torch.empty_like(x).movedim(-1, 1) if moved else torch.empty_like(x)
        y = softmax_rows(rows).reshape(x.shape)
        return y.movedim(-1, 1) if moved else y
