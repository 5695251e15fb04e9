"""Synthetic observations of the green-context scenarios, for tests only.

No green-context run has been recorded on a GPU yet, so the cases of the green
claims start from these lists instead of a file under labs/results/. Each value
has exactly the shape the scenario functions record (ctxlab/labs/migrate.py,
refcount.py, lifecycle.py: ``green_*``, ``concurrent_green``, ``execution_context``);
the numbers are what the documentation leads one to expect on an H200 (132 SMs,
a group of 16), not measurements. Once a run is recorded, the cases can use it.
"""

from __future__ import annotations

from typing import Any

from ctxlab.record import Observation

GREEN = 0x5A5A_0000  # the green context's CUcontext (from cuCtxFromGreenCtx)
PRIMARY = 0x1A1A_0000  # the primary context
GREEN_ID, PRIMARY_ID = 3, 1
RUNS = range(3)  # the default --repeats


def obs(scenario: str, what: str, value: Any, repeat: int | None = None, step: str = "step",
        thread: str = "MainThread", context: int | None = None) -> Observation:
    """One observation as a scenario records it."""
    return Observation(step=step, thread=thread, context_id=GREEN_ID if context == GREEN else None, what=what,
                       value=value, context=context, scenario=scenario, repeat=repeat)


def _green_info() -> dict:
    return {"handle": GREEN, "device": 0, "device_sms": 132, "group_sms": 16, "remainder_sms": 116, "asked_sms": 16}


def _thread() -> dict:
    return {"error": None, "push": "CUDA_SUCCESS", "current_is_green": True, "launches_tried": 200,
            "launches_ok": 200, "launch_errors": {}, "synchronize": "CUDA_SUCCESS", "cupy": "correct",
            "pop": "CUDA_SUCCESS"}


MIGRATE: list[Observation] = [
    obs("handoff-green", "context made", {"kind": "green", "handle": GREEN, "id": GREEN_ID}, context=GREEN),
    obs("handoff-green", "green context made", {**_green_info(), "id": GREEN_ID}, context=GREEN),
    # Allocations under the green context naming the primary context, and CuPy moving the thread: what the
    # primary/created claims must not read (they judge their own scenarios only).
    obs("handoff-green", "cupy allocation",
        {"array": "a", "pointer": 0x7F00_0000_0000, "pointer_context": PRIMARY, "pointer_context_id": PRIMARY_ID,
         "current_before": GREEN, "current_after": PRIMARY, "current_before_id": GREEN_ID,
         "current_after_id": PRIMARY_ID}, context=GREEN),
    obs("handoff-green", "allocation context",
        {"pointer": 0x7F00_0010_0000, "pointer_context": PRIMARY, "current_context": GREEN, "device": 0},
        context=GREEN),
    obs("handoff-green", "handoffs verified",
        {"verified": 12, "handoffs": 12, "mismatches": 0, "first_mismatch": None, "final_ok": True, "threads": 4,
         "rounds": 3}, step="summary", context=GREEN),
    *(obs("concurrent-green", "green current on two threads",
          {"threads": {"A": _thread(), "B": _thread()}, "global": "correct", "expected_global": 400}, repeat=r)
      for r in RUNS),
    obs("green-sm", "green sm ids",
        {**_green_info(), "green_resource_sms": 16, "blocks": 1024, "primary_distinct": 132,
         "null_stream_distinct": 16, "green_stream_distinct": 16, "null_stream_sms": list(range(16)),
         "green_stream_sms": list(range(16))}),
    obs("green-memory", "green allocation",
        {"pointer": 0x7F00_0020_0000, "pointer_context": PRIMARY, "pointer_context_id": PRIMARY_ID, "green": GREEN,
         "green_id": GREEN_ID, "primary": PRIMARY, "primary_id": PRIMARY_ID, "primary_reads_green": "correct",
         "green_reads_primary": "correct"}),
    obs("green-cupy", "cupy under green",
        {"green_id": GREEN_ID, "primary_id": PRIMARY_ID, "current_before_id": GREEN_ID, "after_alloc_id": GREEN_ID,
         "after_kernel_id": PRIMARY_ID, "allocation_owner_id": PRIMARY_ID, "kernel": "correct"}),
]

REFCOUNT: list[Observation] = [
    *(o for r in RUNS for o in (
        obs("green-reference", "state", {"step": "lab retain, then cuGreenCtxCreate", "current": 0,
                                          "current_id": None, "active": True, "flags": 0, "lab_retains": 1},
            repeat=r),
        obs("green-reference", "green reference",
            {"active_after_create": True, "active_after_lab_release": True, "destroy": "CUDA_SUCCESS",
             "active_after_destroy": False}, repeat=r),
        obs("green-reference", "green releases accepted",
            {"extra": 1, "refused": "CUDA_ERROR_INVALID_CONTEXT", "destroy_after": "CUDA_SUCCESS",
             "after_last": {"step": "release beyond the lab's retains (#1): CUDA_SUCCESS", "current": 0,
                            "current_id": None, "active": False, "flags": 0, "lab_retains": -1}}, repeat=r),
        obs("green-primary-reset", "green after primary reset",
            {"reset": "CUDA_SUCCESS", "active_after": False, "pointer_status": "CUDA_ERROR_INVALID_VALUE",
             "green_id_after": GREEN_ID, "old_data": "CUDA_ERROR_INVALID_VALUE", "kernel": "CUDA_ERROR_INVALID_HANDLE",
             "new_alloc": "CUDA_SUCCESS", "destroy": "CUDA_SUCCESS"}, repeat=r),
        obs("green-destroy-elsewhere", "green destroyed while current elsewhere",
            {"destroy": "CUDA_SUCCESS", "handle": GREEN, "current_after": GREEN,
             "synchronize": "CUDA_ERROR_CONTEXT_IS_DESTROYED", "alloc": "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
            repeat=r, thread="B"),
    )),
]

LIFECYCLE: list[Observation] = [
    obs("green-runtime", "after", {"call": "cudaMalloc (CuPy)", "current": GREEN, "current_id": GREEN_ID,
                                   "device": 0, "primary_active": True, "primary_flags": 0, "primary": PRIMARY},
        context=GREEN),
    obs("green-runtime", "runtime under a green context",
        {"green_id": GREEN_ID, "primary_id": PRIMARY_ID, "driver_owner_id": GREEN_ID, "runtime_owner_id": GREEN_ID,
         "same_owner": True, "current_after_malloc_is_green": True, "current_id_after_kernel": GREEN_ID,
         "kernel": "correct"}, context=GREEN),
    obs("execution-context", "execution context",
        {"runtime": "cuda-bindings 13.3.1 (its runtime: CUDA 13.3)", "status": "cudaSuccess", "id": PRIMARY_ID,
         "primary_id": PRIMARY_ID, "green_id": GREEN_ID, "id_with_green_current": PRIMARY_ID}),
]

BY_LAB: dict[str, list[Observation]] = {"migrate": MIGRATE, "refcount": REFCOUNT, "lifecycle": LIFECYCLE}
