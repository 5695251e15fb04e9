"""migrate's side scenarios, each run in a child process, and the lab's list of all its scenarios for given
options."""

from __future__ import annotations

import struct

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import CudaError
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import checked
from ctxlab.harness.threads import Choreography, Step
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.common import cuda_recorder, scenario_output
from ctxlab.labs.migrate.claims import GREEN, KINDS
from ctxlab.labs.migrate.contexts import FRESH_KERNEL_SUM, cupy_alloc, driver_alloc, fresh_kernel, make_context
from ctxlab.labs.migrate.green import concurrent_green, green_cupy, green_memory, green_sm
from ctxlab.labs.migrate.options import MigrateOptions
from ctxlab.labs.migrate.relay import handoff


def _driver_work(rec, s: dict, label: str):
    """Thread ``label``'s step: cuMemAlloc in the shared context and one increment of the probe's global."""

    def step(ctx):
        try:
            ptr = driver_alloc(rec, "driver work")
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
    rec = cuda_recorder(scenario=f"concurrent-{kind}")
    s: dict = {}

    def a_make(_):
        s["ctx"] = make_context(kind, device)
        s["probe"] = ProbeModule.load()
        s["probe"].write_global(0)
        rec.add("make", "context made", {"kind": kind, "id": drv.context_id(s["ctx"])})
        return s["ctx"]

    def b_push(ctx):
        drv.push(ctx)
        rec.add("push", "current", {"handle": drv.current().handle})
        return ctx

    def a_check(ctx):
        # What migrate.current-on-several-threads compares: each thread's current context and its allocation's
        # (its driver work), A's current context now, the context made, the global after both increments.
        rec.add("check", "current on two threads", {"kind": kind, "threads": {t: s[t] for t in "AB"},
                                                    "still": drv.current().handle, "context": s["ctx"],
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

    rec = cuda_recorder(scenario=f"unbound-{kind}")
    s: dict = {}

    def owner(_):
        s["ctx"] = make_context(kind, device)
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
                 "pointer_context": ptr_ctx, "owner_context": s["ctx"]})
        cupy.cuda.runtime.free(ptr)
        return None

    Choreography(["owner", "stranger"], timeout=60).run([Step("owner", "make", owner),
                                                        Step("stranger", "call", stranger)])
    return scenario_output(rec)


def cupy_caches(device: int) -> dict:
    """CuPy's per-device memory pool and kernel cache under a cuCtxCreate context."""
    import cupy

    rec = cuda_recorder(scenario="cupy-caches")
    s: dict = {}
    n = 12345  # an odd size, so the block is found by size in the pool

    def created_alloc(_):
        """A cuCtxCreate context; CuPy allocates there and runs its first kernel, then frees to its pool."""
        s["created"] = drv.create_context(device)
        x = cupy_alloc(rec, "created", lambda: cupy.empty(n, dtype=cupy.float32), "x")
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
            out[ctx_name] = checked(fresh_kernel, FRESH_KERNEL_SUM)  # a kernel not used before in this process
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

    rec = cuda_recorder(scenario=label)
    cupy.cuda.runtime.setDevice(device)
    first = checked(fresh_kernel, FRESH_KERNEL_SUM)
    primary = drv.current().handle
    created = drv.create_context(device)
    outcome = checked(fresh_kernel, FRESH_KERNEL_SUM)
    rec.add("kernel", "cupy cached kernel in other context",
            {"first_used_in": "primary", "launched_in": "created", "outcome": outcome, "first": first,
             "primary": primary, "created": created})
    return scenario_output(rec)


def cross_context(device: int) -> dict:
    """A kernel in one context dereferences memory allocated in another (may leave a sticky error)."""
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
             "outcome": outcome, "value_written": written, "value_read": value})
    return scenario_output(rec)


def scenarios(options: MigrateOptions) -> list[Scenario]:
    """The relay for each chosen kind, its side scenarios, and the CuPy and cross-context ones."""
    device = options.device
    kinds = {"both": KINDS, "all": (*KINDS, GREEN)}.get(options.context, (options.context,))
    # A generous floor plus what the slowest plausible rate would need.
    relay_timeout = 120 + options.threads * options.rounds * 0.002
    out = []
    for kind in kinds:
        if kind == GREEN:
            out += [
                Scenario("handoff-green", handoff,
                         (device, kind, options.threads, options.rounds, options.timeout), timeout=relay_timeout,
                         isolation=Isolation.GPU_ALONE, reports_progress=True),
                # Current on two threads, which the documentation rules out: repeated, each run in a fresh process.
                Scenario("concurrent-green", concurrent_green, (device,), undefined=True),
                Scenario("green-sm", green_sm, (device,), isolation=Isolation.GPU_ALONE),
                Scenario("green-memory", green_memory, (device,)),
                Scenario("green-cupy", green_cupy, (device,)),
            ]
            continue
        out += [
            Scenario(f"handoff-{kind}", handoff,
                     (device, kind, options.threads, options.rounds, options.timeout), timeout=relay_timeout,
                     isolation=Isolation.GPU_ALONE, reports_progress=True),  # it measures rates
            Scenario(f"concurrent-{kind}", concurrent, (device, kind)),
            Scenario(f"unbound-{kind}", unbound, (device, kind)),
        ]
    return out + [Scenario("cupy-caches", cupy_caches, (device,), undefined=True),
                  Scenario("cupy-kernel-reverse", cupy_kernel_reverse, (device,), undefined=True),
                  Scenario("cross-context", cross_context, (device,))]
