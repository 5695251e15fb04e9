"""Kernels the ordering programs (order_*.py, clean_order_*.py) share: each waits on the GPU's nanosecond
clock (%globaltimer) before it touches memory, so that work queued after it on another stream really runs
first, and a missing order shows as a wrong value rather than as luck.

- ``spin_fill_u32(out, n, value, ns)``: wait ``ns`` nanoseconds, then out[i] = value for i < n.
- ``spin_copy_u32(dst, src, n, ns)``: wait ``ns`` nanoseconds, then dst[i] = src[i] for i < n.

Both use a grid-stride loop over a grid small enough to be resident at once (GRID x BLOCK threads), so the
whole kernel waits once. Given as PTX (ISA 8.0, sm_90: H100 and H200) for the driver-API programs and as
CUDA C for CuPy's RawKernel. Nothing here makes a call a marker points at: every launch, copy, free and
wait is made in the program itself, so that the call's stack ends on the marked line.
"""

import ctypes

SPIN_NS = 50_000_000  # 50 ms: far longer than any copy or launch queued behind it on another stream
GRID, BLOCK = 264, 256  # two blocks per SM of an H100/H200 (132 SMs): all resident, one wait per kernel

SPIN_PTX = b"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry spin_fill_u32(.param .u64 p_out, .param .u32 p_n, .param .u32 p_value, .param .u64 p_ns)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [p_out];
    ld.param.u32 %r1, [p_n];
    ld.param.u32 %r2, [p_value];
    ld.param.u64 %rd2, [p_ns];
    mov.u64 %rd3, %globaltimer;
SPIN:
    mov.u64 %rd4, %globaltimer;
    sub.s64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra SPIN;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    mov.u32 %r7, %nctaid.x;
    mul.lo.s32 %r7, %r7, %r4;
    cvta.to.global.u64 %rd6, %rd1;
LOOP:
    setp.ge.u32 %p2, %r6, %r1;
    @%p2 bra DONE;
    mul.wide.u32 %rd7, %r6, 4;
    add.s64 %rd8, %rd6, %rd7;
    st.global.u32 [%rd8], %r2;
    add.s32 %r6, %r6, %r7;
    bra LOOP;
DONE:
    ret;
}

.visible .entry spin_copy_u32(.param .u64 p_dst, .param .u64 p_src, .param .u32 p_n, .param .u64 p_ns)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p_dst];
    ld.param.u64 %rd9, [p_src];
    ld.param.u32 %r1, [p_n];
    ld.param.u64 %rd2, [p_ns];
    mov.u64 %rd3, %globaltimer;
SPIN:
    mov.u64 %rd4, %globaltimer;
    sub.s64 %rd5, %rd4, %rd3;
    setp.lt.u64 %p1, %rd5, %rd2;
    @%p1 bra SPIN;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    mov.u32 %r7, %nctaid.x;
    mul.lo.s32 %r7, %r7, %r4;
    cvta.to.global.u64 %rd6, %rd1;
    cvta.to.global.u64 %rd10, %rd9;
LOOP:
    setp.ge.u32 %p2, %r6, %r1;
    @%p2 bra DONE;
    mul.wide.u32 %rd7, %r6, 4;
    add.s64 %rd8, %rd6, %rd7;
    add.s64 %rd11, %rd10, %rd7;
    ld.global.u32 %r2, [%rd11];
    st.global.u32 [%rd8], %r2;
    add.s32 %r6, %r6, %r7;
    bra LOOP;
DONE:
    ret;
}
\x00"""

SPIN_SOURCE = r"""
__device__ void spin_for(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

extern "C" __global__ void spin_fill_u32(unsigned* out, unsigned n, unsigned value, unsigned long long ns) {
    spin_for(ns);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = value;
}

extern "C" __global__ void spin_copy_u32(unsigned* dst, const unsigned* src, unsigned n, unsigned long long ns) {
    spin_for(ns);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}
"""


def cupy_kernels():
    """(spin_fill_u32, spin_copy_u32) as CuPy RawKernels, compiled now (not at their first launch)."""
    import cupy

    fill = cupy.RawKernel(SPIN_SOURCE, "spin_fill_u32")
    copy = cupy.RawKernel(SPIN_SOURCE, "spin_copy_u32")
    fill.compile()
    copy.compile()
    return fill, copy


def fill_args(out, n: int, value: int, ns: int = SPIN_NS):
    """cuLaunchKernel's kernelParams for spin_fill_u32(out, n, value, ns): (values, ctypes types)."""
    return ((int(out), n, value, ns), (ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint64))


def copy_args(dst, src, n: int, ns: int = SPIN_NS):
    """cuLaunchKernel's kernelParams for spin_copy_u32(dst, src, n, ns): (values, ctypes types)."""
    return ((int(dst), int(src), n, ns), (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64))
