"""Cases for lifecycle's claims (see tests/claim_cases/__init__.py)."""

from tests.claim_cases import Case, edit, recorded_now

F = "lifecycle.json"
GREEN = F  # the H200 run recorded the green scenarios too
# lifecycle.json was recorded before its children recorded both sides of what they compared (the claims compare
# since; they read a recording's own answers where it has no sides): its handles, as the sides would read.
CREATED, PRIMARY = 595327072, 595845552  # created-first: cuCtxCreate's context, the primary context after the kernel
HANDLE = 595840480  # handle: the primary context
GREEN_CTX, GREEN_PRIMARY = 611311600, 595928336  # green-runtime: the green context, the primary context
WROTE = [i * 11 + 5 for i in range(16)]  # what handle's driver wrote, read back by CuPy


def created_now(**fields):
    """created-first's summary as recorded now: the allocation's context and the created one (``fields`` change
    them)."""
    return recorded_now("runtime under a created context", "created-first", ("allocation_in_created",),
                        **{"allocation_context": CREATED, "created": CREATED, **fields})


def handle_now(**fields):
    """handle's observation as recorded now: what the driver wrote, what CuPy read, the allocation's context."""
    return recorded_now("handle", "handle", ("driver_data_read_by_cupy", "pointer_context_is_primary"),
                        **{"driver_wrote": WROTE, "cupy_read": WROTE, "pointer_context": HANDLE, **fields})


def green_now(**fields):
    """green-runtime's summary as recorded now: both allocations' contexts, the one current after cudaMalloc, the
    green context."""
    return recorded_now("runtime under a green context", "green-runtime",
                        ("same_owner", "current_after_malloc_is_green"),
                        **{"runtime_owner_context": GREEN_PRIMARY, "driver_owner_context": GREEN_PRIMARY,
                           "current_after_malloc": GREEN_CTX, "green": GREEN_CTX, **fields})


def call(name):
    """Match the ``after`` observation of one call."""
    return lambda v: v["call"] == name


CASES: dict[str, Case] = {
    # Old text: the context waits for the first call that needs one; CUDA 12 creates it at cudaSetDevice.
    "lifecycle.set-device-initialises": Case(F, keep=[
        edit("after", "first-context", where=call("cudaSetDevice"), primary_active=False, primary=None, current=0,
             current_id=None),
    ], breaks=[
        edit("after", "first-context", where=call("cudaSetDevice"), primary_active=True),
    ]),
    "lifecycle.free0-creates-and-binds": Case(F, breaks=[
        edit("after", "free0", where=call("cudaFree(0)"), primary_active=False, primary=None),
        edit("after", "free0", where=call("cudaFree(0)"), current=0, current_id=None),
        edit("after", "free0", where=call("cudaFree(0)"), current=0x1234),
        edit("after", "free0", where=call("start"), primary_active=True, primary=1000143984),
    ]),
    "lifecycle.init-device-does-not-bind": Case(F, breaks=[
        edit("after", "init-device", where=call("cudaInitDevice"), current=1000141984, current_id=1),
        edit("after", "init-device", where=call("cudaInitDevice"), primary_active=False, primary=None),
        edit("after", "init-device", where=call("cudaSetDevice"), current=0, current_id=None),
        # cudaSetDevice left a context current, but not the primary one
        edit("after", "init-device", where=call("cudaSetDevice"), current=0x1234),
    ]),
    "lifecycle.runtime-uses-created-context": Case(F, breaks=[
        edit("runtime under a created context", "created-first", allocation_in_created=False),
        edit("runtime under a created context", "created-first", primary_active_after_malloc=True),
        created_now(allocation_context=PRIMARY),  # cudaMalloc allocated in the primary context
    ], holds_too=[[created_now()]]),
    "lifecycle.handle-is-primary": Case(F, breaks=[
        edit("handle", "handle", primary_retain=0x1234),
        edit("handle", "handle", driver_data_read_by_cupy=False),
        edit("handle", "handle", pointer_context_is_primary=False),
        handle_now(cupy_read=[*WROTE[:-1], 0]),  # CuPy read one value wrong
        handle_now(pointer_context=0x1234),  # the driver's allocation in another context
    ], holds_too=[[handle_now()]]),
    "lifecycle.new-thread-has-no-context": Case(F, breaks=[
        edit("new thread", "threads", current_at_start=140222964944896),
        edit("new thread", "threads", driver_call="CUDA_SUCCESS"),
    ]),
    "lifecycle.new-thread-binds-primary": Case(F, breaks=[
        edit("new thread", "threads", bound=0x1234, same_as_main_thread=False),
        edit("after", "threads", where=call("new thread: cudaMalloc"), primary=0x5678),
    ]),
    # Old text: cudaErrorSetOnActiveProcess; today the flags are overwritten.
    "lifecycle.set-device-flags-active": Case(F, keep=[
        edit("flags", "flags", set_flags_active="cudaErrorSetOnActiveProcess", flags_after_set_active=4),
    ], breaks=[
        edit("flags", "flags", set_flags_active="cudaSuccess", flags_after_set_active=1),
    ]),
    "lifecycle.set-device-flags-first-call": Case(F, breaks=[
        edit("flags", "flags", set_flags_first="cudaErrorSetOnActiveProcess"),
        edit("flags", "flags", active_after_first_set=False, flags_after_first_set=0),
        edit("flags", "flags", active_after_first_set=False),  # inactive, though the flags read back set
        edit("flags", "flags", flags_after_first_set=None),  # the flags could not be read back
        edit("flags", "flags", flags_after_first_set=1),
    ]),
    # Old text (before CUDA 11.0): the call failed on an active primary context.
    "lifecycle.primary-set-flags-active": Case(F, keep=[
        edit("flags", "flags", primary_set_flags_active="CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", flags_after_primary_set=1),
    ], breaks=[
        edit("flags", "flags", primary_set_flags_active="CUDA_SUCCESS", flags_after_primary_set=2),
    ]),
    # Green contexts: the H200's recorded run (the allocation is owned by the primary context there).
    "lifecycle.runtime-uses-green-context": Case(GREEN, breaks=[
        edit("runtime under a green context", "green-runtime", runtime_owner_id=2, same_owner=False),
        edit("runtime under a green context", "green-runtime", current_after_malloc_is_green=False),
        green_now(runtime_owner_context=GREEN_CTX),  # cudaMalloc's allocation in another context than cuMemAlloc's
        green_now(current_after_malloc=GREEN_PRIMARY),  # cudaMalloc left the primary context current
    ], holds_too=[[green_now()]]),
    "lifecycle.device-execution-context-is-primary": Case(GREEN, breaks=[
        edit("execution context", "execution-context", id=3),
        edit("execution context", "execution-context", status="cudaErrorInvalidValue", id=None),
    ]),
}
