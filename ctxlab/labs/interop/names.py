"""The names the interop lab and its area modules share: the libraries, their titles, the environment."""

from __future__ import annotations

LIBRARIES = ("cupy", "torch", "jax", "numba", "cuda-core")
TITLES = {"cupy": "CuPy", "torch": "PyTorch", "jax": "JAX", "numba": "Numba", "cuda-core": "cuda.core"}
DISTRIBUTIONS = {"torch": ("torch",), "jax": ("jax", "jaxlib"), "numba": ("numba-cuda", "numba"),
                 "cuda-core": ("cuda-core",)}
ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # before JAX loads: no preallocation of most of the GPU
CUDA_CORE = ("cuda.core, Device.set_current: 'Initializes CUDA and sets the calling thread to a valid CUDA context. "
             "By default the primary context is used' "
             "(https://nvidia.github.io/cuda-python/cuda-core/latest/generated/cuda.core.Device.html)")
NUMBA_DOC = ("Numba device management: select_device 'Create a new CUDA context for the selected device_id'; "
             "'Numba presently allows only one context per thread' "
             "(https://nvidia.github.io/numba-cuda/user/device-management.html); no documentation says which "
             "context current_context() uses; recorded as observed")
JAX_DOC = ("JAX GPU memory allocation: XLA_PYTHON_CLIENT_PREALLOCATE "
           "(https://docs.jax.dev/en/latest/gpu_memory_allocation.html); no documentation says which context "
           "JAX uses; recorded as observed")
