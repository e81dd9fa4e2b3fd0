"""The CUDA source and the host code of the exchange LayerNorm family (the package's docstring says what they do).
The CUDA source is one template: HAS_W, HAS_B and STREAM are compile-time switches, and the `extern "C"` entry
points are instances of the resident-row kernel for every V (units per thread) and W (float4 or float). The host
code (the launch plan of a shape, the exchange buffers) is a template too: the move's threads and shared-memory
use, and the names it defines for the op."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.codegen import num
from kernelcraft.propose.builtin.families.layernorm_exchange.exchange import EXCHANGE
from kernelcraft.propose.builtin.family import Names, Rendered
from kernelcraft.propose.builtin.paths import attr
from kernelcraft.propose.builtin.plan import Op

VS = (1, 2, 4, 8)  # float4 (or float) units per thread; 8 float4 = 32 registers of data
VS_SCALAR = (1, 2, 4, 8, 16, 32)

_CUDA = Template(EXCHANGE + r'''
#define HAS_W $has_w
#define HAS_B $has_b
#define STREAM $stream  // x and y touched once (evict-first); w and b re-read by every row (evict-last)

struct KcStat { float n, mean, m2; };

// Chan et al.: the count, mean and sum of squared deviations of two disjoint parts, merged.
__device__ __forceinline__ KcStat kc_merge(KcStat a, KcStat b)
{
    const float n = a.n + b.n;
    if (n == 0.0f) return a;
    const float d = b.mean - a.mean, f = b.n / n;
    return {n, fmaf(d, f, a.mean), a.m2 + b.m2 + d * d * a.n * f};
}

__device__ __forceinline__ KcStat kc_warp_merge(KcStat s)
{
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const KcStat u = {__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
                          __shfl_xor_sync(0xffffffffu, s.m2, o)};
        s = kc_merge(s, u);
    }
    return s;  // lane 0's is the one used: lanes may differ in the last bit
}

// The block's statistics, from lane 0 of warp 0; `red` (32 entries) is free again after the next barrier.
__device__ __forceinline__ KcStat kc_block_merge(KcStat s, KcStat* red)
{
    s = kc_warp_merge(s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x >> 5) ? red[lane] : KcStat{0.0f, 0.0f, 0.0f};
        s = kc_warp_merge(s);
    }
    return s;
}

// The block's sum, in thread 0; `sums` (32 floats) is free again after the next barrier.
__device__ __forceinline__ float kc_block_sum(float s, float* sums)
{
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // the previous use of `sums` is over
    if (lane == 0) sums[warp] = s;
    __syncthreads();
    s = lane < (int)(blockDim.x >> 5) ? sums[lane] : 0.0f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

__device__ __forceinline__ float4 kc_load4(const float* p, bool keep)
{
    float4 v;
    if (!STREAM) return *reinterpret_cast<const float4*>(p);
    if (!keep) return __ldcs(reinterpret_cast<const float4*>(p));
    asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                 "ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], pol;\n\t}"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ float kc_load1(const float* p, bool keep)
{
    float v;
    if (!STREAM) return *p;
    if (!keep) return __ldcs(p);
    asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                 "ld.global.L2::cache_hint.f32 %0, [%1], pol;\n\t}" : "=f"(v) : "l"(p));
    return v;
}

// While the group's statistics are exchanged, DRAM reads ahead into L2: a fraction of this block's slice of the
// next row (`next`, null after the last row), and the parts of b this row will read that are not in shared memory
// (units j >= b_res of each thread). The block's slice is `span` float4 units, from `next` and from `b`.
__device__ __forceinline__ void kc_prefetch(const float* next, const float* b, int span, float fraction, int b_res)
{
    const unsigned bytes = (unsigned)((float)span * 16.0f * fraction) & ~15u;
    if (next && bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(next), "r"(bytes) : "memory");
    if (HAS_B) {
        for (int u = b_res * (int)blockDim.x; u < span; u += blockDim.x) {
            const unsigned bytes = (unsigned)min((int)blockDim.x, span - u) * 16;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(b + 4 * u), "r"(bytes) : "memory");
        }
    }
}

// 16 (w == 4) or 4 bytes from global to this thread's own place in shared memory, without registers.
__device__ __forceinline__ void kc_copy_async(void* dst, const float* src, int w)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (w == 4) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
    else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(d), "l"(src) : "memory");
}

// Rows of n floats over groups of `group` blocks (gridDim.x / group groups, each looping over its rows);
// V units of W floats per thread. `part` holds 2 * gridDim.x entries of (count, mean, M2, flag): flags below
// base + 1 (zero when new, or left by an earlier call, which counted its rows below base).
template <int V, int W>
__device__ __forceinline__ void kc_layernorm(const float* __restrict__ x, float* __restrict__ y,
                                             const float* __restrict__ w, const float* __restrict__ b,
                                             float4* __restrict__ part, long long rows, long long n, float eps,
                                             unsigned group, float prefetch, int w_res, int b_res, unsigned base)
{
    // The block's slice of w (units j < w_res of each thread) and of b (j < b_res), loaded once for all rows.
    extern __shared__ float4 kc_affine[];
    __shared__ KcStat red[32];
    __shared__ float3 mates[32];
    __shared__ float stat[2];
    const unsigned rank = blockIdx.x % group, groups = gridDim.x / group;
    const long long units = n / W;
    const long long per = (units + group - 1) / group;  // at most V * blockDim.x
    const long long lo = rank * per;
    const int span = (int)max(0LL, min(units, lo + per) - lo);  // this block's units: lo .. lo + span
    // this thread's units: lo + threadIdx.x + j * blockDim.x for j < valid, the same in every row
    const int valid = span > (int)threadIdx.x ? min(V, (span - (int)threadIdx.x + (int)blockDim.x - 1) / (int)blockDim.x) : 0;
    const long long first = W * (lo + threadIdx.x);
    const unsigned step = W * blockDim.x;
    // Pointers to this thread's first element, moved on by a stride per row (fewer live registers than indices).
    const long long row0 = blockIdx.x / group, stride = (long long)groups * n;
    const unsigned iterations = row0 < rows ? (unsigned)((rows - row0 + groups - 1) / groups) : 0u;
    const float* xr = x + row0 * n + first;  float* yr = y + row0 * n + first;
    const float *wt = w + first, *bt = b + first;
    float v[V * W];
    float* affine1 = reinterpret_cast<float*>(kc_affine);
    for (unsigned it = 0; it < iterations; ++it, xr += stride, yr += stride) {
        float sum = 0.0f;
        #pragma unroll
        for (int j = 0; j < V; ++j) {
            if (j < valid) {
                if (W == 4) {
                    const float4 q = kc_load4(xr + j * step, false);
                    v[4 * j] = q.x; v[4 * j + 1] = q.y; v[4 * j + 2] = q.z; v[4 * j + 3] = q.w;
                } else {
                    v[j] = kc_load1(xr + j * step, false);
                }
                #pragma unroll
                for (int k = 0; k < W; ++k) sum += v[j * W + k];
            }
        }
        if (it == 0) {  // after the first row's loads: the affine slices, copied to shared memory asynchronously
            #pragma unroll
            for (int j = 0; j < V; ++j) {
                if (j < valid) {
                    const unsigned wi = j * blockDim.x + threadIdx.x, bi = (w_res + j) * blockDim.x + threadIdx.x;
                    if (HAS_W && j < w_res) kc_copy_async(W == 4 ? (void*)(kc_affine + wi) : (void*)(affine1 + wi), wt + j * step, W);
                    if (HAS_B && j < b_res) kc_copy_async(W == 4 ? (void*)(kc_affine + bi) : (void*)(affine1 + bi), bt + j * step, W);
                }
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
        const float cnt = (float)(valid * W);
        KcStat s = {cnt, cnt > 0.0f ? sum / cnt : 0.0f, 0.0f};
        #pragma unroll
        for (int j = 0; j < V; ++j) {
            if (j < valid) {
                #pragma unroll
                for (int k = 0; k < W; ++k) {
                    const float d = v[j * W + k] - s.mean;
                    s.m2 = fmaf(d, d, s.m2);
                }
            }
        }
        s = kc_block_merge(s, red);
        if (group > 1) {
            float4* slot = part + (it & 1) * gridDim.x;
            if (threadIdx.x == 0) {
                kc_publish(slot, s.n, s.mean, s.m2, base + it + 1);
                if (W == 4 && prefetch > 0.0f && span > 0)  // thread 0's xr and bt start the block's slices
                    kc_prefetch(it + 1 < iterations ? xr + stride : nullptr, bt, span, prefetch, b_res);
            }
            const float3 g = kc_gather(slot + (blockIdx.x - rank), group, base + it + 1, make_float3(0.0f, 0.0f, 0.0f),
                                       mates, [](float3 a, float3 b) {
                                           const KcStat m = kc_merge(KcStat{a.x, a.y, a.z}, KcStat{b.x, b.y, b.z});
                                           return make_float3(m.n, m.mean, m.m2);
                                       });
            s = KcStat{g.x, g.y, g.z};
        }
        if (threadIdx.x == 0) {
            stat[0] = s.mean;
            stat[1] = rsqrtf(s.m2 / (float)n + eps);
        }
        __syncthreads();
        const float mean = stat[0], rstd = stat[1];
        asm volatile("cp.async.wait_all;" ::: "memory");  // this thread's own affine units have landed
        #pragma unroll
        for (int j = 0; j < V; ++j) {
            if (j < valid) {
                #pragma unroll
                for (int k = 0; k < W; ++k) v[j * W + k] = (v[j * W + k] - mean) * rstd;
                const int wi = j * blockDim.x + threadIdx.x, bi = (w_res + j) * blockDim.x + threadIdx.x;
                if (W == 4) {
                    float4 q = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
                    if (HAS_W) {
                        const float4 g = j < w_res ? kc_affine[wi] : kc_load4(wt + j * step, true);
                        q.x *= g.x; q.y *= g.y; q.z *= g.z; q.w *= g.w;
                    }
                    if (HAS_B) {
                        const float4 c = j < b_res ? kc_affine[bi] : kc_load4(bt + j * step, true);
                        q.x += c.x; q.y += c.y; q.z += c.z; q.w += c.w;
                    }
                    float4* p = reinterpret_cast<float4*>(yr + j * step);
                    if (STREAM) __stcs(p, q); else *p = q;
                } else {
                    float t = v[j];
                    if (HAS_W) t *= j < w_res ? affine1[wi] : kc_load1(wt + j * step, true);
                    if (HAS_B) t += j < b_res ? affine1[bi] : kc_load1(bt + j * step, true);
                    if (STREAM) __stcs(yr + j * step, t); else yr[j * step] = t;
                }
            }
        }
        __syncthreads();  // stat and red are rewritten by the next row
    }
}

$wrappers

// Rows longer than the GPU's registers hold: one block per row, the row read three times (mean, squared
// deviations, write).
extern "C" __global__ void __launch_bounds__(1024)
kc_layernorm_rows(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                  const float* __restrict__ b, long long n, float eps)
{
    __shared__ float sums[32];
    __shared__ float stat[2];
    const float* xr = x + blockIdx.x * n;
    float* yr = y + blockIdx.x * n;
    float sum = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
    sum = kc_block_sum(sum, sums);
    if (threadIdx.x == 0) stat[0] = sum / (float)n;
    __syncthreads();
    const float mean = stat[0];
    float m2 = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = xr[i] - mean;
        m2 = fmaf(d, d, m2);
    }
    m2 = kc_block_sum(m2, sums);
    if (threadIdx.x == 0) stat[1] = rsqrtf(m2 / (float)n + eps);
    __syncthreads();
    const float rstd = stat[1];
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        float t = (xr[i] - mean) * rstd;
        if (HAS_W) t *= w[i];
        if (HAS_B) t += b[i];
        yr[i] = t;
    }
}
''')

# Host side: the launch plan of a shape (worked out once per shape and device) and the exchange buffers.
_HOST = Template('''
$plans = {}  # (device, rows, n, width) -> the launch plan
$buffers = {}  # (device, stream, entries) -> [buffer, the next call's base]


def $plan(rows, n, width, device):
    \"\"\"(kernel name or None for the block-per-row kernel, groups, blocks per group, threads, w_res, b_res, unit).\"\"\"
    units = n // width
    vs = $vs4 if width == 4 else $vs1
    threads = min($threads, max(32, -(-units // vs[-1]) + 31) // 32 * 32)  # a short row: fewer threads
    need = -(-units // (threads * vs[-1]))  # blocks one row needs
    props = torch.cuda.get_device_properties(device)
    resident = props.multi_processor_count * $kernels[f"kc_layernorm_v{vs[-1]}_w{width}"].blocks_per_sm(threads, device=device)
    if need > resident:
        return None, 0, 0, 0, 0, 0, 0
    groups = max(1, min(rows, resident // need))
    group = max(need, min(resident // groups, -(-units // threads)))  # spread a row over the blocks left over
    v = next(v for v in vs if v * threads * group >= units)
    name = f"kc_layernorm_v{v}_w{width}"
    unit = threads * width * 4
    room = props.shared_memory_per_block_optin // unit if rows > groups else 0  # units kept in shared memory:
    w_res = $w_res  # of w's slice first,
    b_res = $b_res  # then of b's
    while w_res + b_res and props.multi_processor_count * $kernels[name].blocks_per_sm(threads, (w_res + b_res) * unit, device) < groups * group:
        w_res, b_res = (w_res, b_res - 1) if b_res else (w_res - 1, 0)  # less, so the group's blocks fit
    return name, groups, group, threads, w_res, b_res, unit


def $exchange(device, entries, iterations):
    \"\"\"The exchange buffer of this stream and the base of this call's flags: each call counts its rows on from the
    last one's, so flags left by earlier calls never pass for this call's (a new buffer is zeroed; one is made
    again before the count could wrap).\"\"\"
    key = (device.index, torch.cuda.current_stream(device).cuda_stream, entries)
    held = $buffers.get(key)
    if held is None or held[1] + iterations + 1 >= 1 << 31:
        held = $buffers[key] = [torch.zeros((entries, 4), dtype=torch.float32, device=device), 0]
    base = held[1]
    held[1] += iterations
    return held[0], base
''')

_WRAPPER = ('extern "C" __global__ void __launch_bounds__(1024)\n'
            'kc_layernorm_v{v}_w{w}(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,\n'
            '    const float* __restrict__ b, float4* __restrict__ part, long long rows, long long n, float eps,\n'
            '    unsigned group, float prefetch, int w_res, int b_res, unsigned base)\n'
            '{{ kc_layernorm<{v}, {w}>(x, y, w, b, part, rows, n, eps, group, prefetch, w_res, b_res, base); }}')


def _source(op: Op, p) -> str:
    d = op.detail
    wrappers = "\n".join(_WRAPPER.format(v=v, w=w) for w, vs in ((4, VS), (1, VS_SCALAR)) for v in vs)
    return _CUDA.substitute(has_w=int(bool(d.get("weight"))), has_b=int(bool(d.get("bias"))),
                            stream=int(bool(p.stream)), wrappers=wrappers)


def render(op: Op, p, names: Names) -> Rendered:
    d = op.detail
    source, kernels, plans, buffers, plan, exchange = (names(n) for n in ("KC_SOURCE", "kc_kernels", "KC_PLANS",
                                                                          "KC_EXCHANGE", "kc_plan", "kc_exchange"))
    has_w, has_b, smem = bool(d.get("weight")), bool(d.get("bias")), bool(p.affine_smem)
    host = _HOST.substitute(plans=plans, buffers=buffers, plan=plan, exchange=exchange, kernels=kernels,
                            threads=int(p.threads), vs4=VS, vs1=VS_SCALAR,
                            w_res="min(v, room)" if has_w and smem else "0",
                            b_res="max(0, min(v, room - w_res))" if has_b and smem else "0")
    module = f"{source} = r'''{_source(op, p)}'''\n\n{kernels} = load_kernels({source})\n{host}"
    eps = attr(d["eps_attr"]) if d.get("eps_attr") else num(d["eps"])
    affine = [attr(d[k]) for k in ("weight", "bias") if d.get(k)]
    return Rendered((module,), f'''
if x.dtype != torch.float32:
    raise TypeError(f"these CUDA kernels read and write float32, not {{x.dtype}}")
y = torch.empty_like(x)
n = math.prod(x.shape[max(x.dim() - {int(d["ndim"])}, 0):])
if x.numel() == 0:
    return y
rows = x.numel() // n
affine = [t.reshape(-1) for t in ({", ".join(affine)}{"," if len(affine) == 1 else ""})]
if any(t.dtype != torch.float32 or t.numel() != n for t in affine):
    raise TypeError("these CUDA kernels take float32 weight and bias of the normalized shape")
w = {"affine[0]" if d.get("weight") else "x  # unused"}
b = {"affine[-1]" if d.get("bias") else "x  # unused"}
eps = float({eps})
width = 4 if n % 4 == 0 and all(t.data_ptr() % 16 == 0 for t in (x, y, *affine)) else 1
key = (x.device.index, rows, n, width)
if key not in {plans}:
    {plans}[key] = {plan}(rows, n, width, x.device)
name, groups, group, threads, w_res, b_res, unit = {plans}[key]
if name is None:  # longer than the GPU's registers hold
    {kernels}.kc_layernorm_rows(x, y, w, b, n, eps, grid=(rows,), block=(1024,))
    return y
part, base = {exchange}(x.device, 2 * groups * group, -(-rows // groups))
{kernels}[name](x, y, w, b, part, rows, n, eps, group, {float(p.prefetch)}, w_res, b_res, base,
                 grid=(groups * group,), block=(threads,), shared_mem=(w_res + b_res) * unit, cooperative=group > 1)
return y''')
