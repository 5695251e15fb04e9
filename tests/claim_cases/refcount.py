"""Cases for refcount's claims (see tests/claim_cases/__init__.py).

Claims judged over the repeats of an undefined-behaviour scenario break with
``repeat_with``: the recorded run plus one more repeat whose outcome differs,
so a case holds only if every repeat is read.
"""

from __future__ import annotations

from tests.claim_cases import Case, both, drop, edit, forget, in_repeat, recorded_now, repeat_with

F = "refcount.json"
GREEN = F  # the H200 run recorded the green scenarios too
SILENT = "silent-wrong-result (got 0, expected 1499500)"

# What the H200 run had (labs/results/refcount.json's environment) and the header found there.
RAN = {"cupy": 13020, "cuda_bindings": 13030}
CUDA_13_0 = {"path": "/usr/local/cuda-13.0/include/cuda_runtime_api.h", "cudart_version": 13000,
             "declares_cudaThreadExit": False}
CUDA_12_4 = {"path": "/usr/local/cuda-12.4/include/cuda_runtime_api.h", "cudart_version": 12040,
             "declares_cudaThreadExit": True}
# refcount.json was recorded before created recorded its context and the allocation's (the claim compares them
# since; it reads the recording's own allocation_in_created there): a created context's handle, and the primary
# context's (current after CuPy's kernels in the H200 run).
CREATED, PRIMARY = 0x2371_0B40, 594980832
DESTROYED_NOW = recorded_now("cuCtxDestroy after runtime use", "created", ("allocation_in_created",),
                             allocation_context=CREATED, created=CREATED)




def beyond(n: int):
    """Match the state after the lab's n-th release beyond its own retains."""
    return lambda v: v["step"].startswith(f"release beyond the lab's retains (#{n})")


CASES: dict[str, Case] = {
    "refcount.runtime-holds-reference": Case(F, breaks=[
        edit("extra releases accepted", "runtime-1", extra=0),
        repeat_with("extra releases accepted", "runtime-1", extra=0),
    ], holds_too=[
        [edit("extra releases accepted", "runtime-1", extra=1)],  # one release beyond the lab's: one reference held
    ]),
    "refcount.primary-count": Case(F, holds_too=[
        # one release beyond the lab's took the count to zero: inactive at once, no reference left before it
        [edit("extra releases accepted", "runtime-1", extra=1), edit("state", "runtime-1", beyond(1), active=False)],
        # a run that recorded no state for the refused release: the trail is exactly as long as the releases
        [drop("state", "runtime-1", beyond(3))],
    ], breaks=[
        # three releases accepted, but the context was gone after the second: gone while a reference was left
        edit("extra releases accepted", "runtime-1", extra=3),
        # no release beyond the lab's, though the context outlived the lab's own and ended at the refused one
        both(edit("extra releases accepted", "runtime-1", extra=0), edit("state", "runtime-1", beyond(2), active=True)),
        repeat_with("extra releases accepted", "runtime-1", after_last__active=True),
        repeat_with("state", "runtime-1", active=True),  # never inactive, whatever the count
        repeat_with("state", "runtime-1", active=False),  # gone while a reference was left
        repeat_with("extra releases accepted", "runtime-1", refused=None),
        # two repeats broken two ways: in one it stayed active at zero, in the other it was gone while a
        # reference was left (the counts of alive and inactive agree, 2 and 2, short of the 3 repeats)
        both(in_repeat(0, edit("state", "runtime-1", active=True)),
             in_repeat(0, edit("extra releases accepted", "runtime-1", after_last__active=True)),
             in_repeat(1, edit("state", "runtime-1", active=False))),
    ]),
    "refcount.device-reset-destroys": Case(F, breaks=[
        repeat_with("after cudaDeviceReset", "device-reset", old_pointer_ok=True, old_pointer_status="CUDA_SUCCESS"),
        repeat_with("after cudaDeviceReset", "device-reset", old_reduction=SILENT),
        # either sign of the old pointer still valid is enough: its status alone, or (older runs) its flag alone
        repeat_with("after cudaDeviceReset", "device-reset", old_pointer_status="CUDA_SUCCESS"),
        repeat_with("after cudaDeviceReset", "device-reset", old_pointer_ok=True),
    ]),
    "refcount.primary-reset": Case(F, breaks=[
        repeat_with("after cuDevicePrimaryCtxReset", "primary-reset", old_pointer_status="CUDA_SUCCESS"),
        repeat_with("after cuDevicePrimaryCtxReset", "primary-reset", id_after=1),
        repeat_with("after cuDevicePrimaryCtxReset", "primary-reset", id_after=None),
    ]),
    "refcount.attach-detach-count": Case(F, breaks=[
        edit("cuCtxAttach/cuCtxDetach", "created", alive_after_second_detach=True),
        repeat_with("cuCtxAttach/cuCtxDetach", "created", attach="CUDA_ERROR_NOT_SUPPORTED"),
        repeat_with("cuCtxAttach/cuCtxDetach", "created", first_detach="CUDA_ERROR_INVALID_CONTEXT"),
        repeat_with("cuCtxAttach/cuCtxDetach", "created", alive_after_first_detach=False),  # one detach ended it
        repeat_with("cuCtxAttach/cuCtxDetach", "created", attach="CUDA_ERROR_NOT_SUPPORTED",
                    first_detach="CUDA_ERROR_NOT_SUPPORTED"),  # both refused alike
    ]),
    "refcount.runtime-does-not-retain-created": Case(F, breaks=[
        repeat_with("cuCtxDestroy after runtime use", "created", alive_after=True, id_after="CUDA_SUCCESS"),
        repeat_with("cuCtxDestroy after runtime use", "created", destroy="CUDA_ERROR_INVALID_CONTEXT",
                    alive_after=True),
        repeat_with("cuCtxDestroy after runtime use", "created", allocation_in_created=False),
        # the runtime released it itself: the lab's cuCtxDestroy found it destroyed already (gone, but not by it)
        repeat_with("cuCtxDestroy after runtime use", "created", destroy="CUDA_ERROR_CONTEXT_IS_DESTROYED"),
        # two repeats broken two ways: the context outlived its destroy in one, CuPy allocated elsewhere in the other
        both(in_repeat(0, edit("cuCtxDestroy after runtime use", "created", alive_after=True,
                               id_after="CUDA_SUCCESS")),
             in_repeat(1, edit("cuCtxDestroy after runtime use", "created", allocation_in_created=False))),
        # recorded now: CuPy's allocation in the primary context in one run
        both(DESTROYED_NOW,
             in_repeat(1, edit("cuCtxDestroy after runtime use", "created", allocation_context=PRIMARY))),
    ], holds_too=[[DESTROYED_NOW]]),
    "refcount.destroy-while-current-elsewhere": Case(F, holds_too=[
        # recorded before the destroyed handle was: B's state after its push names it, in each run its own
        [forget("destroyed while current elsewhere", "created", "handle")],
        [forget("destroyed while current elsewhere", "created", "handle"),
         in_repeat(1, edit("state", "created", lambda v: v["step"] == "B: pushed", current=0x5000)),
         in_repeat(1, edit("destroyed while current elsewhere", "created", current_after=0x5000))],
    ], breaks=[
        repeat_with("destroyed while current elsewhere", "created", current_after=0),
        repeat_with("destroyed while current elsewhere", "created", synchronize="CUDA_SUCCESS"),
        repeat_with("destroyed while current elsewhere", "created", alloc="CUDA_ERROR_INVALID_CONTEXT"),
        # Recorded with the destroyed handle: B had another context current afterwards.
        repeat_with("destroyed while current elsewhere", "created", handle=0x1234),
        # still current there, but B's calls refused with another error than the one promised
        repeat_with("destroyed while current elsewhere", "created", synchronize="CUDA_ERROR_INVALID_CONTEXT",
                    alloc="CUDA_ERROR_INVALID_CONTEXT"),
        # two repeats broken two ways: B had no context left in one, B's calls succeeded in the other
        both(in_repeat(0, edit("destroyed while current elsewhere", "created", current_after=0)),
             in_repeat(1, edit("destroyed while current elsewhere", "created", synchronize="CUDA_SUCCESS",
                               alloc="CUDA_SUCCESS"))),
    ]),
    # Holds: a runtime of CUDA 12.4 ran, and the header of that exact version declares cudaThreadExit.
    "refcount.thread-exit": Case(F, keep=[
        edit("cudaThreadExit", "thread-exit", runtime_versions={"cupy": 12040, "cuda_bindings": 12040},
             headers_seen=[CUDA_13_0, CUDA_12_4]),
    ], holds_too=[
        # cuda.bindings exports it, whatever the headers say
        [edit("cudaThreadExit", "thread-exit", in_cuda_bindings=True)],
    ], breaks=[
        # The H200 run: the 12.4 header declares it, but the runtimes that ran are 13.2 and 13.3.
        edit("cudaThreadExit", "thread-exit", runtime_versions=RAN),
        # The header of the version that ran does not declare it, and cuda.bindings does not export it.
        edit("cudaThreadExit", "thread-exit",
             headers_seen=[CUDA_13_0, {**CUDA_12_4, "declares_cudaThreadExit": False}]),
    ]),
    # Green contexts: the H200's recorded run.
    "refcount.green-retains-primary": Case(GREEN, breaks=[
        repeat_with("green reference", "green-reference", active_after_create=False),  # gone at the create
        repeat_with("green reference", "green-reference", active_after_lab_release=False),  # no reference held
        repeat_with("green reference", "green-reference", active_after_destroy=True),  # destroy kept it
        repeat_with("green reference", "green-reference", destroy="CUDA_ERROR_INVALID_CONTEXT"),
    ]),
}
