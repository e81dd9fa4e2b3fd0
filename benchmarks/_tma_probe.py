import traceback, torch, triton.testing
from benchmarks.matmul_sweep import load
from kernelcraft.problems import load_problem
from kernelcraft.propose.builtin.analyze import analyze
from kernelcraft.propose.builtin.triton_kernels import moves, render
p = load_problem("level1/matmul"); op = analyze(p).single
a, b = (t.cuda() for t in p.load().get_inputs())
ref = a.double() @ b.double()
for m in moves(op):
    if not m.params.get("tma"):
        continue
    for bm, bn, bk, st in ((128, 256, 32, 3), (128, 128, 32, 4), (128, 256, 64, 3), (128, 128, 64, 3), (256, 128, 32, 3)):
        params = {**m.params, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_stages": st}
        try:
            model = load(render(op, p.source, params)).ModelNew().cuda()
            out = model(a, b)
            err = ((out.double() - ref).abs().max() / ref.abs().max()).item()
            ms = triton.testing.do_bench(lambda: model(a, b), warmup=30, rep=200)
            print(bm, bn, bk, st, "ms", round(ms, 4), "TFLOP/s", round(2 * 4096**3 / ms / 1e9, 1), "err", err, flush=True)
        except Exception:
            print(bm, bn, bk, st, traceback.format_exc()[-1500:], flush=True)
    break
