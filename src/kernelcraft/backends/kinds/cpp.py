"""C++ (CPU code) built with `torch.utils.cpp_extension.load_inline(cpp_sources=…)` at import."""

from __future__ import annotations

import re

from kernelcraft.backends.kinds.cuda_inline import InlineBuild


class Cpp(InlineBuild):
    name = "cpp"
    summary = "C++ built with torch.utils.cpp_extension.load_inline(cpp_sources=…) — CPU code"
    devices = ("cpu", "cuda")

    def detect(self, code: str) -> bool:
        return bool(re.search(r"\bload_inline\s*\(", code) and not re.search(r"\bcuda_sources\s*=", code))
