"""Synthetic observations of interop's areas 4, 5, 6 (IPC) and 7, for tests only.

No GPU run of these scenarios has been recorded yet, so the cases of their
claims start from these lists (as tests/claim_cases/green_fixtures.py does for
the green scenarios). Each value has exactly the shape the scenario functions
record (ctxlab/labs/interop_under.py, interop_blast.py, interop_memory.py); the
outcomes are what the documentation leads one to expect, not measurements.
Once a run is recorded, the cases can use it.
"""

from __future__ import annotations

from typing import Any

from ctxlab.labs.interop_blast import TEARDOWNS
from ctxlab.labs.interop_names import LIBRARIES
from ctxlab.record import Observation

CREATED, GREEN, PRIMARY = 0xC0C0_0000, 0x5A5A_0000, 0x1A1A_0000
CREATED_ID, GREEN_ID, PRIMARY_ID = 2, 3, 1
RUNS = range(3)  # the default --repeats
NAMES = {"created": ("the created context", CREATED, CREATED_ID), "green": ("the green context", GREEN, GREEN_ID)}


def obs(scenario: str, what: str, value: Any, repeat: int | None = None, step: str = "step") -> Observation:
    """One observation as a scenario records it."""
    return Observation(step=step, thread="MainThread", context_id=None, what=what, value=value, context=None,
                       scenario=scenario, repeat=repeat)


def under(kind: str, lib: str) -> dict:
    name, handle, ident = NAMES[kind]
    value = {"library": lib, "version": "1.0", "kind": kind, "context": handle, "context_id": ident,
             "primary": PRIMARY, "primary_id": PRIMARY_ID, "call": "make", "alloc": "ok", "pointer": 0x7F00_0000_0000,
             "owner_is": name, "before_is": name, "after_alloc_is": name, "kernel": "correct",
             "after_kernel_is": name, "first_call": None, "green": None}
    if lib == "jax":
        value.update(owner_is="none")
    if lib == "numba":
        value.update(alloc=f"RuntimeError: Numba cannot operate on non-primary CUDA context {handle:x}",
                     pointer=None, owner_is="none (no allocation)", kernel="not run (no allocation)",
                     call="-")
    if lib == "cuda-core":
        value.update(owner_is="none", after_alloc_is="the primary context",
                     after_kernel_is="the primary context",
                     first_call="CUDAError: Device 0 is not yet initialized, perhaps you forgot to call "
                                ".set_current() first?")
    return value


UNDER: list[Observation] = [obs(f"under-{kind}-{lib}", "under context", under(kind, lib), step="under")
                            for kind in NAMES for lib in LIBRARIES]
UNDER.append(obs("torch-green-contexts", "torch green context",
                 {"version": "2.11.0", "how": "GreenContext.create(16, 0)", "asked_sms": 16, "reported_sms": None,
                  "stream_context_is": "PyTorch's green context", "kernel_sms": "16 distinct SMs",
                  "tensor_owner_is": "the primary context", "sum": "correct", "current_after_is": "the primary context",
                  "primary": PRIMARY}, step="green"))


def blast(teardown: str, lib: str) -> dict:
    status = {"release": "CUDA_ERROR_INVALID_CONTEXT"}.get(teardown, "CUDA_SUCCESS")
    return {"library": lib, "teardown": teardown, "status": status, "present": True, "reason": None,
            "version": "1.0", "made": "ok", "owner": "the primary context", "before": "correct",
            "old": "CUDA_ERROR_ILLEGAL_ADDRESS", "new": "correct"}


BLAST: list[Observation] = []
for teardown in TEARDOWNS:
    for r in RUNS:
        if teardown == "reset-cupy":  # CuPy 14.2 has no deviceReset: the scenario says so
            BLAST.append(obs("blast-reset-cupy", "skipped", "cupy.cuda.runtime has no deviceReset (CuPy 14.2.0)",
                             repeat=r, step="start"))
            continue
        BLAST.append(obs(f"blast-{teardown}", "teardown",
                         {"teardown": teardown, "call": TEARDOWNS[teardown], "status": "CUDA_SUCCESS", "accepted": None,
                          "set_device": None, "ended": "exit status 0", "finished": True,
                          "stderr_tail": ""}, repeat=r, step="teardown"))
        BLAST += [obs(f"blast-{teardown}", "blast", blast(teardown, lib), repeat=r, step=lib) for lib in LIBRARIES]


def ipc(source: str) -> dict:
    offset = 0 if source == "cuda-bindings" else 512
    return {"source": source, "present": True, "offset": offset, "allocation_size": 2 << 20, "get": "cudaSuccess",
            "same": "cudaErrorDeviceUninitialized",
            "child": {"open": "cudaSuccess", "at_base": "correct" if offset == 0 else
                      "silent-wrong-result (got 8386560, expected 8390656)", "at_offset": "correct",
                      "close": "cudaSuccess"}}


MEMORY: list[Observation] = [
    *(obs("ipc", "ipc", ipc(source), step=source) for source in ("cuda-bindings", "cupy", "torch")),
    obs("vmm", "driver allocations", {"cuMemAlloc": "the primary context", "cuMemCreate+cuMemMap": "none",
                                      "cuMemAllocAsync": "none", "cuMemAllocManaged": "the primary context"},
        step="driver"),
    obs("vmm", "vmm from another context", {"read": "correct", "baseline": "correct"}, step="kernel"),
    obs("vmm", "library allocation", {"library": "jax", "present": True, "version": "0.11.2", "owner": "none"},
        step="jax"),
    obs("vmm", "library allocation", {"library": "cuda-core", "present": True, "version": "1.2.0", "owner": "none"},
        step="cuda-core"),
    obs("vmm-torch-expandable", "library allocation",
        {"library": "torch-expandable", "present": True, "version": "2.11.0", "alloc_conf": "expandable_segments:True",
         "owner": "none", "mapping": "cuMemGetAddressRange -> CUDA_SUCCESS"}, step="torch"),
]

INTEROP: list[Observation] = [*UNDER, *BLAST, *MEMORY]
