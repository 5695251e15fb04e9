"""migrate: host threads hand a context around; does runtime state move with it?

Thread 1 makes a context current, fills CuPy arrays, loads the probe module
and writes its ``__device__`` global, makes a stream, pops the context and
hands it on. Every thread in turn pushes it, checks it sees exactly what
thread 1 recorded and what the previous thread left, changes both, pops and
hands on. Side scenarios, each in its own process: one context current on two
threads at once, a thread that never received the context, CuPy's per-device
caches under a second context, and a kernel dereferencing memory of another
context. ``--context green`` relays a green context (its CUcontext from
cuCtxFromGreenCtx, made by ``ctxlab.cuda.green``) the same way, and adds: two
threads with it current at once (repeated), the SMs its kernels ran on, which
context owns memory allocated under it, and CuPy under it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ctxlab.claim import Claim, Observations, hexed, one, repeats, select, silent_wrong, some, spread
from ctxlab.cuda.green import SOURCE_AS_PRIMARY, SOURCE_ONE_THREAD, SOURCE_PARTITION
from ctxlab.lab import Isolation, Lab, LabOptions, OptionError, Scenario, bounded
from ctxlab.labs.common import skipped_output

NAME = "migrate"
KINDS = ("primary", "created")  # what --context both (the default) relays
GREEN = "green"
CONTEXTS = (*KINDS, GREEN, "both", "all")  # --context: one kind, both (primary and created), all three
ARRAY_LEN = 1 << 13  # 64 KiB: one block reduces it in a few microseconds
GLOBAL_START = 1000
GLOBAL_STEP = 3  # the probe kernel adds this at every handoff
MAX_HANDOFFS = 10_000_000
TIMELINE_HANDOFFS = 8  # handoffs per context kind recorded step by step; the rest are counted

RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API' "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
POINTER_ATTR = ("CUDA Driver API, cuPointerGetAttribute: CU_POINTER_ATTRIBUTE_CONTEXT "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html)")
CTX_MGMT = ("CUDA Driver API, Context Management: cuCtxPushCurrent/cuCtxSetCurrent; Green Contexts: "
            "'a green context can be current to only one thread at a time' "
            "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
ADDRESS_SPACE = ("CUDA Programming Guide, Driver API, Context: 'each context has its own distinct address space' "
                 "(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#context); against CUDA Driver "
                 "API, Unified Addressing: one virtual address space for all allocations of the process "
                 "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html)")
INVALID_CONTEXT = ("CUDA Driver API, CUresult: 'CUDA_ERROR_INVALID_CONTEXT = 201: This most frequently indicates "
                   "that there is no context bound to the current thread' "
                   "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html)")
NO_DOC = "no documentation promises this; recorded as observed"


# ---------------------------------------------------------------- claims

HANDOFF = tuple(f"handoff-{kind}" for kind in KINDS)
CONCURRENT = tuple(f"concurrent-{kind}" for kind in KINDS)
UNBOUND = tuple(f"unbound-{kind}" for kind in KINDS)
GREEN_SCENARIOS = ("handoff-green", "concurrent-green", "green-sm", "green-memory", "green-cupy")


def _within(obs: Observations, scenarios: tuple[str, ...]) -> list:
    """Only the observations of ``scenarios`` (the green scenarios record kinds the others read too)."""
    return [o for o in obs if o.scenario in scenarios]


def _facts_state_travels(obs, scenarios: tuple[str, ...] = HANDOFF):
    summaries = some(_within(obs, scenarios), "handoffs verified")
    lost = [o for o in summaries if o.value["mismatches"] or not o.value["final_ok"]]
    return {"verified": sum(o.value["verified"] for o in summaries),
            "handoffs": sum(o.value["handoffs"] for o in summaries),
            "mismatches": sum(o.value["mismatches"] for o in summaries), "kinds_lost": len(lost),
            "final_ok": sum(bool(o.value["final_ok"]) for o in summaries), "kinds": len(summaries),
            "per_kind": ", ".join(f"{o.scenario}: {o.value['verified']} of {o.value['handoffs']}" for o in summaries),
            "first": next((o.value["first_mismatch"] for o in lost if o.value["first_mismatch"]), "none")}


def _facts_pointer_context(obs):
    allocs = some(_within(obs, HANDOFF + CONCURRENT), "allocation context")
    other = [o.value for o in allocs if o.value["pointer_context"] != o.value["current_context"]]
    return {"allocations": len(allocs), "elsewhere": len(other), "example": other[0] if other else "none"}


def _facts_several_threads(obs):
    both = some(obs, "current on two threads")
    return {"kinds": len(both), "current_on_both": sum(bool(o.value["both_current"]) for o in both),
            "worked_on_both": sum(bool(o.value["both_worked"]) for o in both),
            "globals": ", ".join(f"{o.value['kind']}: {o.value['global']}" for o in both)}


def _facts_cupy_current(obs):
    obs = _within(obs, HANDOFF + CONCURRENT + ("cupy-caches",))
    allocs = some(obs, "cupy allocation")
    first = [f"{o.value['current_before_id']} -> {o.value['current_after_id']}"
             for o in select(obs, "cupy first kernel")]
    parts = [f"first CuPy kernel under a cuCtxCreate context: current context id {spread(first)}"] if first else []
    parts += [f"{o.value['kind']} context, thread {o.value['thread']}: {o.value['outcome']}"
              for o in select(obs, "cupy on a thread sharing the context")]
    return {"allocations": len(allocs),
            "moved": sum(o.value["current_before"] != o.value["current_after"] for o in allocs),
            "elsewhere": sum(o.value["pointer_context"] != o.value["current_before"] for o in allocs),
            "more": "; ".join(parts) or "nothing else recorded"}


def _facts_runtime_binds_primary(obs):
    found = some(obs, "runtime call without context")
    return {"threads": len(found),
            "bound_primary": sum(bool(o.value["bound_primary"]) for o in found),
            "in_primary": sum(bool(o.value["allocation_in_primary"]) for o in found),
            "in_owner_context": sum(bool(o.value["allocation_in_owner"]) for o in found
                                    if o.scenario == "unbound-created"),
            "devices": ", ".join(f"{o.scenario}: device {o.value['runtime_device']} (owner on "
                                 f"{o.value['owner_device']})" for o in found)}


def _facts_driver_without_context(obs):
    found = some(obs, "driver call without context")
    return {"statuses": spread(f"{o.value['call']} -> {o.value['status']}" for o in found),
            "all": [o.value["status"] for o in found]}


def _facts_cupy_pool(obs):
    found = repeats(obs, "cupy pool block reused across contexts", "cupy-caches")
    return {"runs": len(found),
            "reused": spread("reused" if v["same_block"] else "did not reuse" for v in found),
            "block_context_id": spread(v["block_context_id"] for v in found),
            "current_context_id": spread(v["current_context_id"] for v in found),
            "per_context_pool": spread(v["per_context_pool"] for v in found)}


def _facts_cupy_kernels(obs):
    found = some(obs, "cupy cached kernel in other context")
    by_direction: dict[str, list] = {}
    for o in found:
        by_direction.setdefault(f"{o.value['first_used_in']} -> {o.value['launched_in']}", []).append(
            o.value["outcome"])
    return {"outcomes": "; ".join(f"{d}: {spread(v)}" for d, v in by_direction.items()),
            "silent_wrong": silent_wrong(o.value["outcome"] for o in found)}


def _facts_address_space(obs):
    v = one(obs, "cross-context dereference", "cross-context").value
    return {**v, "value_read": hexed(v["value_read"]), "value_written": hexed(v["value_written"])}


# ---------------------------------------------------------------- green contexts (--context green or all)

def _facts_green_state(obs):
    made = one(obs, "green context made", "handoff-green").value
    return {**_facts_state_travels(obs, ("handoff-green",)), "group_sms": made["group_sms"],
            "device_sms": made["device_sms"]}


def _facts_green_two_threads(obs):
    found = repeats(obs, "green current on two threads", "concurrent-green")
    threads = [t for v in found for t in v["threads"].values()]
    launched = sum(t.get("launches_ok", 0) for t in threads)
    tried = sum(t.get("launches_tried", 0) for t in threads)
    return {"runs": len(found), "push": spread(t.get("push") for t in threads),
            "both_current": sum(1 for v in found if all(t.get("current_is_green") for t in v["threads"].values())),
            "launched": launched, "tried": tried,
            "launch_errors": spread(e for t in threads for e in t.get("launch_errors", {})) if tried != launched
            else "none",
            "global": spread(v["global"] for v in found), "expected": spread(v["expected_global"] for v in found),
            "cupy": spread(t.get("cupy") for t in threads),
            "broke": spread(t.get("error") or "none" for t in threads),
            "silent_wrong": silent_wrong([v["global"] for v in found] + [t.get("cupy") for t in threads])}


def _facts_green_sms(obs):
    v = one(obs, "green sm ids", "green-sm").value
    return {key: v[key] for key in ("group_sms", "green_resource_sms", "device_sms", "blocks", "primary_distinct",
                                    "null_stream_distinct", "green_stream_distinct")}


def _owner_name(v: dict) -> str:
    return {v["green"]: "the green context's CUcontext", v["primary"]: "the primary context"}.get(
        v["pointer_context"], "another context")


def _facts_green_memory(obs):
    v = one(obs, "green allocation", "green-memory").value
    return {"owner": _owner_name(v), "owner_id": v["pointer_context_id"], "green_id": v["green_id"],
            "primary_id": v["primary_id"], "same_handle": v["green"] == v["primary"],
            "primary_reads_green": v["primary_reads_green"], "green_reads_primary": v["green_reads_primary"]}


def _facts_green_cupy(obs):
    v = one(obs, "cupy under green", "green-cupy").value
    return {**v, "owner": ("the green context" if v["allocation_owner_id"] == v["green_id"] else
                           "the primary context" if v["allocation_owner_id"] == v["primary_id"] else
                           f"context id {v['allocation_owner_id']}")}


GREEN_CLAIMS = (
    Claim("migrate.green-state-follows-context",
          "A green context's CUcontext (from cuCtxFromGreenCtx) can be popped from one thread and pushed onto "
          "another like a primary context, and runtime state (allocations, __device__ globals, streams) moves with it.",
          SOURCE_AS_PRIMARY, "promise", ("handoff-green",), _facts_green_state,
          "green context of {group_sms} of {device_sms} SMs: {verified} of {handoffs} handoffs verified: {mismatches} "
          "mismatches of pointer context, global address, stream context or values (first: {first}); final array "
          "and global as expected in {final_ok} of {kinds} relays",
          lambda f: f["verified"] == f["handoffs"] and f["mismatches"] == 0 and f["kinds_lost"] == 0),
    Claim("migrate.green-one-thread-at-a-time",
          "What happens when a green context is made current on two threads at once, which the documentation rules "
          "out (does the driver refuse the second thread, and do both threads' results come out right?).",
          SOURCE_ONE_THREAD, "observation", ("concurrent-green",), _facts_green_two_threads,
          "over {runs} run(s), two threads pushed the green context: cuCtxPushCurrent -> {push}; current on both "
          "threads at once in {both_current}; kernel launches from both threads at once: {launched} of {tried} "
          "accepted (errors: {launch_errors}); the global after them: {global} (expected {expected}); a CuPy "
          "reduction on each thread: {cupy}; threads that broke: {broke}; wrong values returned without an error: "
          "{silent_wrong}"),
    Claim("migrate.green-sm-partition",
          "Kernels launched in a green context run only on its partition's SMs: the distinct SMs a launch used are "
          "no more than the SMs of the group the green context was made from.", SOURCE_PARTITION, "promise",
          ("green-sm",), _facts_green_sms,
          "{blocks} blocks recording %smid: in the green context (group of {group_sms} SMs, cuGreenCtxGetDevResource "
          "says {green_resource_sms}) they ran on {null_stream_distinct} distinct SMs from the NULL stream and on "
          "{green_stream_distinct} from a cuGreenCtxStreamCreate stream; in the primary context on "
          "{primary_distinct} of the device's {device_sms}",
          lambda f: all(0 < f[k] <= f["group_sms"] for k in ("null_stream_distinct", "green_stream_distinct"))),
    Claim("migrate.green-allocation-owner",
          "Which context CU_POINTER_ATTRIBUTE_CONTEXT names for memory allocated with a green context current.",
          NO_DOC, "observation", ("green-memory",), _facts_green_memory,
          "cuMemAlloc under the green context: CU_POINTER_ATTRIBUTE_CONTEXT names {owner} (id {owner_id}; the green "
          "context's CUcontext has id {green_id}, the primary context {primary_id}; the same handle: {same_handle})"),
    Claim("migrate.green-memory-shared-with-primary",
          "The green context's CUcontext is treated as the primary context where resources do not matter: memory "
          "allocated under it is used by kernels in the primary context, and the primary context's memory by kernels "
          "in the green context.", SOURCE_AS_PRIMARY, "promise", ("green-memory",), _facts_green_memory,
          "a kernel in the primary context read memory allocated under the green context: {primary_reads_green}; a "
          "kernel in the green context read the primary context's memory: {green_reads_primary}",
          lambda f: f["primary_reads_green"] == f["green_reads_primary"] == "correct"),
    Claim("migrate.green-cupy",
          "What CuPy does with a green context current (does its first kernel move the thread off it, as with "
          "cuCtxCreate contexts?).", NO_DOC, "observation", ("green-cupy",), _facts_green_cupy,
          "with the green context (id {green_id}) current: current context id after a CuPy allocation "
          "{after_alloc_id}, after CuPy's first kernel {after_kernel_id} (primary context: {primary_id}); the "
          "allocation belongs to {owner}; the kernel's result: {kernel}"),
)


CLAIMS = (
    Claim("migrate.state-follows-context",
          "Runtime state (allocations, __device__ globals, streams) belongs to the CUcontext and moves with it "
          "when the context is popped from one thread and pushed onto another.", RUNTIME_INTEROP, "promise",
          HANDOFF, _facts_state_travels,
          "{verified} of {handoffs} handoffs verified ({per_kind}): {mismatches} mismatches of pointer context, "
          "global address, stream context or values (first: {first}); final array and global as expected in "
          "{final_ok} of {kinds} relays",
          lambda f: f["verified"] == f["handoffs"] and f["mismatches"] == 0 and f["kinds_lost"] == 0),
    Claim("migrate.pointer-belongs-to-context",
          "CU_POINTER_ATTRIBUTE_CONTEXT names the context in which an allocation was made.", POINTER_ATTR,
          "promise", HANDOFF + CONCURRENT, _facts_pointer_context,
          "{allocations} cuMemAlloc allocations; {elsewhere} named a context other than the one current when they "
          "were made (first: {example})",
          lambda f: f["elsewhere"] == 0),
    Claim("migrate.current-on-several-threads",
          "A (non-green) context can be current on several host threads at the same time.", CTX_MGMT, "promise",
          CONCURRENT, _facts_several_threads,
          "{kinds} context kind(s) pushed on a second thread while current on the first: current on both in "
          "{current_on_both}, allocations and kernels on both threads worked in {worked_on_both} (global after "
          "two increments: {globals})",
          lambda f: f["current_on_both"] == f["worked_on_both"] == f["kinds"]),
    Claim("migrate.cupy-current-context",
          "What CuPy does with the context current on the calling thread (pushed, created, shared).", NO_DOC,
          "observation", HANDOFF + CONCURRENT + ("cupy-caches",), _facts_cupy_current,
          "{allocations} CuPy allocations: {moved} changed the thread's current context, {elsewhere} landed "
          "outside the context current before the call; {more}"),
    Claim("migrate.runtime-binds-primary",
          "A first runtime call (cudaMalloc) on a thread with no current context makes the primary context of the "
          "device it runs on current there, and allocates in that context (which device that is, is recorded).",
          RUNTIME_INTEROP, "promise", UNBOUND,
          _facts_runtime_binds_primary,
          "{threads} thread(s) with no context made a first runtime call (cudaMalloc): {bound_primary} got their "
          "device's primary context current, {in_primary} allocations belong to it, {in_owner_context} to a "
          "cuCtxCreate context current on another thread ({devices})",
          lambda f: f["bound_primary"] == f["in_primary"] == f["threads"]),
    Claim("migrate.driver-call-without-context",
          "A driver call that needs a context returns CUDA_ERROR_INVALID_CONTEXT on a thread with no context "
          "current ('no context bound to the current thread').", INVALID_CONTEXT, "promise", UNBOUND,
          _facts_driver_without_context, "on a thread that never received the context: {statuses}",
          lambda f: set(f["all"]) == {"CUDA_ERROR_INVALID_CONTEXT"}),
    Claim("migrate.cupy-pool-across-contexts",
          "CuPy's default memory pool under a context other than the primary one.", NO_DOC, "observation",
          ("cupy-caches",), _facts_cupy_pool,
          "over {runs} run(s), CuPy's default pool (per device) {reused} a block freed under a cuCtxCreate context for "
          "a caller in the primary context: the new array belongs to context id {block_context_id}, the current one "
          "is {current_context_id}; with a MemoryPool made under the primary context: {per_context_pool}"),
    Claim("migrate.cupy-kernel-cache-across-contexts",
          "CuPy's compiled-kernel cache when the current context changes.", NO_DOC, "observation",
          ("cupy-caches", "cupy-kernel-reverse"), _facts_cupy_kernels,
          "a CuPy kernel cached under one context, launched under another: {outcomes}; wrong values returned "
          "without an error: {silent_wrong}"),
    Claim("migrate.own-address-space",
          "Each context has its own address space: memory of one context cannot be dereferenced in another.",
          ADDRESS_SPACE, "old-text", ("cross-context",), _facts_address_space,
          "a kernel in context {reader_context_id} dereferenced memory allocated in context {owner_context_id} on "
          "the same device: {outcome}, read {value_read} (written {value_written})",
          lambda f: not f["read_ok"]),
    *GREEN_CLAIMS,
)


# ---------------------------------------------------------------- helpers run in children

def _make_context(kind: str, device: int, green=None) -> int:
    """Make a context of the kind current on this thread (a green one: push ``green``'s CUcontext); its handle."""
    import cupy

    from ctxlab.cuda import driver as drv

    if kind == GREEN:
        drv.push(green.handle)
        return green.handle
    if kind == "primary":
        cupy.cuda.runtime.setDevice(device)  # the runtime binds the primary context (CUDA 12+)
        cupy.cuda.runtime.free(0)
        return drv.current().handle
    return drv.create_context(device)


def _cupy_alloc(rec, step, make, label):
    """Make a CuPy array, recording the context current before and after and the one that owns it."""
    from ctxlab.cuda import driver as drv

    before = drv.current()
    array = make()
    after = drv.current()
    owner = drv.pointer_context(array.data.ptr)
    rec.add(step, "cupy allocation", {"array": label, "pointer": array.data.ptr, "pointer_context": owner,
                                      "pointer_context_id": drv.context_id(owner),
                                      "current_before": before.handle, "current_after": after.handle,
                                      "current_before_id": before.id, "current_after_id": after.id})
    return array


def _driver_alloc(rec, step):
    """cuMemAlloc in the current context: the clean test of CU_POINTER_ATTRIBUTE_CONTEXT."""
    from ctxlab.cuda import driver as drv

    cur = drv.current()
    ptr = drv.mem_alloc(256)
    owner = drv.pointer_context(ptr)
    rec.add(step, "allocation context", {"pointer": ptr, "pointer_context": owner, "current_context": cur.handle,
                                         "device": drv.pointer_device(ptr)})
    return ptr


# The same reduction CuPy compiles into a kernel of its own; its right answer, computed on the host.
FRESH_KERNEL_SUM = round(sum((i * 3.5 + 1.25) ** 0.5 for i in range(64)), 3)


def _fresh_kernel() -> float:
    """A CuPy kernel no other step of the scenario uses: it is compiled and cached where it first runs."""
    import cupy

    a = cupy.arange(64, dtype=cupy.float64)
    return round(float(cupy.sqrt(a * 3.5 + 1.25).sum()), 3)


def _keep_current(rec, step: str, ctx: int, after: str) -> None:
    """If a CuPy call left another context current, record it and put ``ctx`` back."""
    from ctxlab.cuda import driver as drv

    cur = drv.current()
    if cur.handle != ctx:
        rec.add(step, "cupy replaced the current context", {"after": after, "expected": ctx, "found": cur.handle,
                                                           "found_id": cur.id})
        drv.set_current(ctx)


class Relay:
    """migrate's verified relay in a child process: setup on the first thread, then every handoff checked.

    The array is allocated with CuPy and filled from the host. Each handoff reads
    it and the global and changes both with one launch of the probe's
    ``verify_and_update`` kernel on a CuPy stream, which writes what it read into
    mapped host memory. Kernels of our own, launched through the driver into the
    current context, keep CuPy's per-device kernel cache out of the relay (the
    cupy-caches scenario shows what that cache does).
    """

    def __init__(self, device: int, kind: str, threads: int, rounds: int, green=None):
        import numpy

        from ctxlab.cuda.environment import init_driver
        from ctxlab.labs.common import cuda_recorder

        self.driver = init_driver()
        self.device, self.kind, self.rounds, self.green = device, kind, rounds, green
        self.rec = cuda_recorder(scenario=f"handoff-{kind}")
        self.names = [f"worker-{i + 1}" for i in range(threads)]
        self.initial = numpy.arange(ARRAY_LEN, dtype=numpy.int64) * 7 + 11  # known, non-trivial contents
        self.verified = self.mismatches = self.index = 0
        self.first_mismatch: dict | None = None
        self.final_ok = False

    def setup(self, _):
        """Thread 1: the context, a CuPy array, a driver allocation, the probe's global, a stream; then pop."""
        import ctypes

        import cupy

        from ctxlab.cuda import driver as drv
        from ctxlab.cuda.kernels import VERIFY_THREADS, ProbeModule

        rec = self.rec
        self.ctx = ctx = _make_context(self.kind, self.device, self.green)
        self.ctx_id = drv.context_id(ctx)
        rec.add("setup", "context made", {"kind": self.kind, "handle": ctx, "id": self.ctx_id})
        if self.green is not None:
            rec.add("setup", "green context made", {**self.green.info(), "id": self.ctx_id})
        a = _cupy_alloc(rec, "setup", lambda: cupy.empty(ARRAY_LEN, dtype=cupy.int64), "a")
        _keep_current(rec, "setup", ctx, "cupy.empty")
        drv.copy_to_device(a.data.ptr, self.initial.tobytes())
        self.a, self.sum = a, int(self.initial.sum())
        self.dptr = _driver_alloc(rec, "setup")  # a driver allocation, followed like the CuPy one
        # Each handoff checks the allocations still name the context they named at setup: for a primary or
        # created context that is the context itself; for a green one, whatever the driver named (green-memory
        # records which).
        self.a_owner = ctx if self.green is None else drv.pointer_context(a.data.ptr)
        self.d_owner = ctx if self.green is None else drv.pointer_context(self.dptr)
        out = drv.host_alloc_mapped(16)  # what the kernel read, written straight to the host
        self.seen = (ctypes.c_longlong * 2).from_address(out)
        self.probe = probe = ProbeModule.load()
        probe.write_global(GLOBAL_START)
        self.global_value = GLOBAL_START
        stream = cupy.cuda.Stream(non_blocking=True)
        _keep_current(rec, "setup", ctx, "cupy.cuda.Stream")
        self.stream, self.cu_stream = stream, self.driver.CUstream(stream.ptr)
        self.stream_ctx = drv.stream_context(stream.ptr)
        self.launch = probe.packed("verify_and_update",
                                   [(a.data.ptr, ctypes.c_void_p), (ARRAY_LEN, ctypes.c_longlong),
                                    (GLOBAL_STEP, ctypes.c_longlong), (out, ctypes.c_void_p)], 1, VERIFY_THREADS)
        rec.add("setup", "global", {"address": probe.global_address, "value": probe.read_global()})
        rec.add("setup", "stream context", {"stream": stream.ptr, "context": self.stream_ctx})
        popped = drv.pop()
        rec.add("setup", "popped", {"handle": popped, "same": popped == ctx}, context=(None, None))
        self.t0 = time.perf_counter()
        return popped

    def check(self, label: str, seen, expected, r: int) -> bool:
        """One verification; the first mismatches are recorded, all are counted."""
        if seen == expected:
            return True
        self.mismatches += 1
        if self.first_mismatch is None:
            self.first_mismatch = {"check": label, "seen": seen, "expected": expected, "round": r,
                                   "handoff": self.index}
        if self.mismatches <= 64:
            self.rec.add("handoff", "mismatch", {"check": label, "seen": seen, "expected": expected}, round=r)
        return False

    def step(self, r: int):
        """Round ``r``'s handoff: push, verify everything thread 1 and the previous thread left, update, pop."""
        from ctxlab.cuda import driver as drv
        from ctxlab.cuda.errors import check as ok_or_raise

        module_get_global, sync = self.driver.cuModuleGetGlobal, self.driver.cuStreamSynchronize

        def handoff(ctx):
            ok = self.check("no context before push", drv.current().handle, 0, r)
            drv.push(ctx)
            cur = drv.current()
            ok &= self.check("current context", (cur.handle, cur.id), (self.ctx, self.ctx_id), r)
            ok &= self.check("array pointer context", drv.pointer_context(self.a.data.ptr), self.a_owner, r)
            ok &= self.check("driver pointer context", drv.pointer_context(self.dptr), self.d_owner, r)
            address = int(ok_or_raise(module_get_global(self.probe.module, b"probe_global"), "cuModuleGetGlobal")[0])
            ok &= self.check("global address", address, self.probe.global_address, r)
            ok &= self.check("stream context", drv.stream_context(self.cu_stream), self.stream_ctx, r)
            self.launch(self.cu_stream)
            ok_or_raise(sync(self.cu_stream), "cuStreamSynchronize")
            total, value = self.seen
            ok &= self.check("array sum left by the previous thread", total, self.sum, r)
            ok &= self.check("global left by the previous thread", value, self.global_value, r)
            self.sum += ARRAY_LEN
            self.global_value += GLOBAL_STEP
            if self.index < TIMELINE_HANDOFFS:
                self.rec.add("handoff", "verified", {"array_sum": total, "global": value, "all_checks": bool(ok)},
                             round=r)
            else:
                self.rec.discard_events()
            popped = drv.pop()
            ok &= self.check("popped the same context", popped, self.ctx, r)
            self.verified += 1 if ok else 0
            self.index += 1
            return popped

        return handoff

    def finish(self, ctx):
        """The last thread: every element and the global hold exactly what all handoffs added."""
        import numpy

        from ctxlab.cuda import driver as drv

        self.t1 = time.perf_counter()
        total = self.index
        drv.push(ctx)
        final = numpy.frombuffer(drv.copy_from_device(self.a.data.ptr, ARRAY_LEN * 8), dtype=numpy.int64)
        final_global = self.probe.read_global()
        _expect_global = GLOBAL_START + GLOBAL_STEP * total
        every = bool((final == self.initial + total).all())
        self.rec.add("finish", "final values",
                     {"array_sum": int(final.sum()), "expected_sum": int(self.initial.sum()) + ARRAY_LEN * total,
                      "every_element": every, "global": final_global, "expected_global": _expect_global})
        self.final_ok = every and final_global == _expect_global
        drv.pop()
        return ctx

    def steps(self) -> list:
        """Setup on the first thread, every round's handoffs in thread order, the check on the last."""
        from ctxlab.harness.threads import Step

        steps = [Step(self.names[0], "setup", self.setup)]
        for r in range(self.rounds):
            steps += [Step(name, "handoff", self.step(r), round=r) for name in self.names]
        return steps + [Step(self.names[-1], "finish", self.finish)]


def handoff(device: int, kind: str, threads: int, rounds: int, timeout: float, bare: bool = True,
            one_core: bool = True) -> dict:
    """The relay, in a child process: every handoff verified; then bare handoffs for the rate.

    ``one_core``: the relay's threads share one CPU core (see Choreography). Only one of them runs at a
    time, and on a shared core a handoff finds warm caches and no core to wake: on an H200 host 32 threads
    ran about 3x faster so than spread over the cores (labs/migrate.md). The summary records ``one_core``
    (asked for) and ``core`` (the core the threads were pinned to; None where the system refused)."""
    from ctxlab.cuda import driver as drv
    from ctxlab.harness.isolate import report_progress
    from ctxlab.harness.threads import Choreography, relay_steps
    from ctxlab.labs.common import scenario_output

    green = None
    if kind == GREEN:
        from ctxlab.cuda.green import make_or_reason

        green, why = make_or_reason(device)
        if green is None:
            return skipped_output(f"handoff-{kind}", why)
    relay = Relay(device, kind, threads, rounds, green)
    steps = relay.steps()
    total = len(steps) - 2
    choreo = Choreography(relay.names, timeout=timeout, progress=report_progress, progress_every=max(64, total // 50),
                          one_core=one_core)
    ctx = choreo.run(steps)
    relay.rec.add("summary", "handoffs verified",
                  {"verified": relay.verified, "handoffs": total, "mismatches": relay.mismatches,
                   "first_mismatch": relay.first_mismatch, "final_ok": relay.final_ok, "threads": threads,
                   "rounds": rounds, "one_core": one_core, "core": choreo.core}, context=(ctx, relay.ctx_id))
    metrics = {f"{kind}: verified handoffs/s": total / (relay.t1 - relay.t0)}
    if bare:
        def bare_step(c):
            drv.push(c)
            return drv.pop()

        bare_steps = relay_steps(relay.names, rounds, "bare handoff", bare_step)
        t0 = time.perf_counter()
        Choreography(relay.names, timeout=timeout, one_core=one_core).run(bare_steps, ctx)
        metrics[f"{kind}: bare handoffs/s"] = len(bare_steps) / (time.perf_counter() - t0)
    return scenario_output(relay.rec, metrics)


def _driver_work(rec, s: dict, label: str):
    """Thread ``label``'s step: cuMemAlloc in the shared context and one increment of the probe's global."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.errors import CudaError

    def step(ctx):
        try:
            ptr = _driver_alloc(rec, "driver work")
            s["probe"].add_to_global(1)
            drv.synchronize()
            s[label] = {"current": drv.current().handle, "pointer_context": drv.pointer_context(ptr), "ok": True}
        except CudaError as exc:
            s[label] = {"current": drv.current().handle, "ok": False, "error": exc.name}
        rec.add("driver work", "driver work", s[label])
        return ctx

    return step


def _cupy_work(rec, s: dict, kind: str, label: str):
    """Thread ``label``'s step: a CuPy allocation and reduction whose right answer is known."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.outcome import checked

    def step(ctx):
        before = drv.current().handle
        made: dict = {}

        def work():
            made["x"] = cupy.full(1024, 5, dtype=cupy.int32)
            return int((made["x"] * 2).sum())

        outcome = checked(work, 1024 * 10)
        owner = drv.pointer_context(made["x"].data.ptr) if "x" in made else None
        rec.add("cupy work", "cupy on a thread sharing the context",
                {"thread": label, "kind": kind, "outcome": outcome, "current_before": before,
                 "current_after": drv.current().handle, "pointer_context": owner, "context": s["ctx"]})
        return ctx

    return step


def concurrent(device: int, kind: str) -> dict:
    """One context current on two threads at once; both allocate and launch in it."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario=f"concurrent-{kind}")
    s: dict = {}

    def a_make(_):
        s["ctx"] = _make_context(kind, device)
        s["probe"] = ProbeModule.load()
        s["probe"].write_global(0)
        rec.add("make", "context made", {"kind": kind, "id": drv.context_id(s["ctx"])})
        return s["ctx"]

    def b_push(ctx):
        drv.push(ctx)
        rec.add("push", "current", {"handle": drv.current().handle})
        return ctx

    def a_check(ctx):
        still = drv.current().handle
        both = s["A"]["current"] == s["B"]["current"] == still == s["ctx"]
        worked = all(s[t]["ok"] and s[t]["pointer_context"] == s["ctx"] for t in "AB") and \
            s["probe"].read_global() == 2
        rec.add("check", "current on two threads", {"both_current": both, "both_worked": worked, "kind": kind,
                                                    "global": s["probe"].read_global()})
        return ctx

    steps = [Step("A", "make", a_make), Step("B", "push", b_push),
             Step("A", "driver work", _driver_work(rec, s, "A")), Step("B", "driver work", _driver_work(rec, s, "B")),
             Step("A", "check", a_check),
             Step("A", "cupy work", _cupy_work(rec, s, kind, "A")),
             Step("B", "cupy work", _cupy_work(rec, s, kind, "B"))]
    Choreography(["A", "B"], timeout=60).run(steps)
    return scenario_output(rec)


def unbound(device: int, kind: str) -> dict:
    """A thread that never received the context: driver call, then a runtime call."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario=f"unbound-{kind}")
    s: dict = {}

    def owner(_):
        s["ctx"] = _make_context(kind, device)
        rec.add("make", "context made", {"kind": kind, "id": drv.context_id(s["ctx"])})
        return None

    def stranger(_):
        before = drv.current()
        rec.add("before", "current before any call", {"handle": before.handle})
        status = drv.raw_status(init_driver().cuCtxGetId(None), "cuCtxGetId")
        alloc = drv.outcome(drv.mem_alloc, 256, call="cuMemAlloc")
        rec.add("driver", "driver call without context", {"call": "cuMemAlloc", "status": alloc["status"],
                                                          "cuCtxGetId(NULL)": status})
        ptr = cupy.cuda.runtime.malloc(256)  # the first runtime call on this thread
        after = drv.current()
        # The device is per host thread: this one never chose, so the runtime uses its default device.
        runtime_device = cupy.cuda.runtime.getDevice()
        primary = drv.primary_retain(runtime_device)
        drv.primary_release(runtime_device)
        ptr_ctx = drv.pointer_context(ptr)
        rec.add("runtime", "runtime call without context",
                {"call": "cudaMalloc", "current_after": after.handle, "primary": primary,
                 "runtime_device": runtime_device, "owner_device": device,
                 "pointer_context": ptr_ctx, "owner_context": s["ctx"], "bound_primary": after.handle == primary,
                 "allocation_in_primary": ptr_ctx == primary, "allocation_in_owner": ptr_ctx == s["ctx"]})
        cupy.cuda.runtime.free(ptr)
        return None

    Choreography(["owner", "stranger"], timeout=60).run([Step("owner", "make", owner),
                                                        Step("stranger", "call", stranger)])
    return scenario_output(rec)


def cupy_caches(device: int) -> dict:
    """CuPy's per-device memory pool and kernel cache under a cuCtxCreate context."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.outcome import checked
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario="cupy-caches")
    s: dict = {}
    n = 12345  # an odd size, so the block is found by size in the pool

    def created_alloc(_):
        """A cuCtxCreate context; CuPy allocates there and runs its first kernel, then frees to its pool."""
        s["created"] = drv.create_context(device)
        x = _cupy_alloc(rec, "created", lambda: cupy.empty(n, dtype=cupy.float32), "x")
        before = drv.current()
        x.fill(1.5)  # the process's first CuPy kernel
        after = drv.current()
        rec.add("created", "cupy first kernel", {"current_before": before.handle, "current_after": after.handle,
                                                 "current_before_id": before.id, "current_after_id": after.id,
                                                 "switched": before.handle != after.handle})
        s["x_ptr"] = x.data.ptr
        del x  # back to CuPy's pool, still memory of the created context
        return None

    def primary_alloc(_):
        cupy.cuda.runtime.setDevice(device)
        cupy.cuda.runtime.free(0)
        cur = drv.current()
        y = cupy.empty(n, dtype=cupy.float32)
        block_ctx = drv.pointer_context(y.data.ptr)
        # The way out: a pool per context, chosen while that context is current.
        pool = cupy.cuda.MemoryPool()
        with cupy.cuda.using_allocator(pool.malloc):
            z = cupy.empty(n, dtype=cupy.float32)
        z_ctx = drv.pointer_context(z.data.ptr)
        rec.add("primary", "cupy pool block reused across contexts",
                {"same_block": y.data.ptr == s["x_ptr"], "block_context": block_ctx,
                 "block_context_id": drv.context_id(block_ctx), "current_context_id": cur.id,
                 "per_context_pool": "new block in the current context" if z_ctx == cur.handle
                 else f"still another context ({z_ctx:#x})"})
        s["primary"] = cur.handle
        return None

    def kernel_in_primary(_):
        """A kernel first compiled and cached under the created context, then launched under the primary."""
        out = {}
        for ctx_name in ("created", "primary"):
            drv.set_current(s[ctx_name])
            out[ctx_name] = checked(_fresh_kernel, FRESH_KERNEL_SUM)  # a kernel not used before in this process
        rec.add("kernel created->primary", "cupy cached kernel in other context",
                {"first_used_in": "created", "launched_in": "primary", "outcome": out["primary"],
                 "first": out["created"]})
        drv.set_current(0)

    Choreography(["T1", "T2"], timeout=60).run([
        Step("T1", "created", created_alloc), Step("T2", "primary", primary_alloc),
        Step("T1", "kernel", kernel_in_primary),
    ])
    return scenario_output(rec)


def cupy_kernel_reverse(device: int, label: str = "cupy-kernel-reverse") -> dict:
    """A CuPy kernel first compiled and loaded under the primary context, then used under a created one."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario=label)
    cupy.cuda.runtime.setDevice(device)
    first = checked(_fresh_kernel, FRESH_KERNEL_SUM)
    primary = drv.current().handle
    created = drv.create_context(device)
    outcome = checked(_fresh_kernel, FRESH_KERNEL_SUM)
    rec.add("kernel", "cupy cached kernel in other context",
            {"first_used_in": "primary", "launched_in": "created", "outcome": outcome, "first": first,
             "primary": primary, "created": created})
    return scenario_output(rec)


def cross_context(device: int) -> dict:
    """A kernel in one context dereferences memory allocated in another (may leave a sticky error)."""
    import struct

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.errors import CudaError
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario="cross-context")
    owner = drv.create_context(device)
    src = drv.mem_alloc(8)
    written = 0x5EED_CAFE
    drv.copy_to_device(src, struct.pack("<q", written))
    rec.add("owner", "allocated", {"pointer": src, "pointer_context": drv.pointer_context(src)})
    drv.pop()
    reader = drv.create_context(device)
    probe = ProbeModule.load()
    out = drv.mem_alloc(8)
    drv.copy_to_device(out, struct.pack("<q", -1))
    value = None
    try:
        probe.read_through(src, out)
        drv.synchronize()
        value = struct.unpack("<q", drv.copy_from_device(out, 8))[0]
        outcome = "CUDA_SUCCESS"
    except CudaError as exc:
        outcome = exc.name
    rec.add("reader", "cross-context dereference",
            {"owner_context_id": drv.context_id(owner), "reader_context_id": drv.context_id(reader),
             "outcome": outcome, "value_written": written, "value_read": value,
             "read_ok": value == written})
    return scenario_output(rec)


# ---------------------------------------------------------------- green scenarios (children)

GREEN_LAUNCHES = 200  # kernel launches per thread while both threads hold the green context
SMID_BLOCKS = 1024  # blocks of the %smid kernel: more than a 16-SM partition holds at once
SMID_THREADS = 128
SMID_SPIN = 20_000  # clock cycles each block spins, so blocks stay resident and spread over every SM allowed


def _green_or_skip(scenario: str, device: int):
    """``(green context, None)`` or ``(None, the skipped scenario's output)``."""
    from ctxlab.cuda.green import make_or_reason

    green, why = make_or_reason(device)
    return (green, None) if green is not None else (None, skipped_output(scenario, why))


def _green_thread(label: str, green, probe, barrier, out: dict, launches: int) -> None:
    """One of two threads that push the same green context and launch into it at the same time."""
    from collections import Counter

    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.outcome import checked

    mine: dict = {"error": None}
    try:
        mine["push"] = drv.outcome(drv.push, green.handle)["status"]
        mine["current_is_green"] = drv.current().handle == green.handle
        barrier.wait(timeout=30)  # both threads have pushed it: it is current on both now
        statuses = Counter(drv.outcome(probe.add_to_global, 1)["status"] for _ in range(launches))
        mine["launches_tried"], mine["launches_ok"] = launches, statuses.pop("CUDA_SUCCESS", 0)
        mine["launch_errors"] = dict(statuses)
        mine["synchronize"] = drv.outcome(drv.synchronize)["status"]
        barrier.wait(timeout=30)
        mine["cupy"] = checked(lambda: int((cupy.full(1024, 5, dtype=cupy.int32) * 2).sum()), 10240)
        mine["pop"] = drv.outcome(drv.pop)["status"]
    except Exception as exc:  # a broken barrier or a library error: an outcome of this run, recorded
        mine["error"] = f"{type(exc).__name__}: {exc}"
    out[label] = mine


def concurrent_green(device: int, launches: int = GREEN_LAUNCHES) -> dict:
    """A green context current on two threads at once (the documentation rules it out): both launch into it."""
    import threading

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import cuda_recorder, scenario_output

    green, skipped = _green_or_skip("concurrent-green", device)
    if green is None:
        return skipped
    rec = cuda_recorder(scenario="concurrent-green")
    drv.push(green.handle)
    probe = ProbeModule.load()
    probe.write_global(0)
    rec.add("make", "context made", {"kind": GREEN, **green.info(), "id": drv.context_id(green.handle)})
    drv.pop()
    barrier = threading.Barrier(2)
    out: dict = {}
    threads = [threading.Thread(target=_green_thread, args=(name, green, probe, barrier, out, launches), name=name)
               for name in ("A", "B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    hung = [t.name for t in threads if t.is_alive()]
    drv.push(green.handle)
    rec.add("check", "green current on two threads",
            {"threads": {name: out.get(name, {"error": "hung" if name in hung else "no result"}) for name in "AB"},
             "global": checked(probe.read_global, 2 * launches), "expected_global": 2 * launches})
    drv.pop()
    return scenario_output(rec)


def _smids(probe, stream: int, blocks: int) -> list[int]:
    """The distinct SMs that ran the blocks of one %smid launch on ``stream`` in the current context."""
    import ctypes

    import numpy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    driver = init_driver()
    out = drv.mem_alloc(4 * blocks)
    launch = probe.packed("record_smid", [(out, ctypes.c_void_p), (SMID_SPIN, ctypes.c_longlong)], blocks,
                          SMID_THREADS)
    cu_stream = driver.CUstream(stream)
    launch(cu_stream)
    check(driver.cuStreamSynchronize(cu_stream), "cuStreamSynchronize")
    ids = numpy.frombuffer(drv.copy_from_device(out, 4 * blocks), dtype=numpy.uint32)
    check(driver.cuMemFree(out), "cuMemFree")
    return sorted({int(i) for i in ids})


def green_sm(device: int, blocks: int = SMID_BLOCKS) -> dict:
    """Which SMs a kernel's blocks ran on: in the primary context, then in the green context (NULL stream and
    a cuGreenCtxStreamCreate stream)."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda import green as greens
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.labs.common import cuda_recorder, scenario_output

    green, skipped = _green_or_skip("green-sm", device)
    if green is None:
        return skipped
    rec = cuda_recorder(scenario="green-sm")
    drv.push(drv.primary_retain(device))  # the primary context is active: the green context retains it
    in_primary = _smids(ProbeModule.load(), 0, blocks)
    drv.pop()
    drv.push(green.handle)
    probe = ProbeModule.load()
    null_stream = _smids(probe, 0, blocks)
    green_stream = _smids(probe, greens.stream_create(green), blocks)
    rec.add("launch", "green sm ids",
            {**green.info(), "green_resource_sms": greens.resource_sms(green), "blocks": blocks,
             "primary_distinct": len(in_primary), "null_stream_distinct": len(null_stream),
             "green_stream_distinct": len(green_stream), "null_stream_sms": null_stream,
             "green_stream_sms": green_stream})
    drv.pop()
    return scenario_output(rec)


def _read_with(probe, src: int) -> int:
    """What a kernel of ``probe``'s context reads at ``src`` (through read_through, into memory of that context)."""
    import struct

    from ctxlab.cuda import driver as drv

    out = drv.mem_alloc(8)
    drv.copy_to_device(out, struct.pack("<q", -1))
    probe.read_through(src, out)
    drv.synchronize()
    return struct.unpack("<q", drv.copy_from_device(out, 8))[0]


def green_memory(device: int) -> dict:
    """Which context owns memory allocated under the green context; kernels of the primary context and the
    green context each read the other's memory."""
    import struct

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import cuda_recorder, scenario_output

    green, skipped = _green_or_skip("green-memory", device)
    if green is None:
        return skipped
    rec = cuda_recorder(scenario="green-memory")
    in_green, in_primary = 0x6EE2_0001, 0x9A1_0002
    primary = drv.primary_retain(device)
    drv.push(green.handle)
    g_ptr = drv.mem_alloc(8)
    drv.copy_to_device(g_ptr, struct.pack("<q", in_green))
    owner = drv.pointer_context(g_ptr)
    green_probe = ProbeModule.load()
    drv.pop()
    drv.push(primary)
    p_ptr = drv.mem_alloc(8)
    drv.copy_to_device(p_ptr, struct.pack("<q", in_primary))
    primary_probe = ProbeModule.load()
    primary_reads = checked(lambda: _read_with(primary_probe, g_ptr), in_green)
    drv.pop()
    drv.push(green.handle)
    green_reads = checked(lambda: _read_with(green_probe, p_ptr), in_primary)
    drv.pop()
    rec.add("memory", "green allocation",
            {"pointer": g_ptr, "pointer_context": owner, "pointer_context_id": drv.outcome(drv.context_id, owner)
             .get("value"), "green": green.handle, "green_id": drv.context_id(green.handle), "primary": primary,
             "primary_id": drv.context_id(primary), "primary_reads_green": primary_reads,
             "green_reads_primary": green_reads})
    return scenario_output(rec)


def green_cupy(device: int) -> dict:
    """CuPy with the green context current: an allocation, then CuPy's first kernel; does the thread stay on it?"""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import cuda_recorder, scenario_output

    green, skipped = _green_or_skip("green-cupy", device)
    if green is None:
        return skipped
    rec = cuda_recorder(scenario="green-cupy")
    primary = drv.primary_retain(device)
    drv.push(green.handle)
    before = drv.current()
    x = cupy.empty(4096, dtype=cupy.float32)
    after_alloc = drv.current()
    kernel = checked(_fresh_kernel, FRESH_KERNEL_SUM)  # the process's first CuPy kernel
    after_kernel = drv.current()
    owner = drv.pointer_context(x.data.ptr)
    rec.add("green", "cupy under green",
            {"green_id": drv.context_id(green.handle), "primary_id": drv.context_id(primary),
             "current_before_id": before.id, "after_alloc_id": after_alloc.id, "after_kernel_id": after_kernel.id,
             "allocation_owner_id": drv.outcome(drv.context_id, owner).get("value"), "kernel": kernel})
    drv.set_current(0)
    return scenario_output(rec)


# ---------------------------------------------------------------- the lab

@dataclass(frozen=True)
class MigrateOptions(LabOptions):
    """migrate's options: how many threads relay the context, how often, which kind of context."""

    threads: int = field(default=4, metadata=bounded(1, 1024))
    rounds: int = field(default=3, metadata=bounded(1, 1_000_000))
    context: str = "both"  # primary, created, green, both (primary and created) or all three
    timeout: float = field(default=30.0, metadata=bounded(0.1, 3600))  # one handoff's watchdog

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context not in CONTEXTS:
            problem = f"{self.context!r} is not one of {', '.join(CONTEXTS)}"
            raise OptionError(f"context: {problem}", cli=f"--context: {problem}")
        if self.threads * self.rounds > MAX_HANDOFFS:
            problem = f"= {self.threads * self.rounds:,} handoffs is more than {MAX_HANDOFFS:,}"
            raise OptionError(f"threads x rounds {problem}", cli=f"--threads x --rounds {problem}")


def scenarios(options: MigrateOptions) -> list[Scenario]:
    """The relay for each chosen kind, its side scenarios, and the CuPy and cross-context ones."""
    here, device = "ctxlab.labs.migrate", options.device
    kinds = {"both": KINDS, "all": (*KINDS, GREEN)}.get(options.context, (options.context,))
    # A generous floor plus what the slowest plausible rate would need.
    relay_timeout = 120 + options.threads * options.rounds * 0.002
    out = []
    for kind in kinds:
        if kind == GREEN:
            out += [
                Scenario("handoff-green", f"{here}:handoff",
                         (device, kind, options.threads, options.rounds, options.timeout), timeout=relay_timeout,
                         isolation=Isolation.GPU_ALONE, reports_progress=True),
                # Current on two threads, which the documentation rules out: repeated, each run in a fresh process.
                Scenario("concurrent-green", f"{here}:concurrent_green", (device,), undefined=True),
                Scenario("green-sm", f"{here}:green_sm", (device,), isolation=Isolation.GPU_ALONE),
                Scenario("green-memory", f"{here}:green_memory", (device,)),
                Scenario("green-cupy", f"{here}:green_cupy", (device,)),
            ]
            continue
        out += [
            Scenario(f"handoff-{kind}", f"{here}:handoff",
                     (device, kind, options.threads, options.rounds, options.timeout), timeout=relay_timeout,
                     isolation=Isolation.GPU_ALONE, reports_progress=True),  # it measures rates
            Scenario(f"concurrent-{kind}", f"{here}:concurrent", (device, kind)),
            Scenario(f"unbound-{kind}", f"{here}:unbound", (device, kind)),
        ]
    return out + [Scenario("cupy-caches", f"{here}:cupy_caches", (device,), undefined=True),
                  Scenario("cupy-kernel-reverse", f"{here}:cupy_kernel_reverse", (device,), undefined=True),
                  Scenario("cross-context", f"{here}:cross_context", (device,))]


LAB = Lab(NAME, "If a context belongs to a host thread, how do other threads reach it, and do pointers, "
                "__device__ globals and streams follow it?", MigrateOptions, CLAIMS, scenarios)
