"""lifecycle: when and by which calls the runtime makes its context, and how to get its handle.

Each sequence runs in a fresh child process, recording after every call the
thread's current context (handle and id) and the primary context's state; with
--trace, the driver calls and resource events each call caused. Sequence 1
starts in a new interpreter (nothing imported) so that ``import cupy`` itself is
watched.
"""

from __future__ import annotations

from ctxlab.claims import Claim, MissingObservation, documented, old_text, one, select, unless_skipped

NAME = "lifecycle"
# One table per sequence: after each call, the thread's current context and the primary context's state.
VIEWS = {"after": ("call", "current_id", "primary_active", "primary_flags", "status")}

RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API' and Primary Contexts "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
SET_DEVICE = ("CUDA Runtime API, cudaSetDevice: 'this function will immediately initialize the runtime state on "
              "the primary context' since CUDA 12.0 (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html); "
              "older text: the context is created at the first runtime call that needs it")
INIT_DEVICE = ("CUDA Runtime API, cudaInitDevice (CUDA 12.0+): initializes the device's primary context without "
               "making it current (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
FREE0 = ("CUDA Runtime API, Initialization: the runtime initializes at the first call that needs a context; "
         "cudaFree(0) was the idiom to force it (https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#initialization)")
SET_FLAGS = ("CUDA Runtime API, cudaSetDeviceFlags: old text 'cudaErrorSetOnActiveProcess' once the device is active; "
             "current text: the flags of an active primary context are overwritten "
             "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
PRIMARY_FLAGS = ("CUDA Driver API, cuDevicePrimaryCtxSetFlags: before CUDA 11.0 it failed with "
                 "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE on an active context; _v2 (11.0+) sets them "
                 "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)")
CTX_STACK = ("CUDA Driver API, Context Management: each host thread has its own stack of current contexts "
             "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
NO_DOC = "no documentation promises this; recorded as observed"


def _state_after(obs, scenario, call):
    for o in select(obs, "after", scenario):
        if o.value["call"] == call:
            return o.value
    raise MissingObservation(f"{call} in {scenario}")


def judge_import(obs):
    v = _state_after(obs, "first-context", "import cupy")
    calls = "an untraced number of" if v.get("driver_calls") is None else v["driver_calls"]
    return "observed", (f"import cupy made {calls} CUDA calls; after it the primary "
                        f"context was inactive ({not v['primary_active']}) and no context current "
                        f"({not v['current']}): the first runtime call initialises CUDA, not the import")


def judge_set_device(obs):
    before = _state_after(obs, "first-context", "cudaGetDeviceProperties")
    after = _state_after(obs, "first-context", "cudaSetDevice")
    return old_text(not after["primary_active"],
                    "cudaSetDevice did not make the primary context active: creation still waits for the first "
                    "call that needs it",
                    f"the primary context was inactive after cudaGetDeviceCount and the device properties "
                    f"(active {before['primary_active']}) and active and current right after cudaSetDevice "
                    f"(context id {after['current_id']}): CUDA 12 initialises it at cudaSetDevice")


def judge_free0(obs):
    v = _state_after(obs, "free0", "cudaFree(0)")
    return documented(v["primary_active"] and v["current"] == v["primary"],
                      f"cudaFree(0) as the first call created the primary context of device {v.get('device', 0)} "
                      f"(id {v['current_id']}) and made it current", f"cudaFree(0) did not bind the primary context: {v}")


def judge_init_device(obs):
    unless_skipped(obs, "init-device")
    v = _state_after(obs, "init-device", "cudaInitDevice")
    bound = _state_after(obs, "init-device", "cudaSetDevice")
    return documented(v["primary_active"] and not v["current"] and bound["current"] == bound["primary"],
                      "cudaInitDevice made the primary context active but left the thread without a current "
                      "context; cudaSetDevice then bound it",
                      f"cudaInitDevice: active {v['primary_active']}, current {v['current']}")


def judge_created_used(obs):
    v = one(obs, "runtime under a created context", "created-first").value
    return documented(v["allocation_in_created"] and not v["primary_active_after_malloc"],
                      "with a cuCtxCreate context current, the runtime's first call (cudaMalloc) used it and the "
                      "primary context stayed inactive",
                      f"the runtime did not use the created context: {v}")


def judge_cupy_created(obs):
    v = one(obs, "runtime under a created context", "created-first").value
    return "observed", (f"CuPy's first kernel under the created context: current context id "
                        f"{v['current_id_before_kernel']} -> {v['current_id_after_kernel']}, primary active after: "
                        f"{v['primary_active_after_kernel']}")


def judge_handle(obs):
    v = one(obs, "handle", "handle").value
    return documented(v["current_is_primary"] and v["driver_data_read_by_cupy"],
                      "after runtime initialisation cuCtxGetCurrent returned the same handle as "
                      "cuDevicePrimaryCtxRetain; memory from cuMemAlloc in it was read back through CuPy",
                      f"handles or data differ: {v}")


def judge_new_thread(obs):
    v = one(obs, "new thread", "threads").value
    return documented(v["current_at_start"] == 0 and v["driver_call"] == "CUDA_ERROR_INVALID_CONTEXT",
                      f"a new host thread starts with no current context; a driver call there returns "
                      f"{v['driver_call']}", f"a new thread started with {v['current_at_start']:#x}: {v}")


def judge_new_thread_binds(obs):
    v = one(obs, "new thread", "threads").value
    same = ("the same context as the main thread (same handle and id)" if v["same_as_main_thread"] else
            f"not the main thread's context: the main thread had chosen device {v['main_device']}, the new thread "
            f"starts on device {v['runtime_device']}")
    return documented(v["bound_primary_of_its_device"],
                      f"the first runtime call on the new thread bound the primary context of device "
                      f"{v['runtime_device']}, no new kind of context: {same}",
                      f"the new thread got a context that is not its device's primary context: {v}")


def judge_set_device_flags(obs):
    v = one(obs, "flags", "flags").value
    return old_text(v["set_flags_active"] == "cudaErrorSetOnActiveProcess",
                    "cudaSetDeviceFlags on an active device returned cudaErrorSetOnActiveProcess",
                    f"cudaSetDeviceFlags on the active primary context returned {v['set_flags_active']} and the "
                    f"flags became {v['flags_after_set_active']:#x} (were {v['flags_before_set_active']:#x})")


def judge_set_flags_activates(obs):
    v = one(obs, "flags", "flags").value
    return "observed", (f"cudaSetDeviceFlags(BlockingSync) as the process's first call returned {v['set_flags_first']}; "
                        f"primary context active before {v['active_before_first_set']}, after "
                        f"{v['active_after_first_set']}, flags {v['flags_after_first_set']:#x}")


def judge_primary_set_flags(obs):
    v = one(obs, "flags", "flags").value
    return old_text(v["primary_set_flags_active"] != "CUDA_SUCCESS",
                    f"cuDevicePrimaryCtxSetFlags on an active context failed: {v['primary_set_flags_active']}",
                    f"cuDevicePrimaryCtxSetFlags on the active context returned {v['primary_set_flags_active']}; "
                    f"flags now {v['flags_after_primary_set']:#x}")


def judge_calls_beneath(obs):
    after = _state_after(obs, "first-context", "cudaSetDevice")
    events = [o for o in select(obs, "after", "first-context") if o.value["call"] == "cudaSetDevice"][0].events
    if not events:
        return "skipped", "run with --trace to see the driver calls beneath each runtime call"
    return "observed", f"beneath cudaSetDevice (context id {after['current_id']}): " + "; ".join(events)[:600]


CLAIMS = (
    Claim("lifecycle.import-creates-nothing", "What importing CuPy does to CUDA.", NO_DOC, judge_import),
    Claim("lifecycle.set-device-initialises",
          "The runtime creates its context lazily, at the first call that needs one, not at cudaSetDevice (old text).",
          SET_DEVICE, judge_set_device),
    Claim("lifecycle.free0-creates-and-binds",
          "The first runtime call that needs a context (cudaFree(0)) creates the primary context and makes it current.",
          FREE0, judge_free0),
    Claim("lifecycle.init-device-does-not-bind",
          "cudaInitDevice initialises the primary context without making it current.", INIT_DEVICE,
          judge_init_device),
    Claim("lifecycle.runtime-uses-created-context",
          "With a cuCtxCreate context current, the runtime uses it instead of the primary context.",
          RUNTIME_INTEROP, judge_created_used),
    Claim("lifecycle.cupy-under-created-context",
          "What CuPy's first kernel does when a cuCtxCreate context is current.", NO_DOC, judge_cupy_created),
    Claim("lifecycle.handle-is-primary",
          "The runtime's context is the primary context: its handle comes from cuCtxGetCurrent (or "
          "cuDevicePrimaryCtxRetain) and the driver API can use it.", RUNTIME_INTEROP, judge_handle),
    Claim("lifecycle.new-thread-has-no-context", "A new host thread starts with no current context.", CTX_STACK,
          judge_new_thread),
    Claim("lifecycle.new-thread-binds-primary",
          "The first runtime call on a new host thread binds the primary context of that thread's current device "
          "(device 0 unless it chose one), not a new context.",
          RUNTIME_INTEROP, judge_new_thread_binds),
    Claim("lifecycle.set-device-flags-active",
          "cudaSetDeviceFlags fails with cudaErrorSetOnActiveProcess once the device is active (old text).",
          SET_FLAGS, judge_set_device_flags),
    Claim("lifecycle.set-device-flags-first-call",
          "What cudaSetDeviceFlags does as the first call, before any context exists.", NO_DOC,
          judge_set_flags_activates),
    Claim("lifecycle.primary-set-flags-active",
          "cuDevicePrimaryCtxSetFlags fails on an active primary context (before CUDA 11.0).", PRIMARY_FLAGS,
          judge_primary_set_flags),
    Claim("lifecycle.driver-calls-beneath",
          "Which driver calls the runtime makes when it creates its context.", NO_DOC, judge_calls_beneath),
)


# ---------------------------------------------------------------- sequences (children)

class Steps:
    """Calls one after another, recording the thread's context and the primary state after each."""

    def __init__(self, scenario: str, device: int):
        from ctxlab.labs.common import cuda_recorder

        self.rec = cuda_recorder(scenario)
        self.device = device

    def after(self, call: str, events: list | None = None, device: int | None = None, **extra) -> dict:
        """Record the thread's context and the primary state of ``device`` (the lab's device by default)."""
        from ctxlab.labs.common import context_state

        if events is None:
            events = self.rec.take_events()  # what the call caused, before our own probing
        device = self.device if device is None else device
        st = context_state(device)
        value = {"call": call, "current": st["current"], "current_id": st["current_id"], "device": device,
                 "primary_active": st["active"], "primary_flags": st["flags"], "primary": st["primary"], **extra}
        self.rec.add(call, "after", value, events=events)
        return value


def first_context(device: int) -> dict:
    """Sequence 1, in a new interpreter: import cupy, cuInit, device count and properties, cudaSetDevice,
    cudaMalloc, first kernel."""
    from ctxlab.cuda.environment import init_driver
    from ctxlab.trace import start_for_child

    tracer = start_for_child()  # before the import, so the import is watched too
    import cupy

    import_events = tracer.drain() if tracer else []
    init_driver()  # the state can only be read after cuInit, which creates no context
    init_events = tracer.drain() if tracer else []
    s = Steps("first-context", device)
    from ctxlab.trace import summarize

    s.after("import cupy", events=summarize(import_events, context_only=False), driver_calls=len(import_events) if tracer else None)
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
    return {"observations": s.rec.observations}


def free0(device: int) -> dict:
    import cupy

    s = Steps("free0", device)
    s.after("start")
    cupy.cuda.runtime.free(0)
    # Without cudaSetDevice the runtime uses the thread's default device, whatever the lab's device is.
    s.after("cudaFree(0)", device=cupy.cuda.runtime.getDevice())
    a = cupy.arange(10)
    from ctxlab.cuda import driver as drv

    s.after("CuPy allocation", pointer_context=drv.pointer_context(a.data.ptr))
    return {"observations": s.rec.observations}


def init_device(device: int) -> dict:
    from cuda.bindings import runtime

    s = Steps("init-device", device)
    if not hasattr(runtime, "cudaInitDevice"):
        s.rec.add("start", "skipped", "cudaInitDevice is not in this runtime (CUDA 12.0+ only)")
        return {"observations": s.rec.observations}
    s.after("start")
    status = runtime.cudaInitDevice(device, 0, 0)[0]
    s.after("cudaInitDevice", status=status.name, runtime="cuda.bindings")
    runtime.cudaSetDevice(device)
    s.after("cudaSetDevice")
    return {"observations": s.rec.observations}


def created_first(device: int) -> dict:
    import cupy

    from ctxlab.cuda import driver as drv

    s = Steps("created-first", device)
    created = drv.create_context(device)
    s.after("cuCtxCreate")
    ptr = cupy.cuda.runtime.malloc(1 << 20)
    malloc = s.after("cudaMalloc (CuPy)")
    before = drv.current()
    total = int((cupy.arange(100) * 2).sum())
    kernel = s.after("first CuPy kernel", result=total)
    s.rec.add("summary", "runtime under a created context",
              {"allocation_in_created": drv.pointer_context(ptr) == created,
               "primary_active_after_malloc": malloc["primary_active"],
               "current_id_before_kernel": before.id, "current_id_after_kernel": kernel["current_id"],
               "primary_active_after_kernel": kernel["primary_active"]})
    return {"observations": s.rec.observations}


def handle(device: int) -> dict:
    import cupy
    import numpy

    from ctxlab.cuda import driver as drv

    s = Steps("handle", device)
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
                                   "driver_data_read_by_cupy": bool((seen == values).all()),
                                   "pointer_context_is_primary": drv.pointer_context(ptr) == primary})
    drv.primary_release(device)
    return {"observations": s.rec.observations}


def threads(device: int) -> dict:
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.harness.threads import Choreography, Step

    s = Steps("threads", device)
    seen: dict = {}

    def main_thread(_):
        cupy.cuda.runtime.setDevice(device)
        cur = drv.current()
        seen["main"] = (cur.handle, cur.id)
        s.after("main: cudaSetDevice")

    def new_thread(_):
        start = drv.current().handle
        status = drv.raw_status(init_driver().cuCtxSynchronize(), "cuCtxSynchronize")
        s.after("new thread: cuCtxSynchronize", status=status)
        ptr = cupy.cuda.runtime.malloc(256)
        cur = drv.current()
        runtime_device = cupy.cuda.runtime.getDevice()  # per thread: this one never chose a device
        bound = s.after("new thread: cudaMalloc", device=runtime_device)
        s.rec.add("summary", "new thread", {"current_at_start": start, "driver_call": status, "bound": cur.handle,
                                            "runtime_device": runtime_device, "main_device": device,
                                            "bound_primary_of_its_device": cur.handle == bound["primary"],
                                            "same_as_main_thread": (cur.handle, cur.id) == seen["main"]})
        cupy.cuda.runtime.free(ptr)

    Choreography(["main", "new"], timeout=60).run([Step("main", "init", main_thread), Step("new", "first call", new_thread)])
    return {"observations": s.rec.observations}


def flags(device: int) -> dict:
    from cuda.bindings import runtime

    from ctxlab.cuda import driver as drv

    s = Steps("flags", device)
    blocking = runtime.cudaDeviceScheduleBlockingSync
    spin = runtime.cudaDeviceScheduleSpin
    before = s.after("start")
    status_first = runtime.cudaSetDeviceFlags(blocking)[0].name
    first = s.after("cudaSetDeviceFlags(BlockingSync) as the first call", status=status_first)
    runtime.cudaSetDevice(device)
    runtime.cudaFree(0)
    active = s.after("cudaFree(0)")
    status_active = runtime.cudaSetDeviceFlags(spin)[0].name
    after_set = s.after("cudaSetDeviceFlags(ScheduleSpin) while active", status=status_active)
    yield_flag = 2  # CU_CTX_SCHED_YIELD
    primary_status = drv.outcome(drv.primary_set_flags, device, yield_flag)["status"]
    after_primary = s.after("cuDevicePrimaryCtxSetFlags(SCHED_YIELD) while active", status=primary_status)
    s.rec.add("summary", "flags", {"active_before_first_set": before["primary_active"], "set_flags_first": status_first,
                                   "active_after_first_set": first["primary_active"],
                                   "flags_after_first_set": first["primary_flags"],
                                   "flags_before_set_active": active["primary_flags"], "set_flags_active": status_active,
                                   "flags_after_set_active": after_set["primary_flags"],
                                   "primary_set_flags_active": primary_status,
                                   "flags_after_primary_set": after_primary["primary_flags"]})
    return {"observations": s.rec.observations}


SEQUENCES = (
    ("first-context", "first_context", True),
    ("free0", "free0", False),
    ("init-device", "init_device", False),
    ("created-first", "created_first", False),
    ("handle", "handle", False),
    ("threads", "threads", False),
    ("flags", "flags", False),
)


def run(options: dict, progress=None):
    from ctxlab.labs.common import LabRun, Scenario, capture_environment

    device = options["device"]
    lab = LabRun(NAME, options, progress)
    environment = capture_environment(device)
    lab.run_all([Scenario(name, f"ctxlab.labs.lifecycle:{func}", (device,), fresh=fresh)
                 for name, func, fresh in SEQUENCES])
    return lab.finish(environment, CLAIMS)
