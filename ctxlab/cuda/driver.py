"""Small helpers over cuda.bindings.driver for what every lab needs.

Contexts are recorded as plain ints (the CUcontext handle) and by
``cuCtxGetId``, which stays unique for the life of the process even when a
handle value is reused after a context is destroyed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check, error_from
from ctxlab.cuda.outcome import outcome  # noqa: F401  (labs read outcomes through drv.outcome)

_module = None


def _driver():
    """cuda.bindings.driver, initialised; cached, since the helpers below sit in hot loops."""
    global _module
    if _module is None:
        _module = init_driver()
    return _module


def as_context(ctx):
    """A CUcontext from a handle int (or a CUcontext)."""
    driver = _driver()
    return ctx if isinstance(ctx, driver.CUcontext) else driver.CUcontext(ctx)


def as_device(dev):
    """A CUdevice from an ordinal (or a CUdevice)."""
    driver = _driver()
    return dev if isinstance(dev, driver.CUdevice) else driver.CUdevice(int(dev))


class ContextView(NamedTuple):
    """What a thread sees as its current context: handle 0 means none."""

    handle: int
    id: int | None

    @property
    def none(self) -> bool:
        """No context is current."""
        return self.handle == 0


def context_id(ctx) -> int | None:
    """cuCtxGetId: unique for the life of the process, even when a handle value is reused."""
    if int(ctx) == 0:
        return None
    return int(check(_driver().cuCtxGetId(as_context(ctx)), "cuCtxGetId"))


def current() -> ContextView:
    """The calling thread's current context: handle (0 for none) and id."""
    driver = _driver()
    err, ctx = driver.cuCtxGetCurrent()
    if int(err):
        raise error_from(err, "cuCtxGetCurrent")
    handle = int(ctx)
    if handle == 0:
        return ContextView(0, None)
    err, ident = driver.cuCtxGetId(ctx)
    # A handle left behind by a destroyed context has no id.
    return ContextView(handle, None if int(err) else int(ident))


def push(ctx) -> None:
    """cuCtxPushCurrent on the calling thread."""
    err, = _driver().cuCtxPushCurrent(as_context(ctx))
    if int(err):
        raise error_from(err, "cuCtxPushCurrent")


def pop() -> int:
    """cuCtxPopCurrent: the handle popped from the calling thread."""
    err, ctx = _driver().cuCtxPopCurrent()
    if int(err):
        raise error_from(err, "cuCtxPopCurrent")
    return int(ctx)


def set_current(ctx) -> None:
    """cuCtxSetCurrent (0 unbinds)."""
    check(_driver().cuCtxSetCurrent(as_context(ctx)), "cuCtxSetCurrent")


def synchronize() -> None:
    """cuCtxSynchronize on the current context."""
    check(_driver().cuCtxSynchronize(), "cuCtxSynchronize")


def create_context(dev, flags: int = 0) -> int:
    """A plain context made with cuCtxCreate; it becomes current on this thread."""
    driver = _driver()
    try:  # cuda-bindings 13: cuCtxCreate(CUctxCreateParams | None, flags, dev)
        result = driver.cuCtxCreate(None, flags, as_device(dev))
    except TypeError:  # cuda-bindings 12: cuCtxCreate(flags, dev)
        result = driver.cuCtxCreate(flags, as_device(dev))
    return int(check(result, "cuCtxCreate"))


def destroy_context(ctx) -> None:
    """cuCtxDestroy."""
    check(_driver().cuCtxDestroy(as_context(ctx)), "cuCtxDestroy")


def primary_retain(dev) -> int:
    """cuDevicePrimaryCtxRetain: the primary context's handle (created if inactive)."""
    return int(check(_driver().cuDevicePrimaryCtxRetain(as_device(dev)), "cuDevicePrimaryCtxRetain"))


def primary_release(dev) -> None:
    """cuDevicePrimaryCtxRelease."""
    check(_driver().cuDevicePrimaryCtxRelease(as_device(dev)), "cuDevicePrimaryCtxRelease")


def primary_reset(dev) -> None:
    """cuDevicePrimaryCtxReset."""
    check(_driver().cuDevicePrimaryCtxReset(as_device(dev)), "cuDevicePrimaryCtxReset")


def primary_set_flags(dev, flags: int) -> None:
    """cuDevicePrimaryCtxSetFlags."""
    check(_driver().cuDevicePrimaryCtxSetFlags(as_device(dev), flags), "cuDevicePrimaryCtxSetFlags")


@dataclass(frozen=True)
class PrimaryState:
    """What cuDevicePrimaryCtxGetState reports: active, and the flags."""
    active: bool
    flags: int


def primary_state(dev) -> PrimaryState:
    """cuDevicePrimaryCtxGetState, which never creates the context."""
    flags, active = check(_driver().cuDevicePrimaryCtxGetState(as_device(dev)), "cuDevicePrimaryCtxGetState")
    return PrimaryState(bool(active), int(flags))


def pointer_context(ptr: int) -> int:
    """CU_POINTER_ATTRIBUTE_CONTEXT: the context an allocation belongs to."""
    driver = _driver()
    err, ctx = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT, ptr)
    if int(err):
        raise error_from(err, "cuPointerGetAttribute(CONTEXT)")
    return int(ctx)


def pointer_device(ptr: int) -> int:
    """CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL of an allocation."""
    driver = _driver()
    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(check(driver.cuPointerGetAttribute(attr, int(ptr)), "cuPointerGetAttribute(DEVICE_ORDINAL)"))


def stream_context(stream) -> int:
    """The context of a stream (an int handle or a CUstream)."""
    driver = _driver()
    err, ctx = driver.cuStreamGetCtx(stream if isinstance(stream, driver.CUstream) else driver.CUstream(int(stream)))
    if int(err):
        raise error_from(err, "cuStreamGetCtx")
    return int(ctx)


def stream_create() -> int:
    """cuStreamCreate in the current context (non-blocking): its handle."""
    driver = _driver()
    flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
    return int(check(driver.cuStreamCreate(flags), "cuStreamCreate"))


def host_alloc_mapped(nbytes: int) -> int:
    """Pinned host memory the GPU writes to directly (with unified addressing, same address on both sides)."""
    driver = _driver()
    return int(check(driver.cuMemHostAlloc(nbytes, driver.CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc"))


def mem_alloc(nbytes: int) -> int:
    """cuMemAlloc in the current context."""
    return int(check(_driver().cuMemAlloc(nbytes), "cuMemAlloc"))


def mem_get_info() -> tuple[int, int]:
    """cuMemGetInfo: (free, total) bytes of the current context's device."""
    free, total = check(_driver().cuMemGetInfo(), "cuMemGetInfo")
    return int(free), int(total)


def copy_to_device(ptr: int, data: bytes) -> None:
    """cuMemcpyHtoD of ``data`` to ``ptr``."""
    check(_driver().cuMemcpyHtoD(int(ptr), data, len(data)), "cuMemcpyHtoD")


def copy_from_device(ptr: int, nbytes: int) -> bytes:
    """cuMemcpyDtoH of ``nbytes`` from ``ptr``."""
    buf = bytearray(nbytes)
    check(_driver().cuMemcpyDtoH(buf, int(ptr), nbytes), "cuMemcpyDtoH")
    return bytes(buf)


def raw_status(result, call: str) -> str:
    """The NAME of a raw result's status, success included (for recording deprecated calls)."""
    status = result[0] if isinstance(result, tuple) else result
    if int(status) == 0:
        return status.name
    return error_from(status, call).name
