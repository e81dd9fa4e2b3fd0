import torch, triton.testing
from benchmarks.matmul_sweep import load
from benchmarks.layernorm_resident_probe import REFERENCE
from kernelcraft.propose.builtin import nvrtc_kernels
from kernelcraft.propose.builtin.plan import Op
op = Op("layernorm", {"ndim": 3, "eps": 1e-5, "weight": "ln.weight", "bias": "ln.bias"})
x = torch.randn(16, 64, 256, 256, device="cuda")
ref = torch.nn.LayerNorm((64, 256, 256)).cuda()
torch.nn.init.normal_(ref.weight); torch.nn.init.normal_(ref.bias)
base = nvrtc_kernels.moves(op)[0].params
TAIL = "        __syncthreads();  // stat and red are rewritten by the next row\n"
def build(params, tail):
    src = nvrtc_kernels.render(op, REFERENCE.format(affine=True), params)
    assert TAIL in src
    if not tail:
        src = src.replace(TAIL, "")
    m = load(src).ModelNew().cuda()
    m.load_state_dict(ref.state_dict())
    return m
with torch.no_grad():
    want = ref(x)
    print("eager", triton.testing.do_bench(lambda: ref(x), warmup=30, rep=300), flush=True)
    for rep in range(2):
        for tail in (True, False):
            for pf in (0.5, 0.6, 0.4):
                m = build({**base, "prefetch": pf}, tail)
                err = (m(x) - want).abs().max().item()
                ms = triton.testing.do_bench(lambda: m(x), warmup=30, rep=300)
                print(f"tail_sync={tail} prefetch={pf} {ms:.4f} ms err {err:.2e}", flush=True)
