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

from ctxlab.claims import Claim, MissingObservation, documented, one, select

NAME = "migrate"
KINDS = ("primary", "created")
ARRAY_LEN = 1 << 13  # 64 KiB: one block reduces it in a few microseconds
GLOBAL_START = 1000
GLOBAL_STEP = 3  # the probe kernel adds this at every handoff
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
NO_DOC = "no documentation promises this; recorded as observed"


# ---------------------------------------------------------------- claims

def _handoffs(obs):
    found = select(obs, "handoffs verified")
    if not found:
        raise MissingObservation("handoffs verified")
    return found


def judge_state_travels(obs):
    summaries = _handoffs(obs)
    bad = [o for o in summaries if o.value["mismatches"] or not o.value["final_ok"]]
    total = sum(o.value["verified"] for o in summaries)
    kinds = ", ".join(f"{o.scenario}: {o.value['verified']} handoffs" for o in summaries)
    if bad:
        first = bad[0].value
        return "fails", f"{len(bad)} context kind(s) lost state; first: {first.get('first_mismatch')}"
    return "holds", (f"{total} handoffs across {len(summaries)} context kind(s) ({kinds}): pointers, global "
                     f"address, stream context and values all as the previous thread left them")


def judge_pointer_context(obs):
    allocs = select(obs, "allocation context")
    if not allocs:
        raise MissingObservation("allocation context")
    bad = [o for o in allocs if o.value["pointer_context"] != o.value["current_context"]]
    return documented(not bad, f"{len(allocs)} allocations each name the context current when they were made",
                      f"{len(bad)} allocations name another context, e.g. {bad[0].value if bad else ''}")


def judge_several_threads(obs):
    both = select(obs, "current on two threads")
    if not both:
        raise MissingObservation("current on two threads")
    ok = [o for o in both if o.value["both_current"] and o.value["both_worked"]]
    return documented(len(ok) == len(both),
                      f"{len(both)} context kind(s) were current on two threads at once and both threads "
                      f"allocated and ran kernels in them",
                      f"not on both threads at once: {[o.value for o in both if o not in ok]}")


def judge_cupy_current(obs):
    allocs = select(obs, "cupy allocation")
    shared = select(obs, "cupy on a thread sharing the context")
    if not allocs:
        raise MissingObservation("cupy allocation")
    moved = [o for o in allocs if o.value["current_before"] != o.value["current_after"]]
    elsewhere = [o for o in allocs if o.value["pointer_context"] != o.value["current_before"]]
    parts = [f"{len(allocs)} CuPy allocations: {len(moved)} changed the thread's current context, "
             f"{len(elsewhere)} landed outside the context current before the call"]
    parts += [f"first CuPy kernel under a cuCtxCreate context: current context id {o.value['current_before_id']} "
              f"-> {o.value['current_after_id']}" for o in select(obs, "cupy first kernel")]
    parts += [f"{o.value['kind']} context, thread {o.value['thread']}: {o.value['outcome']}" for o in shared]
    return "observed", "; ".join(parts)


def judge_runtime_binds_primary(obs):
    found = select(obs, "runtime call without context")
    if not found:
        raise MissingObservation("runtime call without context")
    bad = [o for o in found if not (o.value["bound_primary"] and o.value["allocation_in_primary"])]
    devices = sorted({o.value.get("runtime_device", 0) for o in found})
    other = [o for o in found if o.value.get("runtime_device", 0) != o.value.get("owner_device", 0)]
    return documented(not bad, f"a thread with no context current got the primary context of device "
                               f"{', '.join(map(str, devices))} (its own current device) from its first runtime call, "
                               f"and the allocation belongs to it"
                      + ("; with a cuCtxCreate context current elsewhere, the runtime silently used the primary"
                         if any(o.scenario == "unbound-created" for o in found) else "")
                      + (f"; the owner thread used device {other[0].value['owner_device']}: a new thread does not "
                         f"inherit it" if other else ""),
                      f"the runtime bound something else: {bad[0].value if bad else ''}")


def judge_driver_without_context(obs):
    o = one(obs, "driver call without context")
    return "observed", f"on a thread that never received the context: {o.value['call']} -> {o.value['status']}"


def judge_cupy_pool(obs):
    o = one(obs, "cupy pool block reused across contexts")
    v = o.value
    if v["same_block"]:
        return "observed", (f"CuPy's default pool (per device) handed a block freed under the cuCtxCreate context to a "
                            f"primary-context caller: the new array belongs to context id {v['block_context_id']}, not "
                            f"the current {v['current_context_id']}; a MemoryPool per context avoids it: "
                            f"{v['per_context_pool']}")
    return "observed", f"CuPy's pool did not reuse the block across contexts: {v}"


def judge_cupy_kernels(obs):
    found = select(obs, "cupy cached kernel in other context")
    if not found:
        raise MissingObservation("cupy cached kernel in other context")
    parts = [f"{o.value['first_used_in']} -> {o.value['launched_in']}: {o.value['outcome']}" for o in found]
    return "observed", "CuPy kernel cached under one context, launched under another: " + "; ".join(parts)


def judge_address_space(obs):
    o = one(obs, "cross-context dereference")
    v = o.value
    if v["read_ok"]:
        return "changed", (f"a kernel in context {v['reader_context_id']} read memory allocated in context "
                           f"{v['owner_context_id']} on the same device and got {v['value_read']:#x} (written "
                           f"{v['value_written']:#x}): one unified address space per process, as the Unified "
                           f"Addressing documentation says, not one per context")
    return "holds", f"the kernel in the other context could not dereference the pointer: {v['outcome']}"


CLAIMS = (
    Claim("migrate.state-follows-context",
          "Runtime state (allocations, __device__ globals, streams) belongs to the CUcontext and moves with it "
          "when the context is popped from one thread and pushed onto another.", RUNTIME_INTEROP,
          judge_state_travels),
    Claim("migrate.pointer-belongs-to-context",
          "CU_POINTER_ATTRIBUTE_CONTEXT names the context in which an allocation was made.", POINTER_ATTR,
          judge_pointer_context),
    Claim("migrate.current-on-several-threads",
          "A (non-green) context can be current on several host threads at the same time.", CTX_MGMT,
          judge_several_threads),
    Claim("migrate.cupy-current-context",
          "What CuPy does with the context current on the calling thread (pushed, created, shared).", NO_DOC,
          judge_cupy_current),
    Claim("migrate.runtime-binds-primary",
          "A runtime call on a thread with no current context binds the primary context of that thread's current "
          "device (device 0 unless the thread chose another).",
          RUNTIME_INTEROP, judge_runtime_binds_primary),
    Claim("migrate.driver-call-without-context",
          "What a driver call needing a context returns on a thread that never received one.", NO_DOC,
          judge_driver_without_context),
    Claim("migrate.cupy-pool-across-contexts",
          "CuPy's default memory pool under a context other than the primary one.", NO_DOC, judge_cupy_pool),
    Claim("migrate.cupy-kernel-cache-across-contexts",
          "CuPy's compiled-kernel cache when the current context changes.", NO_DOC, judge_cupy_kernels),
    Claim("migrate.own-address-space",
          "Each context has its own address space: memory of one context cannot be dereferenced in another.",
          ADDRESS_SPACE, judge_address_space),
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


def _keep_current(rec, step: str, ctx: int, after: str) -> None:
    """If a CuPy call left another context current, record it and put ``ctx`` back."""
    from ctxlab.cuda import driver as drv

    cur = drv.current()
    if cur.handle != ctx:
        rec.add(step, "cupy replaced the current context", {"after": after, "expected": ctx, "found": cur.handle,
                                                           "found_id": cur.id})
        drv.set_current(ctx)


def handoff(device: int, kind: str, threads: int, rounds: int, timeout: float, bare: bool = True) -> dict:
    """The relay, in a child process: every handoff verified; then bare handoffs for the rate.

    The array is allocated with CuPy and filled from the host. Each handoff reads
    it and the global and changes both with one launch of the probe's
    ``verify_and_update`` kernel on a CuPy stream, which writes what it read into
    mapped host memory. Kernels of our own, launched through the driver into the
    current context, keep CuPy's per-device kernel cache out of the relay (the
    cupy-caches scenario shows what that cache does).
    """
    import ctypes

    import cupy
    import numpy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check as ok_or_raise
    from ctxlab.cuda.kernels import VERIFY_THREADS, ProbeModule
    from ctxlab.harness.isolate import report_progress
    from ctxlab.harness.threads import Choreography, Step, relay_steps
    from ctxlab.labs.common import cuda_recorder, scenario_output

    driver = init_driver()
    rec = cuda_recorder(scenario=f"handoff-{kind}")
    names = [f"worker-{i + 1}" for i in range(threads)]
    s: dict = {"verified": 0, "mismatches": 0, "first_mismatch": None, "index": 0}
    initial = numpy.arange(ARRAY_LEN, dtype=numpy.int64) * 7 + 11  # known, non-trivial contents

    def setup(_):
        ctx = _make_context(kind, device)
        s["ctx"], s["ctx_id"] = ctx, drv.context_id(ctx)
        rec.add("setup", "context made", {"kind": kind, "handle": ctx, "id": s["ctx_id"]})
        a = _cupy_alloc(rec, "setup", lambda: cupy.empty(ARRAY_LEN, dtype=cupy.int64), "a")
        _keep_current(rec, "setup", ctx, "cupy.empty")
        drv.copy_to_device(a.data.ptr, initial.tobytes())
        s["a"], s["sum"] = a, int(initial.sum())
        s["dptr"] = _driver_alloc(rec, "setup")  # a driver allocation, followed like the CuPy one
        s["out"] = drv.host_alloc_mapped(16)  # what the kernel read, written straight to the host
        s["seen"] = (ctypes.c_longlong * 2).from_address(s["out"])
        probe = ProbeModule.load()
        probe.write_global(GLOBAL_START)
        s["probe"], s["global"] = probe, GLOBAL_START
        stream = cupy.cuda.Stream(non_blocking=True)
        _keep_current(rec, "setup", ctx, "cupy.cuda.Stream")
        s["stream"], s["cu_stream"] = stream, driver.CUstream(stream.ptr)
        s["stream_ctx"] = drv.stream_context(stream.ptr)
        s["handoff"] = probe.packed("verify_and_update",
                                    [(a.data.ptr, ctypes.c_void_p), (ARRAY_LEN, ctypes.c_longlong),
                                     (GLOBAL_STEP, ctypes.c_longlong), (s["out"], ctypes.c_void_p)],
                                    1, VERIFY_THREADS)
        rec.add("setup", "global", {"address": probe.global_address, "value": probe.read_global()})
        rec.add("setup", "stream context", {"stream": stream.ptr, "context": s["stream_ctx"]})
        popped = drv.pop()
        rec.add("setup", "popped", {"handle": popped, "same": popped == ctx}, context=(None, None))
        s["t0"] = time.perf_counter()
        return popped

    def check(label, seen, expected, r):
        if seen != expected:
            s["mismatches"] += 1
            if s["first_mismatch"] is None:
                s["first_mismatch"] = {"check": label, "seen": seen, "expected": expected, "round": r,
                                       "handoff": s["index"]}
            if s["mismatches"] <= 64:
                rec.add("handoff", "mismatch", {"check": label, "seen": seen, "expected": expected}, round=r)
            return False
        return True

    module_get_global = driver.cuModuleGetGlobal
    sync = driver.cuStreamSynchronize

    def make_step(r):
        def step(ctx):
            before = drv.current()
            ok = check("no context before push", before.handle, 0, r)
            drv.push(ctx)
            cur = drv.current()
            ok &= check("current context", (cur.handle, cur.id), (s["ctx"], s["ctx_id"]), r)
            ok &= check("array pointer context", drv.pointer_context(s["a"].data.ptr), s["ctx"], r)
            ok &= check("driver pointer context", drv.pointer_context(s["dptr"]), s["ctx"], r)
            address = int(ok_or_raise(module_get_global(s["probe"].module, b"probe_global"), "cuModuleGetGlobal")[0])
            ok &= check("global address", address, s["probe"].global_address, r)
            stream = s["cu_stream"]
            ok &= check("stream context", drv.stream_context(stream), s["stream_ctx"], r)
            s["handoff"](stream)
            ok_or_raise(sync(stream), "cuStreamSynchronize")
            total, value = s["seen"]
            ok &= check("array sum left by the previous thread", total, s["sum"], r)
            ok &= check("global left by the previous thread", value, s["global"], r)
            s["sum"] += ARRAY_LEN
            s["global"] += GLOBAL_STEP
            if s["index"] < TIMELINE_HANDOFFS:
                rec.add("handoff", "verified", {"array_sum": total, "global": value, "all_checks": bool(ok)}, round=r)
            else:
                rec.discard_events()
            popped = drv.pop()
            ok &= check("popped the same context", popped, s["ctx"], r)
            s["verified"] += 1 if ok else 0
            s["index"] += 1
            return popped
        return step

    steps = [Step(names[0], "setup", setup)]
    for r in range(rounds):
        steps += [Step(name, "handoff", make_step(r), round=r) for name in names]
    total = len(steps) - 1

    def finish(ctx):
        s["t1"] = time.perf_counter()
        drv.push(ctx)
        final = numpy.frombuffer(drv.copy_from_device(s["a"].data.ptr, ARRAY_LEN * 8), dtype=numpy.int64)
        final_global = s["probe"].read_global()
        expect_global = GLOBAL_START + GLOBAL_STEP * total
        rec.add("finish", "final values", {"array_sum": int(final.sum()), "expected_sum": int(initial.sum()) + ARRAY_LEN * total,
                                           "every_element": bool((final == initial + total).all()),
                                           "global": final_global, "expected_global": expect_global})
        s["final_ok"] = bool((final == initial + total).all()) and final_global == expect_global
        drv.pop()
        return ctx

    steps.append(Step(names[-1], "finish", finish))
    choreo = Choreography(names, timeout=timeout, progress=report_progress, progress_every=max(64, total // 50))
    ctx = choreo.run(steps)
    rec.add("summary", "handoffs verified",
            {"verified": s["verified"], "handoffs": total, "mismatches": s["mismatches"],
             "first_mismatch": s["first_mismatch"], "final_ok": s["final_ok"], "threads": threads,
             "rounds": rounds}, context=(ctx, s["ctx_id"]))
    metrics = {f"{kind}: verified handoffs/s": total / (s["t1"] - s["t0"])}
    if bare:
        def bare_step(c):
            drv.push(c)
            return drv.pop()

        bare_steps = relay_steps(names, rounds, "bare handoff", bare_step)
        t0 = time.perf_counter()
        Choreography(names, timeout=timeout).run(bare_steps, ctx)
        metrics[f"{kind}: bare handoffs/s"] = len(bare_steps) / (time.perf_counter() - t0)
    return scenario_output(rec, metrics)


def concurrent(device: int, kind: str) -> dict:
    """One context current on two threads at once; both allocate and launch in it."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.errors import CudaError, from_exception
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

    def driver_work(label):
        def step(ctx):
            try:
                ptr = _driver_alloc(rec, "driver work")
                s["probe"].add_to_global(1)
                drv.synchronize()
                s[label] = {"current": drv.current().handle, "pointer_context": drv.pointer_context(ptr),
                            "ok": True}
            except CudaError as exc:
                s[label] = {"current": drv.current().handle, "ok": False, "error": exc.name}
            rec.add("driver work", "driver work", s[label])
            return ctx
        return step

    def cupy_work(label):
        def step(ctx):
            before = drv.current().handle
            try:
                x = cupy.full(1024, 5, dtype=cupy.int32)
                outcome = f"ok (sum {int((x * 2).sum())})"
                owner = drv.pointer_context(x.data.ptr)
            except Exception as exc:
                err = from_exception(exc)
                outcome, owner = (err.name if err else f"{type(exc).__name__}: {exc}"), None
            rec.add("cupy work", "cupy on a thread sharing the context",
                    {"thread": label, "kind": kind, "outcome": outcome, "current_before": before,
                     "current_after": drv.current().handle, "pointer_context": owner, "context": s["ctx"]})
            return ctx
        return step

    def a_check(ctx):
        still = drv.current().handle
        both = s["A"]["current"] == s["B"]["current"] == still == s["ctx"]
        worked = all(s[t]["ok"] and s[t]["pointer_context"] == s["ctx"] for t in "AB") and \
            s["probe"].read_global() == 2
        rec.add("check", "current on two threads", {"both_current": both, "both_worked": worked, "kind": kind,
                                                    "global": s["probe"].read_global()})
        return ctx

    steps = [Step("A", "make", a_make), Step("B", "push", b_push), Step("A", "driver work", driver_work("A")),
             Step("B", "driver work", driver_work("B")), Step("A", "check", a_check),
             Step("A", "cupy work", cupy_work("A")), Step("B", "cupy work", cupy_work("B"))]
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
    from ctxlab.cuda.errors import from_exception
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario="cupy-caches")
    s: dict = {}
    n = 12345  # an odd size, so the block is found by size in the pool

    def created_alloc(_):
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

    def kernel(first, then, label):
        def step(_):
            out = {}
            for ctx_name in (first, then):
                drv.set_current(s[ctx_name])
                try:
                    a = cupy.arange(64, dtype=cupy.float64)
                    value = float(cupy.sqrt(a * 3.5 + 1.25).sum())  # a kernel not used before in this process
                    out[ctx_name] = f"ok ({value:.3f})"
                except Exception as exc:
                    err = from_exception(exc)
                    out[ctx_name] = err.name if err else f"{type(exc).__name__}: {exc}"
            rec.add(label, "cupy cached kernel in other context",
                    {"first_used_in": first, "launched_in": then, "outcome": out[then], "first": out[first]})
            drv.set_current(0)
            return None
        return step

    Choreography(["T1", "T2"], timeout=60).run([
        Step("T1", "created", created_alloc), Step("T2", "primary", primary_alloc),
        Step("T1", "kernel", kernel("created", "primary", "kernel created->primary")),
    ])
    return scenario_output(rec)


def cupy_kernel_reverse(device: int, label: str = "cupy-kernel-reverse") -> dict:
    """A CuPy kernel first compiled and loaded under the primary context, then used under a created one."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.errors import from_exception
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder(scenario=label)
    cupy.cuda.runtime.setDevice(device)
    a = cupy.arange(64, dtype=cupy.float64)
    first = f"ok ({float(cupy.sqrt(a * 3.5 + 1.25).sum()):.3f})"
    primary = drv.current().handle
    created = drv.create_context(device)
    try:
        b = cupy.arange(64, dtype=cupy.float64)
        outcome = f"ok ({float(cupy.sqrt(b * 3.5 + 1.25).sum()):.3f})"
    except Exception as exc:
        err = from_exception(exc)
        outcome = err.name if err else f"{type(exc).__name__}: {exc}"
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

def run(options: dict, progress=None, on_handoff_progress=None):
    from ctxlab.labs.common import LabRun, Scenario, capture_environment

    device, threads, rounds = options["device"], options["threads"], options["rounds"]
    kinds = KINDS if options["context"] == "both" else (options["context"],)
    lab = LabRun(NAME, options, progress)
    environment = capture_environment(device)
    here = "ctxlab.labs.migrate"
    # Budget: a generous floor plus what the slowest plausible rate would need.
    relay_timeout = 120 + threads * rounds * 0.002
    scenarios = []
    for kind in kinds:
        scenarios += [
            Scenario(f"handoff-{kind}", f"{here}:handoff", (device, kind, threads, rounds, options["timeout"]),
                     timeout=relay_timeout, exclusive=True, on_progress=on_handoff_progress),  # it measures rates
            Scenario(f"concurrent-{kind}", f"{here}:concurrent", (device, kind)),
            Scenario(f"unbound-{kind}", f"{here}:unbound", (device, kind)),
        ]
    scenarios += [Scenario("cupy-caches", f"{here}:cupy_caches", (device,)),
                  Scenario("cupy-kernel-reverse", f"{here}:cupy_kernel_reverse", (device,)),
                  Scenario("cross-context", f"{here}:cross_context", (device,))]
    lab.run_all(scenarios)
    return lab.finish(environment, CLAIMS)
