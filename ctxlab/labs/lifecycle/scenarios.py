"""lifecycle's scenarios, each run in a child process, and the lab's list of them for given options."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda import green as greens
from ctxlab.cuda.environment import init_driver, package_version, runtime_versions
from ctxlab.cuda.errors import check
from ctxlab.cuda.outcome import checked, outcome
from ctxlab.harness.recorder import Recorder
from ctxlab.harness.threads import Choreography, Step
from ctxlab.lab import Isolation, LabOptions, Scenario
from ctxlab.labs.common import StepRecorder, context_state, green_or_skip, record_skip
from ctxlab.records import skips
from ctxlab.tracing.calls import summarize
from ctxlab.tracing.tracer import start_for_child


def _state(device: int) -> Callable[[list], dict]:
    """A probe for ``StepRecorder``: the thread's current context and ``device``'s primary context state."""

    def probe(events: list) -> dict:
        st = context_state(device)
        return {"current": st["current"], "current_id": st["current_id"], "device": device,
                "primary_active": st["active"], "primary_flags": st["flags"], "primary": st["primary"]}

    return probe


def _calls(scenario: str, device: int, rec: Recorder | None = None) -> StepRecorder:
    """The step recorder of a scenario: after each call, the state of ``device``.

    Pass ``rec`` to record into another recorder's observations with a different
    device (a call that used the runtime's current device rather than the lab's).
    """

    return StepRecorder(scenario, "after", _state(device), label="call", rec=rec)


def _runtime_status(fn, *args: Any, call: str) -> str:
    """The status a cuda.bindings runtime call returned, by name (``cudaSuccess`` included)."""
    done = outcome(lambda: check(fn(*args), call), call=call)
    return "cudaSuccess" if done["ok"] else done["status"]


def first_context(device: int) -> dict:
    """In a new interpreter: import cupy, cuInit, device count and properties, cudaSetDevice, cudaMalloc,
    first kernel."""
    tracer = start_for_child()  # before the import, so the import is watched too
    already = "cupy" in sys.modules  # a forkserver child would have it: then the import below watches nothing
    import cupy

    import_events = tracer.drain() if tracer else []
    init_driver()  # the state can only be read after cuInit, which creates no context
    init_events = tracer.drain() if tracer else []
    s = _calls("first-context", device)
    s.after("import cupy", events=summarize(import_events, context_only=False),
            driver_calls=len(import_events) if tracer else None, cupy_already_imported=already)
    s.after("cuInit", events=summarize(init_events, context_only=False))
    cupy.cuda.runtime.getDeviceCount()
    s.after("cudaGetDeviceCount")
    cupy.cuda.runtime.getDeviceProperties(device)
    s.after("cudaGetDeviceProperties")
    cupy.cuda.runtime.setDevice(device)
    s.after("cudaSetDevice")
    ptr = cupy.cuda.runtime.malloc(1 << 20)
    s.after("cudaMalloc")
    total = int((cupy.arange(100) * 2).sum())
    s.after("first kernel launch", result=total)
    cupy.cuda.runtime.free(ptr)
    return s.output()


def free0(device: int) -> dict:
    """cudaFree(0) as the first call, then a CuPy allocation."""
    import cupy

    s = _calls("free0", device)
    s.after("start")
    cupy.cuda.runtime.free(0)
    # Without cudaSetDevice the runtime uses the thread's default device, whatever the lab's device is.
    _calls("free0", cupy.cuda.runtime.getDevice(), rec=s.rec).after("cudaFree(0)")
    a = cupy.arange(10)
    s.after("CuPy allocation", pointer_context=drv.pointer_context(a.data.ptr))
    return s.output()


def init_device(device: int) -> dict:
    """cudaInitDevice, then cudaSetDevice (CUDA 12.0+; skipped, with why, on an older runtime)."""
    from cuda.bindings import runtime

    s = _calls("init-device", device)
    if not hasattr(runtime, "cudaInitDevice"):
        record_skip(s.rec, skips.unsupported("cudaInitDevice is not in this runtime (CUDA 12.0+ only)"))
        return s.output()
    s.after("start")
    status = _runtime_status(runtime.cudaInitDevice, device, 0, 0, call="cudaInitDevice")
    s.after("cudaInitDevice", status=status, runtime="cuda.bindings")
    runtime.cudaSetDevice(device)
    s.after("cudaSetDevice")
    return s.output()


def created_first(device: int) -> dict:
    """A cuCtxCreate context current before any runtime call: cudaMalloc through CuPy, then a CuPy kernel."""
    import cupy

    s = _calls("created-first", device)
    created = drv.create_context(device)
    s.after("cuCtxCreate")
    ptr = cupy.cuda.runtime.malloc(1 << 20)
    malloc = s.after("cudaMalloc (CuPy)")
    before = drv.current()
    total = int((cupy.arange(100) * 2).sum())
    kernel = s.after("first CuPy kernel", result=total)
    s.rec.add("summary", "runtime under a created context",
              {"allocation_context": drv.pointer_context(ptr), "created": created,
               "primary_active_after_malloc": malloc["primary_active"],
               "current_id_before_kernel": before.id, "current_id_after_kernel": kernel["current_id"],
               "primary_active_after_kernel": kernel["primary_active"]})
    return s.output()


def handle(device: int) -> dict:
    """The runtime's context handle through cuCtxGetCurrent and cuDevicePrimaryCtxRetain; driver memory read by CuPy."""
    import cupy
    import numpy

    s = _calls("handle", device)
    cupy.cuda.runtime.setDevice(device)
    after = s.after("cudaSetDevice")
    primary = drv.primary_retain(device)
    ptr = drv.mem_alloc(8 * 16)
    values = numpy.arange(16, dtype=numpy.int64) * 11 + 5
    drv.copy_to_device(ptr, values.tobytes())
    memory = cupy.cuda.UnownedMemory(ptr, 8 * 16, owner=None)
    seen = cupy.ndarray((16,), dtype=cupy.int64, memptr=cupy.cuda.MemoryPointer(memory, 0)).get()
    s.rec.add("driver", "handle", {"current": after["current"], "primary_retain": primary,
                                   "current_is_primary": after["current"] == primary,
                                   "driver_wrote": values.tolist(), "cupy_read": seen.tolist(),
                                   "pointer_context": drv.pointer_context(ptr)})
    drv.primary_release(device)
    return s.output()


def threads(device: int) -> dict:
    """The main thread chooses the device; a new thread makes a driver call, then its first runtime call."""
    import cupy

    s = _calls("threads", device)
    seen: dict = {}

    def main_thread(_):
        cupy.cuda.runtime.setDevice(device)
        cur = drv.current()
        seen["main"] = (cur.handle, cur.id)
        s.after("main: cudaSetDevice")

    def new_thread(_):
        start = drv.current().handle
        status = drv.outcome(drv.synchronize)["status"]  # a driver call that needs a context
        s.after("new thread: cuCtxSynchronize", status=status)
        ptr = cupy.cuda.runtime.malloc(256)
        cur = drv.current()
        runtime_device = cupy.cuda.runtime.getDevice()  # per thread: this one never chose a device
        bound = _calls("threads", runtime_device, rec=s.rec).after("new thread: cudaMalloc")
        s.rec.add("summary", "new thread", {"current_at_start": start, "driver_call": status, "bound": cur.handle,
                                            "runtime_device": runtime_device, "main_device": device,
                                            "bound_primary_of_its_device": cur.handle == bound["primary"],
                                            "same_as_main_thread": (cur.handle, cur.id) == seen["main"]})
        cupy.cuda.runtime.free(ptr)

    Choreography(["main", "new"], timeout=60).run([Step("main", "init", main_thread),
                                                   Step("new", "first call", new_thread)])
    return s.output()


def flags(device: int) -> dict:
    """cudaSetDeviceFlags as the first call; then, on the active primary context, cudaSetDeviceFlags and
    cuDevicePrimaryCtxSetFlags."""
    from cuda.bindings import runtime

    s = _calls("flags", device)
    before = s.after("start")
    status_first = _runtime_status(runtime.cudaSetDeviceFlags, runtime.cudaDeviceScheduleBlockingSync,
                                   call="cudaSetDeviceFlags")
    # With no device chosen the runtime initialises a default device: read the state of that one.
    chosen = outcome(lambda: check(runtime.cudaGetDevice(), "cudaGetDevice"))
    first_device = chosen["value"] if chosen["ok"] else device
    first = _calls("flags", first_device, rec=s.rec).after("cudaSetDeviceFlags(BlockingSync) as the first call",
                                                           status=status_first)
    runtime.cudaSetDevice(device)
    runtime.cudaFree(0)
    active = s.after("cudaFree(0)")
    status_active = _runtime_status(runtime.cudaSetDeviceFlags, runtime.cudaDeviceScheduleSpin,
                                    call="cudaSetDeviceFlags")
    after_set = s.after("cudaSetDeviceFlags(ScheduleSpin) while active", status=status_active)
    yield_flag = 2  # CU_CTX_SCHED_YIELD
    primary_status = drv.outcome(drv.primary_set_flags, device, yield_flag)["status"]
    after_primary = s.after("cuDevicePrimaryCtxSetFlags(SCHED_YIELD) while active", status=primary_status)
    s.rec.add("summary", "flags", {
        "active_before_first_set": before["primary_active"], "set_flags_first": status_first,
        "active_after_first_set": first["primary_active"], "flags_after_first_set": first["primary_flags"],
        "flags_before_set_active": active["primary_flags"], "set_flags_active": status_active,
        "flags_after_set_active": after_set["primary_flags"], "primary_set_flags_active": primary_status,
        "flags_after_primary_set": after_primary["primary_flags"]})
    return s.output()


def green_runtime(device: int) -> dict:
    """A green context current before any runtime call: cuMemAlloc, cudaMalloc through CuPy, a CuPy kernel."""
    import cupy

    s = _calls("green-runtime", device)
    green = green_or_skip("green-runtime", device, s.rec)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    primary = drv.primary_retain(device)
    drv.push(green.handle)
    s.after("green context pushed")
    driver_owner = drv.pointer_context(drv.mem_alloc(256))
    ptr = cupy.cuda.runtime.malloc(1 << 20)
    malloc = s.after("cudaMalloc (CuPy)")
    runtime_owner = drv.pointer_context(ptr)
    kernel = checked(lambda: int((cupy.arange(100) * 2).sum()), 9900)
    after = s.after("first CuPy kernel", result=kernel)
    s.rec.add("summary", "runtime under a green context",
              {"green_id": drv.context_id(green.handle), "primary_id": drv.context_id(primary),
               "driver_owner_id": drv.outcome(drv.context_id, driver_owner).get("value"),
               "runtime_owner_id": drv.outcome(drv.context_id, runtime_owner).get("value"),
               "runtime_owner_context": runtime_owner, "driver_owner_context": driver_owner,
               "current_after_malloc": malloc["current"], "green": green.handle,
               "current_id_after_kernel": after["current_id"], "kernel": kernel})
    drv.set_current(0)
    return s.output()


TOO_OLD = ("cudaErrorCallRequiresNewerDriver", "cudaErrorInsufficientDriver", "cudaErrorNotSupported")


def execution_context(device: int) -> dict:
    """The runtime's own execution-context API (CUDA 13.1+): cudaDeviceGetExecutionCtx against the primary context,
    with no context current and with a green context current."""
    from cuda.bindings import runtime

    s = _calls("execution-context", device)
    version = runtime_versions().get("cuda_bindings")
    where = f"cuda-bindings {package_version('cuda-bindings')} (its runtime: {_version_text(version)})"
    if not hasattr(runtime, "cudaDeviceGetExecutionCtx"):
        record_skip(s.rec, skips.unsupported(f"{where} has no cudaDeviceGetExecutionCtx: the runtime's execution "
                                             "contexts arrived in CUDA 13.1"))
        return s.output()

    def exec_ctx_id() -> tuple[str, int | None]:
        err, ctx = runtime.cudaDeviceGetExecutionCtx(device)
        status = _runtime_status(lambda: (err,), call="cudaDeviceGetExecutionCtx")
        if status != "cudaSuccess":
            return status, None
        err, ident = runtime.cudaExecutionCtxGetId(ctx)
        return status, int(ident) if int(err) == 0 else None

    status, ident = exec_ctx_id()
    if status in TOO_OLD:

        driver_version = int(check(init_driver().cuDriverGetVersion(), "cuDriverGetVersion"))
        record_skip(s.rec, skips.unsupported(f"cudaDeviceGetExecutionCtx of {where} returned {status} on a driver "
                                             f"of {_version_text(driver_version)}"))
        return s.output()
    s.after("cudaDeviceGetExecutionCtx", status=status)
    primary = drv.primary_retain(device)
    green, why = greens.make_or_reason(device)  # optional here: without one, the record says why
    green_id = with_green = None
    if green is not None:
        drv.push(green.handle)
        green_id = drv.context_id(green.handle)
        with_green = exec_ctx_id()[1]
        drv.pop()
    s.rec.add("summary", "execution context",
              {"runtime": where, "status": status, "id": ident, "primary_id": drv.context_id(primary),
               "green_id": green_id if green is not None else f"none ({why})", "id_with_green_current": with_green})
    drv.primary_release(device)
    return s.output()


def _version_text(version: Any) -> str:
    """A CUDART_VERSION-style number as ``CUDA 13.2``."""
    if not isinstance(version, int) or isinstance(version, bool):
        return "an unknown CUDA version"
    return f"CUDA {version // 1000}.{version % 1000 // 10}"


def scenarios(options: LabOptions) -> list[Scenario]:
    """Every sequence once, each in its own child; first-context in a new interpreter, to watch the import."""
    device = options.device
    return [Scenario("first-context", first_context, (device,), isolation=Isolation.FRESH),
            *(Scenario(name, target, (device,)) for name, target in (
                ("free0", free0), ("init-device", init_device), ("created-first", created_first),
                ("handle", handle), ("threads", threads), ("flags", flags),
                ("green-runtime", green_runtime), ("execution-context", execution_context)))]
