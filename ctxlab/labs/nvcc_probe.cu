// The modules lab builds this with `nvcc --keep` into a shared library, to show
// what nvcc inserts on the host side (the registration stub) and what loading
// the library and launching its kernel do to contexts.
#include <cuda_runtime.h>

__device__ int tiny_global = 5;

__global__ void tiny_kernel(int* out) { *out = tiny_global * 7; }

extern "C" int tiny_run(int* host_out) {
    int* d = nullptr;
    cudaError_t err = cudaMalloc(&d, sizeof(int));
    if (err != cudaSuccess) return (int)err;
    tiny_kernel<<<1, 1>>>(d);
    err = cudaMemcpy(host_out, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    return (int)err;
}

extern "C" int tiny_device(void) {
    int d = -1;
    cudaGetDevice(&d);
    return d;
}

extern "C" int tiny_runtime_version(void) {
    int v = 0;
    cudaRuntimeGetVersion(&v);
    return v;
}
