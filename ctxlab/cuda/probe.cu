// The probe module of ctxlab's labs, built with NVRTC (ctxlab/cuda/kernels.py) and,
// for the native comparison, included by benchmarks/native_relay.cu: one kernel source for both.
__device__ long long probe_global = 0;

extern "C" __global__ void add_to_global(long long k) { probe_global += k; }

extern "C" __global__ void read_through(const long long* p, long long* out) { *out = *p; }

// One handoff in one launch (a single block): out[0] = the sum of a and out[1] = the
// global as the previous thread left them, then every element +1 and the global +k.
// out may be mapped host memory: the host reads it after the stream synchronises.
extern "C" __global__ void verify_and_update(long long* a, long long n, long long k, long long* out) {
    __shared__ long long part[1024];
    long long s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += a[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) { out[0] = part[0]; out[1] = probe_global; probe_global += k; }
    // every read above happened before the barriers: now change the array
    for (long long i = threadIdx.x; i < n; i += blockDim.x) a[i] += 1;
}

// Which SM ran each block: out[blockIdx.x] = %smid. Each block spins for `spin` clock cycles first, so
// blocks stay resident long enough for the launch to spread over every SM it may use.
extern "C" __global__ void record_smid(unsigned int* out, long long spin) {
    long long start = clock64();
    while (clock64() - start < spin) { }
    if (threadIdx.x == 0) {
        unsigned int id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        out[blockIdx.x] = id;
    }
}
