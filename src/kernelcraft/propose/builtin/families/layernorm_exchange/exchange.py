"""CUDA device code for the families whose rows span a group of thread blocks (the exchange LayerNorm's today):
each block publishes its partial result for a row (three floats) behind a release flag in global memory, and
every block gathers the group's entries once their flags show the row (each thread waits on a few, so the
round trips overlap): an all-gather, not a barrier with a central counter. Entries live in two slots (by row parity), so a block that runs ahead cannot
overwrite an entry a slower block still has to read: to publish row i + 2 it must have gathered row i + 1,
which every block publishes only after it has read row i. Flags count rows on from a base that each call
raises past the last call's rows, and a new buffer starts zeroed, so a stale entry never passes for a fresh one
(and no launch is spent clearing the buffer). The group's blocks must be
resident together: such kernels are launched cooperatively.
"""

EXCHANGE = r'''
// Each thread sleeps this long between polls of a flag: every block of a group polls all of the group's flags,
// and back-to-back polls slow the L2 slices that hold them (and with them the flags still to come): 1% of
// LayerNorm (16, 64, 256, 256) on an H100 (benchmarks/probes/layernorm_variants_probe.py).
#define KC_POLL_NS 100

__device__ __forceinline__ unsigned kc_load_acquire(const unsigned* p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void kc_store_release(unsigned* p, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

// This block's entry (a, b, c) for the row its loop counts as `tag` (from 1), in `slot` (gridDim.x entries).
__device__ __forceinline__ void kc_publish(float4* slot, float a, float b, float c, unsigned tag)
{
    float4* mine = slot + blockIdx.x;
    mine->x = a; mine->y = b; mine->z = c;
    kc_store_release(reinterpret_cast<unsigned*>(&mine->w), tag);  // the data before the flag
}

template <class Merge>
__device__ __forceinline__ float3 kc_warp_merge3(float3 acc, Merge merge)
{
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float3 u = make_float3(__shfl_xor_sync(0xffffffffu, acc.x, o), __shfl_xor_sync(0xffffffffu, acc.y, o),
                                     __shfl_xor_sync(0xffffffffu, acc.z, o));
        acc = merge(acc, u);
    }
    return acc;
}

// The whole block: the `group` entries from `mates`, once each shows `tag`, merged by a fixed tree (the same
// in every block of the group); thread 0's result is the one to use. Each thread waits on at most a few
// entries, so the flags' round trips overlap instead of queuing behind one another. `red` (32 entries) is
// free again after the next barrier.
template <class Merge>
__device__ __forceinline__ float3 kc_gather(const float4* mates, unsigned group, unsigned tag, float3 acc,
                                            float3* red, Merge merge)
{
    const float3 none = acc;  // the merge's identity
    for (unsigned r = threadIdx.x; r < group; r += blockDim.x) {
        while (kc_load_acquire(reinterpret_cast<const unsigned*>(&mates[r].w)) != tag) __nanosleep(KC_POLL_NS);
        const float4 e = __ldcg(mates + r);
        acc = merge(acc, make_float3(e.x, e.y, e.z));
    }
    acc = kc_warp_merge3(acc, merge);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // the previous use of `red` is over
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (warp == 0) acc = kc_warp_merge3(lane < (int)(blockDim.x >> 5) ? red[lane] : none, merge);
    return acc;
}
'''
