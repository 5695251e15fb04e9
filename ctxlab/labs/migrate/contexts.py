"""What migrate's scenarios share in a child: making a context of each kind, allocations through CuPy and the
driver, and a fresh CuPy kernel with its right answer."""

from __future__ import annotations

from ctxlab.cuda import driver as drv
from ctxlab.labs.migrate.claims import GREEN


def make_context(kind: str, device: int, green=None) -> int:
    """Make a context of the kind current on this thread (a green one: push ``green``'s CUcontext); its handle."""
    import cupy

    if kind == GREEN:
        drv.push(green.handle)
        return green.handle
    if kind == "primary":
        cupy.cuda.runtime.setDevice(device)  # the runtime binds the primary context (CUDA 12+)
        cupy.cuda.runtime.free(0)
        return drv.current().handle
    return drv.create_context(device)


def cupy_alloc(rec, step, make, label):
    """Make a CuPy array, recording the context current before and after and the one that owns it."""
    before = drv.current()
    array = make()
    after = drv.current()
    owner = drv.pointer_context(array.data.ptr)
    rec.add(step, "cupy allocation", {"array": label, "pointer": array.data.ptr, "pointer_context": owner,
                                      "pointer_context_id": drv.context_id(owner),
                                      "current_before": before.handle, "current_after": after.handle,
                                      "current_before_id": before.id, "current_after_id": after.id})
    return array


def driver_alloc(rec, step):
    """cuMemAlloc in the current context: the clean test of CU_POINTER_ATTRIBUTE_CONTEXT."""
    cur = drv.current()
    ptr = drv.mem_alloc(256)
    owner = drv.pointer_context(ptr)
    rec.add(step, "allocation context", {"pointer": ptr, "pointer_context": owner, "current_context": cur.handle,
                                         "device": drv.pointer_device(ptr)})
    return ptr


# The same reduction CuPy compiles into a kernel of its own; its right answer, computed on the host.
FRESH_KERNEL_SUM = round(sum((i * 3.5 + 1.25) ** 0.5 for i in range(64)), 3)


def fresh_kernel() -> float:
    """A CuPy kernel no other step of the scenario uses: it is compiled and cached where it first runs."""
    import cupy

    a = cupy.arange(64, dtype=cupy.float64)
    return round(float(cupy.sqrt(a * 3.5 + 1.25).sum()), 3)
