"""The CUDA source and the host code of the cluster softmax family (the package's docstring says what they do).
The CUDA source is one template: LOG_SOFTMAX and STREAM are compile-time switches, and the `extern "C"` entry
points are instances of the cluster and staged kernels for every V (units per thread) and W (float4 or float)."""

from __future__ import annotations

from string import Template

from kernelcraft.propose.builtin.family import Names, Rendered
from kernelcraft.propose.builtin.plan import Op

VS = (1, 2, 4, 8)  # float4 (or float) units per thread; 8 float4 = 32 registers of data

_CUDA = Template(r'''
#define NEG_INF __int_as_float(0xff800000)
#define LOG_SOFTMAX $log
#define STREAM $stream  // evict-first loads and stores: the row is touched once

__device__ __forceinline__ float nmax(float a, float b) { return (a != a || a > b) ? a : b; }  // NaN wins

__device__ __forceinline__ unsigned kc_cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void kc_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// A float in the shared memory of CTA `rank` of this cluster, at the place `p` has in ours.
__device__ __forceinline__ float kc_cluster_load(const float* p, unsigned rank)
{
    unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// Max (OP 0) or sum (OP 1) over the block; every thread gets it. `red` (32 floats) is free again only
// after a barrier that all the block's threads pass.
template <int OP>
__device__ __forceinline__ float kc_block_reduce(float v, float* red)
{
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = OP == 0 ? nmax(v, u) : v + u;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? red[lane] : (OP == 0 ? NEG_INF : 0.0f);
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = OP == 0 ? nmax(v, u) : v + u;
    }
    return v;
}

// One row per cluster of `csize` CTAs (blockIdx.x / csize); V units of W floats per thread.
template <int V, int W>
__device__ __forceinline__ void kc_softmax_cluster(const float* __restrict__ x, float* __restrict__ y, long long n,
                                                   unsigned csize)
{
    __shared__ float red[32];
    __shared__ float stat[2];
    const unsigned rank = kc_cluster_rank();
    const long long row = blockIdx.x / csize;
    const long long units = n / W;
    const long long per = (units + csize - 1) / csize;
    const long long lo = rank * per;
    const long long hi = min(units, lo + per);
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float v[V * W];
    float m = NEG_INF;
    #pragma unroll
    for (int j = 0; j < V; ++j) {
        const long long u = lo + threadIdx.x + (long long)j * blockDim.x;
        if (u < hi) {
            if (W == 4) {
                const float4* p = reinterpret_cast<const float4*>(xr) + u;
                const float4 q = STREAM ? __ldcs(p) : *p;
                v[4 * j] = q.x; v[4 * j + 1] = q.y; v[4 * j + 2] = q.z; v[4 * j + 3] = q.w;
            } else {
                v[j] = STREAM ? __ldcs(xr + u) : xr[u];
            }
            #pragma unroll
            for (int w = 0; w < W; ++w) m = nmax(m, v[j * W + w]);
        }
    }
    m = kc_block_reduce<0>(m, red);
    if (threadIdx.x == 0) stat[0] = m;
    kc_cluster_sync();
    float M = NEG_INF;
    for (unsigned r = 0; r < csize; ++r) M = nmax(M, kc_cluster_load(&stat[0], r));
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < V; ++j) {
        const long long u = lo + threadIdx.x + (long long)j * blockDim.x;
        if (u < hi) {
            #pragma unroll
            for (int w = 0; w < W; ++w) {
                const float e = expf(v[j * W + w] - M);
                s += e;
                if (!LOG_SOFTMAX) v[j * W + w] = e;
            }
        }
    }
    s = kc_block_reduce<1>(s, red);
    if (threadIdx.x == 0) stat[1] = s;
    kc_cluster_sync();
    float S = 0.0f;
    for (unsigned r = 0; r < csize; ++r) S += kc_cluster_load(&stat[1], r);  // same order in every CTA
    const float k = LOG_SOFTMAX ? M + logf(S) : 1.0f / S;
    #pragma unroll
    for (int j = 0; j < V; ++j) {
        const long long u = lo + threadIdx.x + (long long)j * blockDim.x;
        if (u < hi) {
            #pragma unroll
            for (int w = 0; w < W; ++w) v[j * W + w] = LOG_SOFTMAX ? v[j * W + w] - k : v[j * W + w] * k;
            if (W == 4) {
                const float4 q = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
                float4* p = reinterpret_cast<float4*>(yr) + u;
                if (STREAM) __stcs(p, q); else *p = q;
            } else if (STREAM) {
                __stcs(yr + u, v[j]);
            } else {
                yr[u] = v[j];
            }
        }
    }
    kc_cluster_sync();  // no CTA leaves while another may still read its shared memory
}

// One row per cluster of `csize` CTAs, each CTA's slice staged in shared memory by cp.async (no registers held
// while the loads are in flight, so many more CTAs, and rows, fit on an SM than in kc_softmax_cluster).
template <int W>
__device__ __forceinline__ void kc_softmax_staged(const float* __restrict__ x, float* __restrict__ y, long long n,
                                                  unsigned csize)
{
    extern __shared__ float4 kc_stage[];
    __shared__ float red[32];
    __shared__ float stat[2];
    const unsigned rank = kc_cluster_rank();
    const long long row = blockIdx.x / csize;
    const long long units = n / W;
    const long long per = (units + csize - 1) / csize;
    const long long lo = min(units, rank * per);
    const int cnt = (int)(min(units, lo + per) - lo);  // units in this CTA's slice
    const float* xr = x + row * n + W * lo;
    float* yr = y + row * n + W * lo;
    float* stage1 = reinterpret_cast<float*>(kc_stage);
    for (int u = threadIdx.x; u < cnt; u += blockDim.x) {
        if (W == 4) {
            const unsigned d = (unsigned)__cvta_generic_to_shared(kc_stage + u);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(xr + 4 * u) : "memory");
        } else {
            const unsigned d = (unsigned)__cvta_generic_to_shared(stage1 + u);
            asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(d), "l"(xr + u) : "memory");
        }
    }
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_all;" ::: "memory");
    __syncthreads();
    float m = NEG_INF;
    for (int u = threadIdx.x; u < cnt; u += blockDim.x) {
        if (W == 4) {
            const float4 q = kc_stage[u];
            m = nmax(nmax(m, q.x), nmax(nmax(q.y, q.z), q.w));
        } else {
            m = nmax(m, stage1[u]);
        }
    }
    m = kc_block_reduce<0>(m, red);
    if (threadIdx.x == 0) stat[0] = m;
    kc_cluster_sync();
    float M = NEG_INF;
    for (unsigned r = 0; r < csize; ++r) M = nmax(M, kc_cluster_load(&stat[0], r));
    float s = 0.0f;
    for (int u = threadIdx.x; u < cnt; u += blockDim.x) {  // each thread rereads only what it wrote back
        if (W == 4) {
            float4 q = kc_stage[u];
            const float4 e = make_float4(expf(q.x - M), expf(q.y - M), expf(q.z - M), expf(q.w - M));
            s += (e.x + e.y) + (e.z + e.w);
            if (!LOG_SOFTMAX) kc_stage[u] = e;
        } else {
            const float e = expf(stage1[u] - M);
            s += e;
            if (!LOG_SOFTMAX) stage1[u] = e;
        }
    }
    s = kc_block_reduce<1>(s, red);
    if (threadIdx.x == 0) stat[1] = s;
    kc_cluster_sync();
    float S = 0.0f;
    for (unsigned r = 0; r < csize; ++r) S += kc_cluster_load(&stat[1], r);  // same order in every CTA
    const float k = LOG_SOFTMAX ? M + logf(S) : 1.0f / S;
    for (int u = threadIdx.x; u < cnt; u += blockDim.x) {
        if (W == 4) {
            float4 q = kc_stage[u];
            if (LOG_SOFTMAX) { q.x -= k; q.y -= k; q.z -= k; q.w -= k; } else { q.x *= k; q.y *= k; q.z *= k; q.w *= k; }
            float4* p = reinterpret_cast<float4*>(yr) + u;
            if (STREAM) __stcs(p, q); else *p = q;
        } else {
            const float q = LOG_SOFTMAX ? stage1[u] - k : stage1[u] * k;
            if (STREAM) __stcs(yr + u, q); else yr[u] = q;
        }
    }
    kc_cluster_sync();  // no CTA leaves while another may still read its shared memory
}

$wrappers

// Any row length, one block per row: max, sum, write (three reads).
extern "C" __global__ void __launch_bounds__(1024)
kc_softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long n)
{
    __shared__ float red[32];
    const float* xr = x + blockIdx.x * n;
    float* yr = y + blockIdx.x * n;
    float m = NEG_INF, s = 0.0f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) m = nmax(m, xr[i]);
    m = kc_block_reduce<0>(m, red);
    __syncthreads();
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += expf(xr[i] - m);
    s = kc_block_reduce<1>(s, red);
    const float k = LOG_SOFTMAX ? m + logf(s) : 1.0f / s;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) yr[i] = LOG_SOFTMAX ? xr[i] - k : expf(xr[i] - m) * k;
}

// The reduced dim is not the last: column c of [outer, R, inner] per thread, R elements `inner` apart.
extern "C" __global__ void __launch_bounds__(256)
kc_softmax_columns(const float* __restrict__ x, float* __restrict__ y, long long R, long long inner, long long C)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const long long base = (c / inner) * R * inner + c % inner;
    float m = NEG_INF, s = 0.0f;
    for (long long r = 0; r < R; ++r) {  // online: the sum is rescaled whenever the max grows
        const float v = x[base + r * inner];
        const float mn = nmax(m, v);
        if (mn != NEG_INF) { s = s * expf(m - mn) + expf(v - mn); m = mn; }
    }
    const float k = LOG_SOFTMAX ? m + logf(s) : 1.0f / s;
    for (long long r = 0; r < R; ++r) {
        const float v = x[base + r * inner];
        y[base + r * inner] = LOG_SOFTMAX ? v - k : expf(v - m) * k;
    }
}
''')

_WRAPPER = ('extern "C" __global__ void __launch_bounds__(1024)\n'
            'kc_softmax_v{v}_w{w}(const float* __restrict__ x, float* __restrict__ y, long long n, unsigned csize)\n'
            '{{ kc_softmax_cluster<{v}, {w}>(x, y, n, csize); }}')
_STAGED = ('extern "C" __global__ void __launch_bounds__(1024)\n'
           'kc_softmax_staged_w{w}(const float* __restrict__ x, float* __restrict__ y, long long n, unsigned csize)\n'
           '{{ kc_softmax_staged<{w}>(x, y, n, csize); }}')


def _source(op: Op, p) -> str:
    wrappers = "\n".join([_WRAPPER.format(v=v, w=w) for w in (1, 4) for v in VS] + [_STAGED.format(w=w) for w in (1, 4)])
    return _CUDA.substitute(log=int(op.kind == "log_softmax"), stream=int(bool(p.stream)), wrappers=wrappers)


def render(op: Op, p, names: Names) -> Rendered:
    source, kernels = names("KC_SOURCE"), names("kc_kernels")
    module = f"{source} = r'''{_source(op, p)}'''\n\n{kernels} = load_kernels({source})"
    cs, threads = int(p.cluster), int(p.threads)
    staged = "" if not p.staged else f'''
cs = max(1, min({cs}, -(-units * width * 4 // {int(p.staged) * 1024})))  # slices of at most {int(p.staged)} KB
per = -(-units // cs)
threads = min({threads}, max(32, -(-per // 32) * 32))
if per * width * 4 <= torch.cuda.get_device_properties(x.device).shared_memory_per_block_optin:
    {kernels}[f"kc_softmax_staged_w{{width}}"](x, y, R, cs, grid=(rows * cs,), block=(threads,), cluster=(cs,),
                                               shared_mem=per * width * 4)
    return y'''
    return Rendered((module,), f'''
if x.dtype != torch.float32:
    raise TypeError(f"these CUDA kernels read and write float32, not {{x.dtype}}")
y = torch.empty_like(x)
if x.numel() == 0:
    return y
d = {int(op.detail["dim"])} % max(x.dim(), 1)
R = x.shape[d] if x.dim() else 1
inner = math.prod(x.shape[d + 1:])
rows = x.numel() // R
if inner > 1:
    {kernels}.kc_softmax_columns(x, y, R, inner, rows, grid=((rows + 255) // 256,), block=(256,))
    return y
width = 4 if R % 4 == 0 and x.data_ptr() % 16 == 0 else 1
units = R // width{staged}
cs = max(1, min({cs}, -(-units // {threads})))  # short rows take fewer CTAs, and fewer threads below
per = -(-units // cs)
threads = min({threads}, max(32, -(-per // 32) * 32))
v = next((v for v in {VS} if v * threads >= per), None)
if v is None:  # longer than the cluster's registers hold
    {kernels}.kc_softmax_rows(x, y, R, grid=(rows,), block=(1024,))
    return y
{kernels}[f"kc_softmax_v{{v}}_w{{width}}"](x, y, R, cs, grid=(rows * cs,), block=(threads,), cluster=(cs,))
return y''')
