"""Why level 1's 97 failed strict on its large_scale trial: the judge's steps by hand (draw a trial's inputs, torch's
output, float64, the rounding sampled over 8 more runs, compare / compare_exact) at a smaller batch, for the built-in
kernel with fp64 and with fp32 products and for torch's math path. Run from the checkout's root, with the candidate
file written by the built-in engineer for 97 at .run/cand97.py:

    PYTHONPATH=src python benchmarks/probes/attention_probe97.py 4 8

Record: benchmarks/results/attention-probe97-h200-2026-11-29.log (at cace43f, before d537fca's fix)."""
import importlib.util, sys, json, torch
from kernelcraft.verify.inputs import draw_inputs, perturbed, fresh_seed
from kernelcraft.verify.check import compare, compare_exact, rounding
from kernelcraft.verify.policy import POLICIES, set_exact_fp32
set_exact_fp32(True)
spec = importlib.util.spec_from_file_location("cand", ".run/cand97.py"); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
m.batch_size, m.num_heads = int(sys.argv[1]), int(sys.argv[2])
pol = POLICIES["strict"]
model, ref = m.ModelNew().cuda(), m.Model().cuda()
dm = m.Model().cuda().double()
def stats(name, out, exp, ex, noise):
    c1 = compare(out, exp, pol); c2 = compare_exact(out, exp, ex, pol); c3 = compare_exact(out, exp, ex, pol, noise, 9)
    d = (out.double() - ex).abs(); t = (exp.double() - ex).abs()
    print(f"  {name}: vs torch ok={c1.ok} {c1.max_rel_error:.3g}; vs f64(torch err) ok={c2.ok} {c2.max_rel_error:.3g}; vs f64(sampled) ok={c3.ok} {c3.max_rel_error:.3g}")
    print(f"     |err| mean {d.mean():.3g} max {d.max():.3g}; torch |err| mean {t.mean():.3g} max {t.max():.3g}; noise mean {noise.double().mean():.3g}; frac d>10*noise {(d > 10*noise.double()).double().mean():.3f}; frac out==ex {(d==0).double().mean():.3f} torch==ex {(t==0).double().mean():.3f}")
    if not c3.ok: print("     ", c3.detail[-400:])
for dist in ["natural", "large_scale", "large_scale", "mixed_scale"]:
    seed = fresh_seed()
    inp = draw_inputs(m, "cuda", seed, dist)
    with torch.no_grad():
        exp = ref(*inp); ex = dm(*[x.double() for x in inp])
        noise = rounding(exp, ex)
        g = torch.Generator(device="cuda").manual_seed(seed)
        for _ in range(8):
            near = perturbed(inp, g); rounding(ref(*near), dm(*[x.double() for x in near]), into=noise)
        print(dist, "scales", [f"{x.abs().max().item():.3g}" for x in inp], flush=True)
        stats("fp64 products", model(*inp), exp, ex, noise)
        m.kc_fp64_gpu = lambda t: False
        stats("fp32 products", model(*inp), exp, ex, noise)
        m.kc_fp64_gpu = lambda t: t.is_cuda and torch.cuda.get_device_capability(t.device)[0] == 9
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            stats("torch math backend", ref(*inp), exp, ex, noise)
