"""A fault, not a kernel: forks until its tree holds 512 processes, each then sleeping forever.

Bounded at 512 so that a machine this runs on is never at risk; the verifier's limit is far lower
(its watch kills the worker's whole process group past `Limits.max_processes`).
"""
import os
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(9):  # 2**9 = 512 processes
            if os.fork() < 0:
                break
        while True:
            time.sleep(1)
