"""The libraries in interop's children, one helper each for every scenario of the lab: whether a library is there
(and its version), starting it on a device, its use from a fresh thread, one array per library with a known sum,
which context a pointer or the thread belongs to, and the child-result protocol of the scenarios that run a plain
interpreter of their own."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import cupy_distribution, package_version
from ctxlab.cuda.outcome import attempt, checked
from ctxlab.labs.common import context_state
from ctxlab.labs.interop.names import DISTRIBUTIONS
from ctxlab.labs.interop.under_claims import IOTA, SUM, N, which
from ctxlab.records import skips
from ctxlab.records.skips import Skip


class Missing(Exception):
    """A library this scenario needs is not installed, does not import, or has no GPU backend: the scenario records
    why, ``skip`` (a library skip of ``ctxlab.records.skips``: whether it is installed, and its error)."""

    def __init__(self, skip: Skip):
        super().__init__(skip["why"])
        self.skip = skip


def distributions_of(lib: str) -> tuple[str, ...]:
    """The package distributions a library may be installed as (what ``version_of`` looks for)."""
    return ("cupy-cuda13x", "cupy-cuda12x", "cupy") if lib == "cupy" else DISTRIBUTIONS[lib]


def missing(lib: str, error: str, why: str | None = None) -> Missing:
    """A library that is there by its package metadata but failed with ``error`` (``why``: the sentence, where
    it is not "could not be imported")."""
    return Missing(skips.library(lib, distributions_of(lib), installed=True, error=error, why=why))


def version_of(lib: str) -> str | None:
    """The installed version of a library (its distribution's), or None."""
    names = (cupy_distribution() or "cupy",) if lib == "cupy" else DISTRIBUTIONS[lib]
    for name in names:
        found = package_version(name)
        if found:
            return found
    return None


def require(lib: str) -> Any:
    """Import a library (lazily); Missing with why when it is absent."""
    module = {"cupy": "cupy", "torch": "torch", "jax": "jax", "numba": "numba.cuda", "cuda-core": "cuda.core"}[lib]
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        if version_of(lib) is None:
            raise Missing(skips.library(lib, distributions_of(lib), installed=False, error=str(exc))) from None
        raise missing(lib, str(exc)) from None
    if lib == "torch" and not found.cuda.is_available():
        why = "torch has no CUDA device (a CPU-only build, or no driver)"
        raise missing(lib, "torch.cuda.is_available() is False", why)
    return found  # JAX's GPU backend is looked for in init_library: looking starts its client, which creates a context


def cuda_core_device() -> Any:
    """cuda.core's Device class, from where this version of cuda.core keeps it."""
    try:
        from cuda.core import Device
    except ImportError:
        from cuda.core.experimental import Device
    return Device


def as_int(handle: Any) -> int | None:
    """A handle (an int, a cuda.bindings object or a library's pointer) as an int, or None."""
    if handle is None:
        return None
    try:
        return int(handle)
    except TypeError:
        return int(getattr(handle, "value", 0) or 0)


def init_library(lib: str, device: int) -> dict:
    """The library's own way to start on ``device`` and make a first allocation: {pointer, keep, reported}."""
    if lib == "cupy":
        import cupy

        cupy.cuda.Device(device).use()
        a = cupy.arange(16, dtype=cupy.int32)
        cupy.cuda.Device(device).synchronize()
        return {"pointer": a.data.ptr, "keep": a, "call": "cupy.cuda.Device(d).use(); cupy.arange"}
    if lib == "torch":
        import torch

        torch.cuda.set_device(device)
        t = torch.arange(16, dtype=torch.int32, device=f"cuda:{device}")
        torch.cuda.synchronize(device)
        return {"pointer": t.data_ptr(), "keep": t, "call": "torch.cuda.set_device(d); torch.arange(device='cuda')"}
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        try:
            dev = jax.devices("gpu")[device]
        except RuntimeError as exc:
            raise missing("jax", str(exc), f"jax has no GPU backend ({str(exc).splitlines()[0]})") from None
        x = jax.device_put(jnp.arange(16, dtype=jnp.int32), dev)
        x.block_until_ready()
        return {"pointer": x.unsafe_buffer_pointer(), "keep": x, "call": "jax.device_put(jnp.arange, gpu)"}
    if lib == "numba":
        import numpy
        from numba import cuda

        ctx = cuda.current_context(device)
        arr = cuda.device_array(16, dtype=numpy.int32)
        return {"pointer": arr.__cuda_array_interface__["data"][0], "keep": arr, "reported": as_int(ctx.handle),
                "call": "numba.cuda.current_context(d); numba.cuda.device_array"}
    Device = cuda_core_device()
    dev = Device(device)
    dev.set_current()
    buf = dev.allocate(64, stream=dev.default_stream)
    dev.sync()
    return {"pointer": as_int(buf.handle), "keep": buf,
            "call": "Device(d).set_current(); Device.allocate(stream=default_stream)"}


def thread_use(lib: str, device: int, out: dict) -> Any:
    """A fresh thread's first use of the library: returns the allocation made (kept alive by the caller)."""
    if lib == "cupy":
        import cupy

        a = cupy.arange(10, dtype=cupy.int64) + 1
        out["call"], out["pointer"], out["outcome"] = "cupy.arange(10) + 1, sum", a.data.ptr, str(int(a.sum()))
        return a
    if lib == "torch":
        import torch

        t = torch.ones(10, dtype=torch.int64, device=f"cuda:{device}")
        out["call"], out["pointer"] = "torch.ones(10, device='cuda:d'), sum", t.data_ptr()
        out["outcome"] = str(int(t.sum().item()))
        return t
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        x = jax.device_put(jnp.ones(10, dtype=jnp.int32), jax.devices("gpu")[device]) + 1
        out["call"], out["pointer"], out["outcome"] = "jnp.ones(10) + 1 on the GPU, sum", x.unsafe_buffer_pointer(), \
            str(int(jnp.sum(x)))
        return x
    if lib == "numba":
        import numpy
        from numba import cuda

        cuda.current_context(device)
        arr = cuda.device_array(10, dtype=numpy.int32)
        out["call"], out["pointer"], out["outcome"] = ("numba.cuda.current_context(d); device_array(10)",
                                                       arr.__cuda_array_interface__["data"][0], "ok")
        return arr

    dev = cuda_core_device()(device)
    out["before_set_current"] = attempt(lambda: as_int(dev.allocate(64, stream=dev.default_stream).handle)
                                        and "allocated")
    dev.set_current()
    buf = dev.allocate(64, stream=dev.default_stream)
    out["call"], out["pointer"], out["outcome"] = "Device(d).allocate before and after set_current()", \
        as_int(buf.handle), "ok"
    return buf


def primary_of(device: int) -> tuple[int | None, int | None]:
    """The primary context's handle and id while it is active (a balanced retain/release reads it)."""
    handle = context_state(device)["primary"]
    return handle, (drv.outcome(drv.context_id, handle).get("value") if handle else None)


def owner_context(pointer: int | None) -> int | None:
    """The cuCtxGetId of the context that owns ``pointer`` (CU_POINTER_ATTRIBUTE_CONTEXT), or None."""
    if not pointer:
        return None
    found = drv.outcome(drv.pointer_context, pointer)
    return found["value"] if found["ok"] else None


# ---------------------------------------------------------------- one array per library

@dataclass
class Made:
    """An array of 1..N made by one library: what keeps it alive, its pointer, and how the library reads it."""

    keep: Any
    pointer: int | None
    call: str
    read: Callable[[], int]  # the sum, computed by the library (a kernel) or copied back
    kernel: Callable[[], str]  # the library's own kernel over the array: ``correct``, an error, or a wrong value


def _checked_read(read: Callable[[], int]) -> Callable[[], str]:
    return lambda: checked(read, SUM)


def _cuda_core_kernel(dev: Any, buf: Any, pointer: int) -> Callable[[], str]:
    """cuda.core's Program (NVRTC) -> cubin, and launch on a stream of the device: fills 1..N, then reads back."""

    def run() -> int:
        import numpy

        try:
            from cuda.core import LaunchConfig, Program, launch
        except ImportError:
            from cuda.core.experimental import LaunchConfig, Program, launch
        kernel = Program(IOTA, code_type="c++").compile("cubin").get_kernel("ctxlab_iota")
        stream = dev.create_stream()
        launch(stream, LaunchConfig(grid=(N + 255) // 256, block=256), kernel, buf, numpy.int32(N))
        stream.sync()
        return _device_sum(pointer)

    return lambda: checked(run, SUM)


def _device_sum(pointer: int) -> int:
    import numpy

    return int(numpy.frombuffer(drv.copy_from_device(pointer, 8 * N), dtype=numpy.int64).sum())


def _numba_kernel(array: Any) -> Callable[[], str]:
    """A Numba kernel writing 1..N, then the array read back (numba-cuda must be able to compile here)."""

    def run() -> int:
        from numba import cuda

        @cuda.jit
        def iota(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = i + 1

        iota[(N + 255) // 256, 256](array)
        cuda.synchronize()
        return int(array.copy_to_host().sum())

    return lambda: checked(run, SUM)


def make(lib: str, device: int) -> Made:
    """``lib``'s array of 1..N on ``device``, made the library's own way, with no device selection first (the
    context current on the thread is the one under test). cuda.core needs ``Device.set_current()``."""
    import numpy

    if lib == "cupy":
        import cupy

        a = cupy.arange(1, N + 1, dtype=cupy.int64)
        return Made(a, a.data.ptr, "cupy.arange; sum", lambda: int(a.sum()), _checked_read(lambda: int(a.sum())))
    if lib == "torch":
        import torch

        t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
        return Made(t, t.data_ptr(), "torch.arange(device='cuda:d'); sum", lambda: int(t.sum().item()),
                    _checked_read(lambda: int(t.sum().item())))
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        try:
            dev = jax.devices("gpu")[device]
        except RuntimeError as exc:
            raise missing("jax", str(exc), f"jax has no GPU backend ({str(exc).splitlines()[0]})") from None
        x = jax.device_put(jnp.arange(1, N + 1, dtype=jnp.int32), dev)
        x.block_until_ready()
        return Made(x, x.unsafe_buffer_pointer(), "jax.device_put(jnp.arange, gpu); jnp.sum",
                    lambda: int(jnp.sum(x)), _checked_read(lambda: int(jnp.sum(x))))
    if lib == "numba":
        from numba import cuda

        d = cuda.to_device(numpy.arange(1, N + 1, dtype=numpy.int64))
        return Made(d, d.__cuda_array_interface__["data"][0], "numba.cuda.to_device; copy_to_host",
                    lambda: int(d.copy_to_host().sum()), _numba_kernel(d))

    dev = cuda_core_device()(device)
    dev.set_current()
    buf = dev.allocate(8 * N, stream=dev.default_stream)
    dev.sync()
    pointer = as_int(buf.handle) or 0
    drv.copy_to_device(pointer, numpy.arange(1, N + 1, dtype=numpy.int64).tobytes())
    return Made(buf, pointer, "Device(d).set_current(); Device.allocate, filled by cuMemcpyHtoD",
                lambda: _device_sum(pointer), _cuda_core_kernel(dev, buf, pointer))


# ---------------------------------------------------------------- under a created or green context

def _current_id() -> int | None:
    found = drv.outcome(drv.current)
    return found["value"].id if found["ok"] else None


def owner_of(pointer: int | None, ids: dict[str, int | None]) -> str:
    """What CU_POINTER_ATTRIBUTE_CONTEXT reports for ``pointer``: a context named by ``which``, ``none`` (NULL),
    or the error's name."""
    if not pointer:
        return "none (no pointer)"
    found = drv.outcome(drv.pointer_context, pointer)
    if not found["ok"]:
        return found["status"]
    if not found["value"]:
        return "none"
    return which(drv.outcome(drv.context_id, found["value"]).get("value"), ids)


RESULT = "CTXLAB-RESULT "  # the one line of JSON a plain interpreter of run_main prints


def run_main(main: Callable[[int], Any], device: int, timeout: float = 150) -> tuple[Any, str | None]:
    """The child-result protocol of the scenarios that need a plain (non-daemon) interpreter of their own:
    ``main(device)`` runs there and prints its value as one ``CTXLAB-RESULT`` line of JSON. ``(value, None)``, or
    ``(None, what went wrong)`` when no such line came (the exit status and the tail of its standard error, or the
    time limit)."""
    code = (f"import json, sys; from {main.__module__} import {main.__name__}; "
            f"print({RESULT!r} + json.dumps({main.__name__}(int(sys.argv[1]))))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(device)], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"the parent did not finish within {timeout:g} s"
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith(RESULT)), None)
    if line is None:
        return None, f"exit status {done.returncode}: {done.stderr[-500:]}"
    return json.loads(line[len(RESULT):]), None
