"""lifecycle's claims: the sources, the facts read from the scenarios' observations, the predicates and the evidence
templates. Pure: no CUDA."""

from __future__ import annotations

from typing import Any

from ctxlab.claim import Claim, Inapplicable, MissingObservation, Observations, decided, one, select
from ctxlab.cuda.green import SOURCE_EXECUTION_CONTEXT
from ctxlab.records.model import Observation

NAME = "lifecycle"
# One table per scenario: after each call, the thread's current context and the primary context's state.
VIEWS = {"after": ("call", "current_id", "primary_active", "primary_flags", "status")}
BLOCKING_SYNC = 0x4  # cudaDeviceScheduleBlockingSync == CU_CTX_SCHED_BLOCKING_SYNC

RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API' and Primary Contexts "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
SET_DEVICE = ("CUDA Runtime API, cudaSetDevice: 'this function will immediately initialize the runtime state on "
              "the primary context' since CUDA 12.0 "
              "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html); "
              "older text: the context is created at the first runtime call that needs it")
INIT_DEVICE = ("CUDA Runtime API, cudaInitDevice (CUDA 12.0+): initializes the device's primary context without "
               "making it current (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
FREE0 = ("CUDA Runtime API, Initialization: the runtime initializes at the first call that needs a context; "
         "cudaFree(0) was the idiom to force it "
         "(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#initialization)")
SET_FLAGS = ("CUDA Runtime API, cudaSetDeviceFlags: old text 'cudaErrorSetOnActiveProcess' once the device is active; "
             "current text: the flags of an active primary context are overwritten "
             "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
SET_FLAGS_FIRST = ("CUDA Runtime API, cudaSetDeviceFlags: 'If the current device has not been initialized, it is "
                   "initialized with the provided flags. If no device has been made current to the calling thread, "
                   "a default device is selected and initialized with the provided flags.' "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
PRIMARY_FLAGS = ("CUDA Driver API, cuDevicePrimaryCtxSetFlags: before CUDA 11.0 it failed with "
                 "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE on an active context; _v2 (11.0+) sets them "
                 "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)")
CTX_STACK = ("CUDA Driver API, Context Management: each host thread has its own stack of current contexts "
             "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
NO_DOC = "no documentation promises this; recorded as observed"


def _after(obs: Observations, scenario: str, call: str) -> Observation:
    """The ``after`` observation of one call in one scenario."""
    for o in select(obs, "after", scenario):
        if o.value["call"] == call:
            return o
    raise MissingObservation(f"the state after {call} in scenario {scenario}")


def _handle(h: Any) -> str:
    """A context handle as hex; NULL (0) or unread (None) as 'none'."""
    return f"{h:#x}" if h else "none"


def _yes(flag: Any) -> str:
    """A truth value as True/False; one a recording lacks as 'not recorded'."""
    return "not recorded" if flag is None else str(bool(flag))


def _flags(f: Any) -> str:
    """Context flags as hex; 'unread' where the state could not be read."""
    return "unread" if f is None else f"{f:#x}"


def facts_import(obs: Observations) -> dict:
    """What import cupy did: traced calls, whether CuPy was imported already, the state after it."""
    v = _after(obs, "first-context", "import cupy").value
    calls = v.get("driver_calls")
    return {"already": _yes(v.get("cupy_already_imported")),  # absent in recordings made before it existed
            "calls": "not traced" if calls is None else str(calls),
            "active": _yes(v["primary_active"]), "current": _handle(v["current"])}


def facts_set_device(obs: Observations) -> dict:
    """The primary context's state before and after cudaSetDevice in a fresh process."""
    before = _after(obs, "first-context", "cudaGetDeviceProperties").value
    after = _after(obs, "first-context", "cudaSetDevice").value
    return {"active_before": bool(before["primary_active"]), "active": bool(after["primary_active"]),
            "current": _handle(after["current"]), "current_id": after["current_id"],
            "primary": _handle(after["primary"])}


def facts_free0(obs: Observations) -> dict:
    """The primary context and the current context before and after cudaFree(0) as the first call."""
    start = _after(obs, "free0", "start").value
    v = _after(obs, "free0", "cudaFree(0)").value
    return {"device": v["device"], "active_before": bool(start["primary_active"]),
            "active": bool(v["primary_active"]), "bound": bool(v["current"]) and v["current"] == v["primary"],
            "current": _handle(v["current"]), "current_id": v["current_id"], "primary": _handle(v["primary"])}


def facts_init_device(obs: Observations) -> dict:
    """The state after cudaInitDevice, then after cudaSetDevice."""
    init = _after(obs, "init-device", "cudaInitDevice").value
    bound = _after(obs, "init-device", "cudaSetDevice").value
    return {"status": init.get("status", "not recorded"), "active": bool(init["primary_active"]),
            "unbound": not init["current"], "current": _handle(init["current"]),
            "bound": bool(bound["current"]) and bound["current"] == bound["primary"],
            "current_after": _handle(bound["current"]), "primary": _handle(bound["primary"])}


def facts_created(obs: Observations) -> dict:
    """What cudaMalloc and CuPy's first kernel did under a cuCtxCreate context."""
    v = one(obs, "runtime under a created context", "created-first").value
    # decided: recordings made before the child recorded the allocation's context carry its allocation_in_created
    in_created = decided(v, "allocation_in_created", lambda owner, created: owner == created, "allocation_context",
                         "created")
    return {"in_created": bool(in_created), "primary_active": bool(v["primary_active_after_malloc"]),
            "before_id": v["current_id_before_kernel"], "after_id": v["current_id_after_kernel"],
            "primary_after_kernel": _yes(v["primary_active_after_kernel"])}


def facts_handle(obs: Observations) -> dict:
    """The runtime's handle as cuCtxGetCurrent and cuDevicePrimaryCtxRetain return it, and driver memory in it."""
    v = one(obs, "handle", "handle").value
    # decided: recordings made before the child recorded both sides carry its own comparisons
    read = decided(v, "driver_data_read_by_cupy", lambda wrote, seen: seen == wrote, "driver_wrote", "cupy_read")
    in_primary = decided(v, "pointer_context_is_primary", lambda owner, primary: owner == primary,
                         "pointer_context", "primary_retain")
    return {"current": _handle(v["current"]), "retained": _handle(v["primary_retain"]),
            "same": bool(v["current"]) and v["current"] == v["primary_retain"],
            "read": bool(read), "in_primary": bool(in_primary)}


def facts_new_thread(obs: Observations) -> dict:
    """A new thread's current context at start and a driver call's status there."""
    v = one(obs, "new thread", "threads").value
    return {"start": _handle(v["current_at_start"]), "empty": not v["current_at_start"], "status": v["driver_call"]}


def facts_new_thread_binds(obs: Observations) -> dict:
    """The context a new thread's first runtime call bound, against its device's primary context."""
    v = one(obs, "new thread", "threads").value
    after = _after(obs, "threads", "new thread: cudaMalloc").value
    return {"bound": _handle(v["bound"]), "primary": _handle(after["primary"]),
            "is_primary": bool(v["bound"]) and v["bound"] == after["primary"], "device": v["runtime_device"],
            "main_device": v["main_device"], "same": _yes(v["same_as_main_thread"])}


def facts_flags(obs: Observations) -> dict:
    """What cudaSetDeviceFlags and cuDevicePrimaryCtxSetFlags returned and did to the primary context's flags."""
    v = one(obs, "flags", "flags").value
    return {"first": v["set_flags_first"], "active_before_first": _yes(v["active_before_first_set"]),
            "active_after_first": bool(v["active_after_first_set"]),
            "flags_first": v["flags_after_first_set"], "flags_first_hex": _flags(v["flags_after_first_set"]),
            "active_status": v["set_flags_active"], "before_active": _flags(v["flags_before_set_active"]),
            "after_active": _flags(v["flags_after_set_active"]),
            "primary_status": v["primary_set_flags_active"], "after_primary": _flags(v["flags_after_primary_set"])}


def facts_calls_beneath(obs: Observations) -> dict:
    """The traced calls beneath cudaSetDevice; an untraced run cannot say."""
    o = _after(obs, "first-context", "cudaSetDevice")
    if not o.events:
        raise Inapplicable("not traced: the driver calls beneath each runtime call need the tracer (ctxlab "
                           "lifecycle --trace; check traces this lab where CUPTI and a C compiler are)")
    return {"current_id": o.value["current_id"], "calls": "; ".join(o.events)[:600]}


def facts_green_runtime(obs: Observations) -> dict:
    """Where cudaMalloc allocated with a green context current, and what CuPy's first kernel left current."""
    v = one(obs, "runtime under a green context", "green-runtime").value
    # decided: recordings made before the child recorded the handles carry its own same_owner and
    # current_after_malloc_is_green
    return {**v, "same_owner": decided(v, "same_owner", lambda runtime, driver: runtime == driver,
                                       "runtime_owner_context", "driver_owner_context"),
            "current_after_malloc_is_green": decided(v, "current_after_malloc_is_green",
                                                     lambda current, green: current == green,
                                                     "current_after_malloc", "green"),
            "runtime_owner": "the green context's" if v["runtime_owner_id"] == v["green_id"] else
            "the primary context's" if v["runtime_owner_id"] == v["primary_id"] else
            f"context id {v['runtime_owner_id']}'s"}


def facts_execution_context(obs: Observations) -> dict:
    """cudaDeviceGetExecutionCtx's status and id against the primary context's id."""
    return dict(one(obs, "execution context", "execution-context").value)


FIRST = ("first-context",)

CLAIMS = (
    Claim("lifecycle.import-creates-nothing", "What importing CuPy does to CUDA.", NO_DOC, "observation", FIRST,
          facts_import,
          "CUDA calls traced during import cupy: {calls} (CuPy already imported before it: {already}); after it "
          "the primary context was active: {active}, current context: {current}"),
    Claim("lifecycle.set-device-initialises",
          "The runtime creates its context lazily, at the first call that needs one, not at cudaSetDevice (old text).",
          SET_DEVICE, "old-text", FIRST, facts_set_device,
          "primary context active after cudaGetDeviceCount and cudaGetDeviceProperties: {active_before}; after "
          "cudaSetDevice: active {active}, current context {current} (id {current_id}), primary context {primary}",
          lambda f: not f["active"]),
    Claim("lifecycle.free0-creates-and-binds",
          "The first runtime call that needs a context (cudaFree(0)) creates the primary context and makes it current.",
          FREE0, "promise", ("free0",), facts_free0,
          "primary context of device {device} active before cudaFree(0): {active_before}; after it: active "
          "{active}, current context {current} (id {current_id}), primary context {primary}",
          lambda f: not f["active_before"] and f["bound"]),  # bound: to the primary handle, read only while active
    Claim("lifecycle.init-device-does-not-bind",
          "cudaInitDevice initialises the primary context without making it current.", INIT_DEVICE, "promise",
          ("init-device",), facts_init_device,
          "cudaInitDevice returned {status}; after it the primary context was active: {active}, current context: "
          "{current}; after cudaSetDevice the current context was {current_after}, the primary context {primary}",
          lambda f: f["active"] and f["unbound"] and f["bound"]),
    Claim("lifecycle.runtime-uses-created-context",
          "With a cuCtxCreate context current, the runtime uses it instead of the primary context.",
          RUNTIME_INTEROP, "promise", ("created-first",), facts_created,
          "with a cuCtxCreate context current, cudaMalloc (through CuPy) allocated in it: {in_created}; primary "
          "context active after the cudaMalloc: {primary_active}",
          lambda f: f["in_created"] and not f["primary_active"]),
    Claim("lifecycle.cupy-under-created-context",
          "What CuPy's first kernel does when a cuCtxCreate context is current.", NO_DOC, "observation",
          ("created-first",), facts_created,
          "CuPy's first kernel under the created context: current context id {before_id} -> {after_id}, primary "
          "context active after it: {primary_after_kernel}"),
    Claim("lifecycle.handle-is-primary",
          "The runtime's context is the primary context: its handle comes from cuCtxGetCurrent (or "
          "cuDevicePrimaryCtxRetain) and the driver API can use it.", RUNTIME_INTEROP, "promise", ("handle",),
          facts_handle,
          "after cudaSetDevice, cuCtxGetCurrent returned {current} and cuDevicePrimaryCtxRetain {retained}; a "
          "cuMemAlloc allocation made there belongs to the primary context: {in_primary}, and CuPy read back what "
          "the driver wrote: {read}",
          lambda f: f["same"] and f["read"] and f["in_primary"], level=1),
    Claim("lifecycle.new-thread-has-no-context", "A new host thread starts with no current context.", CTX_STACK,
          "promise", ("threads",), facts_new_thread,
          "a new host thread's current context at start: {start}; cuCtxSynchronize there returned {status}",
          lambda f: f["empty"] and f["status"] == "CUDA_ERROR_INVALID_CONTEXT", level=1),
    Claim("lifecycle.new-thread-binds-primary",
          "The first runtime call on a new host thread binds the primary context of that thread's current device "
          "(device 0 unless it chose one), not a new context.", RUNTIME_INTEROP, "promise", ("threads",),
          facts_new_thread_binds,
          "after the first runtime call (cudaMalloc) on a new thread, its current context was {bound}; the primary "
          "context of its runtime device {device} is {primary}; the main thread had chosen device {main_device}; "
          "same context (handle and id) as the main thread: {same}",
          lambda f: f["is_primary"], level=1),
    Claim("lifecycle.set-device-flags-active",
          "cudaSetDeviceFlags fails with cudaErrorSetOnActiveProcess once the device is active (old text).",
          SET_FLAGS, "old-text", ("flags",), facts_flags,
          "cudaSetDeviceFlags(ScheduleSpin) on the active primary context returned {active_status}; its flags "
          "were {before_active}, then {after_active}",
          lambda f: f["active_status"] == "cudaErrorSetOnActiveProcess"),
    Claim("lifecycle.set-device-flags-first-call",
          "cudaSetDeviceFlags as the first call, before any context exists, initialises the device's primary "
          "context with the given flags.", SET_FLAGS_FIRST, "promise", ("flags",), facts_flags,
          "cudaSetDeviceFlags(BlockingSync) as the process's first call returned {first}; primary context active "
          "before it: {active_before_first}, after it: {active_after_first}, with flags {flags_first_hex}",
          lambda f: (f["first"] == "cudaSuccess" and f["active_after_first"]
                     and bool((f["flags_first"] or 0) & BLOCKING_SYNC))),
    Claim("lifecycle.primary-set-flags-active",
          "cuDevicePrimaryCtxSetFlags fails on an active primary context (before CUDA 11.0).", PRIMARY_FLAGS,
          "old-text", ("flags",), facts_flags,
          "cuDevicePrimaryCtxSetFlags(SCHED_YIELD) on the active primary context returned {primary_status}; its "
          "flags were {after_active}, then {after_primary}",
          lambda f: f["primary_status"] != "CUDA_SUCCESS"),
    Claim("lifecycle.driver-calls-beneath",
          "Which driver calls the runtime makes when it creates its context.", NO_DOC, "observation", FIRST,
          facts_calls_beneath, "beneath cudaSetDevice (context id {current_id}): {calls}"),
    Claim("lifecycle.runtime-uses-green-context",
          "With a green context current, runtime calls use it as they use any current context: cudaMalloc "
          "allocates in the same context as cuMemAlloc there, and the green context stays current.",
          RUNTIME_INTEROP + ": 'CUDA Runtime API calls operate on the CUDA Driver API CUcontext which is current to "
          "the calling host thread'", "promise", ("green-runtime",), facts_green_runtime,
          "with a green context current (id {green_id}; primary context {primary_id}): cudaMalloc (through CuPy) "
          "allocated in {runtime_owner} context (cuMemAlloc there: context id {driver_owner_id}; the same: "
          "{same_owner}); the green context still current after it: {current_after_malloc_is_green}",
          lambda f: f["same_owner"] and f["current_after_malloc_is_green"]),
    Claim("lifecycle.cupy-under-green-context",
          "What CuPy's first kernel does when a green context is current.", NO_DOC, "observation",
          ("green-runtime",), facts_green_runtime,
          "CuPy's first kernel under the green context (id {green_id}): current context id after it "
          "{current_id_after_kernel} (primary context {primary_id}); its result: {kernel}"),
    Claim("lifecycle.device-execution-context-is-primary",
          "cudaDeviceGetExecutionCtx returns the execution context of the device's primary context (CUDA 13.1+ "
          "runtimes).", SOURCE_EXECUTION_CONTEXT, "promise", ("execution-context",), facts_execution_context,
          "cuda.bindings' runtime ({runtime}): cudaDeviceGetExecutionCtx -> {status}, cudaExecutionCtxGetId -> "
          "{id}; the primary context's cuCtxGetId: {primary_id}; with a green context (id {green_id}) current, "
          "cudaDeviceGetExecutionCtx gave id {id_with_green_current}",
          # the id is None unless cudaDeviceGetExecutionCtx returned cudaSuccess; the primary's id never is
          lambda f: f["id"] == f["primary_id"]),
)
