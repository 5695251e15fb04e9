"""Scenarios for the GPU tests of the shared child's clean-process check (ctxlab/harness/batch.py): each leaves
the process in a state the check must refuse, or in one it must accept."""

from ctxlab.cuda import driver as drv
from ctxlab.cuda.kernels import ProbeModule


def uses_the_primary(device: int) -> dict:
    """A library's way: the primary context retained, bound to this thread, and left so (active, current)."""
    drv.set_current(drv.primary_retain(device))
    ProbeModule.load().write_global(7)
    return {"observations": []}


def leaves_a_created_context_current(device: int) -> dict:
    """cuCtxCreate makes a context current on this thread; it is never popped."""
    drv.create_context(device)
    return {"observations": []}


def leaves_a_sticky_error(device: int) -> dict:
    """A kernel dereferences an address nothing mapped in the primary context: CUDA_ERROR_ILLEGAL_ADDRESS, which
    sticks to the context (every later call there returns it)."""
    ctx = drv.primary_retain(device)
    drv.push(ctx)
    out = drv.mem_alloc(8)
    ProbeModule.load().read_through(0xDEAD0000, out)
    try:
        drv.synchronize()
    except Exception:
        pass
    drv.pop()
    return {"observations": []}


def resets_the_primary(device: int) -> dict:
    """cuDevicePrimaryCtxReset under whatever came before: the primary context inactive again."""
    drv.primary_reset(device)
    return {"observations": []}
