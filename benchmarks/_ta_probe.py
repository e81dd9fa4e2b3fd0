import torch
from benchmarks.matmul_sweep import load
from kernelcraft.candidate import Candidate
from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.triton_kernels import moves, render
from kernelcraft.verify import Verifier, VerifyConfig
p = load_problem("level1/matmul_transposed_a"); op = analyze(p).single
print(op)
a, b = (t.cuda() for t in p.load().get_inputs())
torch.backends.cuda.matmul.allow_tf32 = False
ref = torch.matmul(a.T.double(), b.double()) if op.detail["trans_a"] else None
srcs = []
for m in moves(op)[:4]:
    src = render(op, p.source, m.params); srcs.append(src)
    out = load(src).ModelNew().cuda()(a, b)
    print(m.params, out.shape, ((out.double() - ref).abs().max() / ref.abs().max()).item())
with Verifier("cuda", VerifyConfig(compile_baseline=False)) as v:
    r = v.evaluate(p, Candidate(srcs[2], "x"))
    print(r.status, r.reasons, (r.message or "")[:1500])
