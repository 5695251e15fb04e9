#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wcast-qual"
#define __NV_CUBIN_HANDLE_STORAGE__ static
#if !defined(__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__)
#define __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#endif
#include "crt/host_runtime.h"
#include "nvcc_probe.fatbin.c"
extern __attribute__((visibility("hidden"))) void __device_stub__Z11tiny_kernelPi(int *);
static void __nv_cudaEntityRegisterCallback(void **);
static void __sti____cudaRegisterAll(void) __attribute__((__constructor__));
__attribute__((visibility("hidden"))) void __device_stub__Z11tiny_kernelPi(int *__par0){__cudaLaunchPrologue(1);__cudaSetupArgSimple(__par0, 0UL);__cudaLaunch(((char *)((void ( *)(int *))tiny_kernel)), 0U);}
# 8 "/tmp/ctxlab-nvcc-1k55_7hq/nvcc_probe.cu"
void tiny_kernel( int *__cuda_0)
# 8 "/tmp/ctxlab-nvcc-1k55_7hq/nvcc_probe.cu"
{__device_stub__Z11tiny_kernelPi( __cuda_0); }
# 1 "/tmp/ctxlab-nvcc-1k55_7hq/nvcc_probe.cudafe1.stub.c"
static void __nv_cudaEntityRegisterCallback( void **__T4) {  __nv_dummy_param_ref(__T4); __nv_save_fatbinhandle_for_managed_rt(__T4); __cudaRegisterEntry(__T4, ((void ( *)(int *))tiny_kernel), _Z11tiny_kernelPi, (-1)); __cudaRegisterVariable(__T4, __shadow_var(tiny_global,::tiny_global), 0, 4UL, 0, 0); }
static void __sti____cudaRegisterAll(void) {  __cudaRegisterBinary(__nv_cudaEntityRegisterCallback);  }

#pragma GCC diagnostic pop
