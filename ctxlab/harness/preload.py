"""Imported once by the forkserver: the heavy CUDA Python modules, without any
CUDA call, so every child starts with them loaded and CUDA untouched."""

try:  # absent on machines without CUDA: children then import what they need
    import cupy  # noqa: F401
    from cuda.bindings import driver, nvrtc, runtime  # noqa: F401
except Exception:
    pass
