"""What ptxas reports for the CUDA (NVRTC) LayerNorm family's kernels, per move: registers and spilled bytes per
thread of every kernel the candidate file compiles (kc_layernorm_v<V>_w<W>: V units of W floats per thread),
affine and not. Compile-time facts (sm_90a), no GPU needed; run on a machine without one, where NVRTC's log
keeps ptxas's lines.

    python benchmarks/nvrtc_resources.py > benchmarks/results/nvrtc-resources-layernorm.log
"""

import re

from benchmarks.probes.layernorm_resident_probe import REFERENCE
from kernelcraft.backends import nvrtc
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.plan import Op


def main() -> None:
    for affine in (True, False):
        op = Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight" if affine else None,
                              "bias": "ln.bias" if affine else None})
        for i, move in enumerate(registry.moves(op, "cuda_nvrtc")):
            text = registry.render(op, REFERENCE.format(affine=affine), move.params)
            source = text.split("KC_SOURCE = r'''")[1].split("'''")[0]
            _, log, _ = nvrtc.compile_cubin(source, "sm_90a")
            lines, out = log.splitlines(), []
            for k, line in enumerate(lines):
                if "Compiling entry function" in line:
                    props = " ".join(lines[k + 1:k + 4])
                    regs = re.search(r"Used (\d+) registers", props).group(1)
                    spill = re.search(r"(\d+) bytes spill stores", props).group(1)
                    out.append(f"{line.split(chr(39))[1].removeprefix('kc_layernorm_')}: {regs} regs, {spill} B spilled")
            print(f"affine={affine!s:5} move {i} {move.params}\n    " + "; ".join(out), flush=True)


if __name__ == "__main__":
    main()
