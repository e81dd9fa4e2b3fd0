"""Probe of source variants of the CUDA LayerNorm family's resident-row kernel, on LayerNorm (16, 64, 256, 256)
with affine weight and bias: the kernel as it is, without one or both of the barriers in each row (at the end of
the row; at the start of the exchange's gather; each looks redundant given the others), and with the L2 prefetch
of the next row issued as soon as this row's loads are (instead of after the block's statistics are published);
with the exchange's flags polled back to back or with other sleeps between polls, or with relaxed loads and one
acquire fence after the flag shows;
and, for timing only, without waiting for the group's statistics (each block uses its own: wrong results), which
bounds what a faster exchange could give.
Each variant is the rendered candidate with a line edited; all are checked against torch and timed in turn
(do_bench: CUDA events, L2 cleared between reps), three times over.

    python benchmarks/probes/layernorm_variants_probe.py > benchmarks/results/layernorm-variants-h100.log
"""

import statistics

import torch
import triton.testing

from benchmarks.probes.layernorm_resident_probe import REFERENCE
from benchmarks.matmul_sweep import load
from kernelcraft.propose.builtin import registry
from kernelcraft.propose.builtin.plan import Op

ROW_END = ("        __syncthreads();  // stat and red are rewritten by the next row\n", "")
GATHER = ("    __syncthreads();  // the previous use of `red` is over\n", "")
LATE = ("                if (W == 4 && prefetch > 0.0f && span > 0)  // thread 0's xr and bt start the block's slices\n"
        "                    kc_prefetch(it + 1 < iterations ? xr + stride : nullptr, bt, span, prefetch, b_res);\n", "")
EARLY = ("        if (it == 0) {  // after the first row's loads",
         "        if (group > 1 && threadIdx.x == 0 && W == 4 && prefetch > 0.0f && span > 0)\n"
         "            kc_prefetch(it + 1 < iterations ? xr + stride : nullptr, bt, span, prefetch, b_res);\n"
         "        if (it == 0) {  // after the first row's loads")
SPIN = "        while (kc_load_acquire(reinterpret_cast<const unsigned*>(&mates[r].w)) != tag) __nanosleep(KC_POLL_NS);\n"
RELAXED = (SPIN, SPIN.replace("kc_load_acquire", "kc_load_relaxed")
           + "        asm volatile(\"fence.acq_rel.gpu;\" ::: \"memory\");\n")
RELAXED_LOAD = ("__device__ __forceinline__ void kc_store_release",
                "__device__ __forceinline__ unsigned kc_load_relaxed(const unsigned* p)\n{\n    unsigned v;\n"
                "    asm volatile(\"ld.relaxed.gpu.global.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(p) : \"memory\");\n"
                "    return v;\n}\n\n__device__ __forceinline__ void kc_store_release")


def sleep(ns: int) -> tuple[str, str]:
    return "#define KC_POLL_NS 100\n", f"#define KC_POLL_NS {ns}\n"


# Timing only (its results are wrong): each block normalizes with its own statistics, waiting for no other block.
NO_WAIT = ("kc_gather(slot + (blockIdx.x - rank), group,", "kc_gather(slot + (blockIdx.x - rank), 0u,")
VARIANTS = {"as is (100 ns sleeps)": [], "no sleep between polls": [(SPIN, SPIN.replace("__nanosleep(KC_POLL_NS);", "{ }"))],
            "25 ns sleeps": [sleep(25)], "50 ns sleeps": [sleep(50)], "200 ns sleeps": [sleep(200)],
            "400 ns sleeps": [sleep(400)], "- row-end barrier": [ROW_END], "- gather barrier": [GATHER],
            "- both barriers": [ROW_END, GATHER], "early prefetch": [LATE, EARLY],
            "relaxed polls, one fence": [RELAXED_LOAD, RELAXED], "no wait (wrong)": [NO_WAIT]}


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    op = Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"})
    x = torch.randn(16, 64, 256, 256, device="cuda")
    reference = torch.nn.LayerNorm((64, 256, 256)).cuda()
    with torch.no_grad():
        reference.weight.normal_()
        reference.bias.normal_()
        want = reference(x)
    models = {}
    for i, move in enumerate(registry.moves(op, "cuda_nvrtc")[:2]):
        text = registry.render(op, REFERENCE.format(affine=True), move.params)
        for name, edits in VARIANTS.items():
            edited = text
            for old, new in edits:
                assert edited.count(old) == 1, (name, old)
                edited = edited.replace(old, new)
            m = load(edited).ModelNew().cuda()
            m.load_state_dict({f"ln.{k}": v for k, v in reference.state_dict().items()})
            with torch.no_grad():
                err = ((m(x) - want).abs().max() / want.abs().max()).item()
            models[(i, name)] = m
            print(f"move {i} {name}: max error {err:.2e} (relative to max |y|)  {move.params}", flush=True)
    times: dict = {key: [] for key in models}
    with torch.no_grad():
        for _ in range(3):
            for key, m in models.items():
                times[key].append(triton.testing.do_bench(lambda: m(x), warmup=30, rep=300))
    for (i, name), ms in times.items():
        print(f"move {i} {name:24} median {statistics.median(ms):.4f} ms  runs {' '.join(f'{t:.4f}' for t in ms)}")


if __name__ == "__main__":
    main()
