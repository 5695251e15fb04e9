"""The probe module: CUDA C built once per process with NVRTC, loaded per context.

It holds a ``__device__`` global and kernels that change it and that read
through a pointer, so labs can see which context's copy of the global they
touch and whether memory of another context can be dereferenced.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import CudaError, check


def probe_source() -> str:
    """The probe's CUDA C (package data ``probe.cu``, also compiled into the native relay benchmark)."""
    from importlib.resources import files

    return files("ctxlab.cuda").joinpath("probe.cu").read_text()


VERIFY_THREADS = 1024  # verify_and_update runs as one block of this size

_cubins: dict[tuple[str, int, int], bytes] = {}
_lock = threading.Lock()


def compile_cubin(source: str, name: str, major: int, minor: int) -> bytes:
    """NVRTC -> cubin for this GPU's architecture (a cubin needs no PTX JIT, so
    a newer NVRTC than the driver still works)."""
    from cuda.bindings import nvrtc

    key = (source, major, minor)
    with _lock:
        if key in _cubins:
            return _cubins[key]
        cached = _disk_cache(source, major, minor)
        if cached.exists():  # every lab child would otherwise pay NVRTC again
            _cubins[key] = cached.read_bytes()
            return _cubins[key]
        prog = check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
        try:
            options = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"-std=c++17"]
            status = nvrtc.nvrtcCompileProgram(prog, len(options), options)
            if int(status[0]) != 0:
                size = check(nvrtc.nvrtcGetProgramLogSize(prog))
                log = b" " * size
                check(nvrtc.nvrtcGetProgramLog(prog, log))
                raise CudaError(status[0].name, int(status[0]), log.decode(errors="replace").strip(),
                                "nvrtcCompileProgram")
            size = check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            cubin = b" " * size
            check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        finally:
            nvrtc.nvrtcDestroyProgram(prog)
        _cubins[key] = cubin
        _store(cached, cubin)
        return cubin


def _disk_cache(source: str, major: int, minor: int):
    import hashlib
    import os
    from pathlib import Path

    from cuda.bindings import nvrtc

    version = check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    digest = hashlib.sha256(f"{version}|sm_{major}{minor}|{source}".encode()).hexdigest()[:32]
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = Path(os.environ.get("CTXLAB_CACHE") or cache_home / "ctxlab")
    return base / f"{digest}.cubin"


def _store(path, data: bytes) -> None:
    """Write the cache entry atomically; a cache that cannot be written is no error."""
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


def _arch_of_current_context() -> tuple[int, int]:
    driver = init_driver()
    dev = check(driver.cuCtxGetDevice(), "cuCtxGetDevice")
    attr = driver.CUdevice_attribute
    major = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    return int(major), int(minor)


@dataclass
class ProbeModule:
    """The probe module as loaded into one context."""

    context: int
    module: Any  # CUmodule / CUfunction handles of cuda.bindings: int() gives the handle
    global_address: int
    global_size: int
    add_fn: Any
    read_fn: Any

    @classmethod
    def load(cls) -> ProbeModule:
        """Build (once per process) and load into the context current on this thread."""
        driver = init_driver()
        ctx = drv.current()
        if ctx.none:
            raise CudaError("CUDA_ERROR_INVALID_CONTEXT", 201, "no context is current on this thread",
                            "ProbeModule.load")
        cubin = compile_cubin(probe_source(), "ctxlab_probe.cu", *_arch_of_current_context())
        module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
        address, size = check(driver.cuModuleGetGlobal(module, b"probe_global"), "cuModuleGetGlobal")
        add_fn = check(driver.cuModuleGetFunction(module, b"add_to_global"), "cuModuleGetFunction")
        read_fn = check(driver.cuModuleGetFunction(module, b"read_through"), "cuModuleGetFunction")
        return cls(ctx.handle, module, int(address), int(size), add_fn, read_fn)

    def function(self, name: str):
        """A kernel of the probe module, as a CUfunction of this context."""
        return check(init_driver().cuModuleGetFunction(self.module, name.encode()), "cuModuleGetFunction")

    def packed(self, name: str, args: list[tuple[int, type]], grid: int, block: int) -> PackedLaunch:
        """A launch of kernel ``name`` whose arguments are packed once, for hot loops."""
        return PackedLaunch(self.function(name), args, grid, block, f"cuLaunchKernel({name})")

    def read_global(self) -> int:
        """The probe's ``__device__`` global, read from the device."""
        return struct.unpack("<q", drv.copy_from_device(self.global_address, 8))[0]

    def write_global(self, value: int) -> None:
        """Write the probe's ``__device__`` global."""
        drv.copy_to_device(self.global_address, struct.pack("<q", value))

    def add_to_global(self, k: int, stream: int = 0) -> None:
        """Launch ``add_to_global<<<1,1,0,stream>>>(k)`` in the current context."""
        self._launch(self.add_fn, ((k,), (ctypes.c_longlong,)), stream, "cuLaunchKernel(add_to_global)")

    def read_through(self, src: int, out: int, stream: int = 0) -> None:
        """Launch ``read_through<<<1,1>>>(src, out)``: ``*out = *src`` on the device."""
        self._launch(self.read_fn, ((src, out), (ctypes.c_void_p, ctypes.c_void_p)), stream,
                     "cuLaunchKernel(read_through)")

    def _launch(self, fn, args, stream: int, call: str) -> None:
        driver = init_driver()
        check(driver.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(int(stream)), args, 0), call)


class PackedLaunch:
    """Kernel arguments laid out once as the ``void**`` cuLaunchKernel takes, so a
    launch in a hot loop costs the driver call and nothing more."""

    def __init__(self, fn, args: list[tuple[int, type]], grid: int, block: int, call: str):
        self._values = [ctype(value) for value, ctype in args]  # kept alive: the driver reads them
        self._pointers = (ctypes.c_void_p * len(args))(*(ctypes.addressof(v) for v in self._values))
        self._params = ctypes.addressof(self._pointers)
        self.fn, self.grid, self.block, self.call = fn, grid, block, call
        self._driver = init_driver()

    def __call__(self, stream) -> None:
        """Launch the kernel with its packed arguments on ``stream``."""
        status = self._driver.cuLaunchKernel(self.fn, self.grid, 1, 1, self.block, 1, 1, 0, stream,
                                             self._params, 0)
        if int(status[0]) != 0:
            check(status, self.call)
