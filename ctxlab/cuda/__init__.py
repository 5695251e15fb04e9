"""The only package of ctxlab that calls CUDA (cuda.bindings, CuPy, CUPTI).

Modules here import the CUDA libraries inside functions, so that ``import
ctxlab`` and ``ctxlab --help`` work on a machine without CUDA.
"""

from ctxlab.cuda.errors import CudaError, NoGpu, check

__all__ = ["CudaError", "NoGpu", "check"]
