"""A fault, not a kernel: prints a result claiming success, then returns wrong values."""
import json

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        print(json.dumps({"status": "ok", "correct": True, "speedup_eager": 100.0}), flush=True)
        return torch.zeros_like(x)
