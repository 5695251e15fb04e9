"""migrate: host threads hand a context around; does runtime state move with it?

Thread 1 makes a context current, fills CuPy arrays, loads the probe module
and writes its ``__device__`` global, makes a stream, pops the context and
hands it on. Every thread in turn pushes it, checks it sees exactly what
thread 1 recorded and what the previous thread left, changes both, pops and
hands on. Side scenarios, each in its own process: one context current on two
threads at once, a thread that never received the context, CuPy's per-device
caches under a second context, and a kernel dereferencing memory of another
context.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ctxlab.claim import Claim, hexed, one, repeats, select, silent_wrong, some, spread
from ctxlab.lab import Isolation, Lab, LabOptions, OptionError, Scenario, bounded

NAME = "migrate"
KINDS = ("primary", "created")
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


def _facts_state_travels(obs):
    summaries = some(obs, "handoffs verified")
    lost = [o for o in summaries if o.value["mismatches"] or not o.value["final_ok"]]
    return {"verified": sum(o.value["verified"] for o in summaries),
            "handoffs": sum(o.value["handoffs"] for o in summaries),
            "mismatches": sum(o.value["mismatches"] for o in summaries), "kinds_lost": len(lost),
            "final_ok": sum(bool(o.value["final_ok"]) for o in summaries), "kinds": len(summaries),
            "per_kind": ", ".join(f"{o.scenario}: {o.value['verified']} of {o.value['handoffs']}" for o in summaries),
            "first": next((o.value["first_mismatch"] for o in lost if o.value["first_mismatch"]), None)}


def _facts_pointer_context(obs):
    allocs = some(obs, "allocation context")
    other = [o.value for o in allocs if o.value["pointer_context"] != o.value["current_context"]]
    return {"allocations": len(allocs), "elsewhere": len(other), "example": other[0] if other else None}


def _facts_several_threads(obs):
    both = some(obs, "current on two threads")
    return {"kinds": len(both), "current_on_both": sum(bool(o.value["both_current"]) for o in both),
            "worked_on_both": sum(bool(o.value["both_worked"]) for o in both),
            "globals": ", ".join(f"{o.value['kind']}: {o.value['global']}" for o in both)}


def _facts_cupy_current(obs):
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
          "A runtime call on a thread with no current context binds the primary context of that thread's current "
          "device (device 0 unless the thread chose another).", RUNTIME_INTEROP, "promise", UNBOUND,
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
)


# ---------------------------------------------------------------- helpers run in children

def _make_context(kind: str, device: int) -> int:
    """Make a context of the kind current on this thread; return its handle."""
    import cupy

    from ctxlab.cuda import driver as drv

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

    def __init__(self, device: int, kind: str, threads: int, rounds: int):
        import numpy

        from ctxlab.cuda.environment import init_driver
        from ctxlab.labs.common import cuda_recorder

        self.driver = init_driver()
        self.device, self.kind, self.rounds = device, kind, rounds
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
        self.ctx = ctx = _make_context(self.kind, self.device)
        self.ctx_id = drv.context_id(ctx)
        rec.add("setup", "context made", {"kind": self.kind, "handle": ctx, "id": self.ctx_id})
        a = _cupy_alloc(rec, "setup", lambda: cupy.empty(ARRAY_LEN, dtype=cupy.int64), "a")
        _keep_current(rec, "setup", ctx, "cupy.empty")
        drv.copy_to_device(a.data.ptr, self.initial.tobytes())
        self.a, self.sum = a, int(self.initial.sum())
        self.dptr = _driver_alloc(rec, "setup")  # a driver allocation, followed like the CuPy one
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
            ok &= self.check("array pointer context", drv.pointer_context(self.a.data.ptr), self.ctx, r)
            ok &= self.check("driver pointer context", drv.pointer_context(self.dptr), self.ctx, r)
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


def handoff(device: int, kind: str, threads: int, rounds: int, timeout: float, bare: bool = True) -> dict:
    """The relay, in a child process: every handoff verified; then bare handoffs for the rate."""
    from ctxlab.cuda import driver as drv
    from ctxlab.harness.isolate import report_progress
    from ctxlab.harness.threads import Choreography, relay_steps
    from ctxlab.labs.common import scenario_output

    relay = Relay(device, kind, threads, rounds)
    steps = relay.steps()
    total = len(steps) - 2
    choreo = Choreography(relay.names, timeout=timeout, progress=report_progress, progress_every=max(64, total // 50))
    ctx = choreo.run(steps)
    relay.rec.add("summary", "handoffs verified",
                  {"verified": relay.verified, "handoffs": total, "mismatches": relay.mismatches,
                   "first_mismatch": relay.first_mismatch, "final_ok": relay.final_ok, "threads": threads,
                   "rounds": rounds}, context=(ctx, relay.ctx_id))
    metrics = {f"{kind}: verified handoffs/s": total / (relay.t1 - relay.t0)}
    if bare:
        def bare_step(c):
            drv.push(c)
            return drv.pop()

        bare_steps = relay_steps(relay.names, rounds, "bare handoff", bare_step)
        t0 = time.perf_counter()
        Choreography(relay.names, timeout=timeout).run(bare_steps, ctx)
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


# ---------------------------------------------------------------- the lab

@dataclass(frozen=True)
class MigrateOptions(LabOptions):
    """migrate's options: how many threads relay the context, how often, which kind of context."""

    threads: int = field(default=4, metadata=bounded(1, 1024))
    rounds: int = field(default=3, metadata=bounded(1, 1_000_000))
    context: str = "both"
    timeout: float = field(default=30.0, metadata=bounded(0.1, 3600))  # one handoff's watchdog

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context not in (*KINDS, "both"):
            raise OptionError(f"--context: {self.context!r} is not one of {', '.join((*KINDS, 'both'))}")
        if self.threads * self.rounds > MAX_HANDOFFS:
            raise OptionError(f"--threads x --rounds = {self.threads * self.rounds:,} handoffs is more than "
                              f"{MAX_HANDOFFS:,}")


def scenarios(options: MigrateOptions) -> list[Scenario]:
    """The relay for each chosen kind, its side scenarios, and the CuPy and cross-context ones."""
    here, device = "ctxlab.labs.migrate", options.device
    kinds = KINDS if options.context == "both" else (options.context,)
    # A generous floor plus what the slowest plausible rate would need.
    relay_timeout = 120 + options.threads * options.rounds * 0.002
    out = []
    for kind in kinds:
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
