"""Cases for lifecycle's claims (see tests/claim_cases/__init__.py)."""

from tests.claim_cases import Case, edit

F = "lifecycle.json"
GREEN = F  # the H200 run recorded the green scenarios too


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
    ]),
    "lifecycle.handle-is-primary": Case(F, breaks=[
        edit("handle", "handle", primary_retain=0x1234),
        edit("handle", "handle", driver_data_read_by_cupy=False),
        edit("handle", "handle", pointer_context_is_primary=False),
    ]),
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
    ]),
    "lifecycle.device-execution-context-is-primary": Case(GREEN, breaks=[
        edit("execution context", "execution-context", id=3),
        edit("execution context", "execution-context", status="cudaErrorInvalidValue", id=None),
    ]),
}
