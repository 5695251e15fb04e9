"""migrate's verified relay, run in a child process: the context handed from thread to thread, every handoff
checked (the handoff-* scenarios)."""

from __future__ import annotations

import ctypes
import time

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check as ok_or_raise
from ctxlab.cuda.kernels import VERIFY_THREADS, ProbeModule
from ctxlab.harness.isolate import report_progress
from ctxlab.harness.threads import Choreography, Step, relay_steps
from ctxlab.labs.common import cuda_recorder, green_or_skip, scenario_output
from ctxlab.labs.migrate.claims import ARRAY_LEN, GLOBAL_START, GLOBAL_STEP, GREEN, TIMELINE_HANDOFFS
from ctxlab.labs.migrate.contexts import cupy_alloc, driver_alloc, make_context


def _keep_current(rec, step: str, ctx: int, after: str) -> None:
    """If a CuPy call left another context current, record it and put ``ctx`` back."""
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

        self.driver = init_driver()
        self.device, self.kind, self.rounds, self.green = device, kind, rounds, green
        self.rec = cuda_recorder(scenario=f"handoff-{kind}")
        self.names = [f"worker-{i + 1}" for i in range(threads)]
        self.initial = numpy.arange(ARRAY_LEN, dtype=numpy.int64) * 7 + 11  # known, non-trivial contents
        self.verified = self.mismatches = self.index = 0
        self.first_mismatch: dict | None = None
        self.final: dict | None = None  # what finish read back (None: the relay did not reach it)

    def setup(self, _):
        """Thread 1: the context, a CuPy array, a driver allocation, the probe's global, a stream; then pop."""
        import cupy

        rec = self.rec
        self.ctx = ctx = make_context(self.kind, self.device, self.green)
        self.ctx_id = drv.context_id(ctx)
        rec.add("setup", "context made", {"kind": self.kind, "handle": ctx, "id": self.ctx_id})
        if self.green is not None:
            rec.add("setup", "green context made", {**self.green.info(), "id": self.ctx_id})
        a = cupy_alloc(rec, "setup", lambda: cupy.empty(ARRAY_LEN, dtype=cupy.int64), "a")
        _keep_current(rec, "setup", ctx, "cupy.empty")
        drv.copy_to_device(a.data.ptr, self.initial.tobytes())
        self.a, self.sum = a, int(self.initial.sum())
        self.dptr = driver_alloc(rec, "setup")  # a driver allocation, followed like the CuPy one
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
        self.hot = (probe.module, self.cu_stream, self.launch, self.seen, a.data.ptr, self.dptr, drv.as_context(ctx))
        # what each handoff must find before the kernel's results: no context, this one, the owners, the
        # global's address, the stream's context (CHECKS' first six)
        self.expected_state = (0, (ctx, self.ctx_id), self.a_owner, self.d_owner, probe.global_address,
                               self.stream_ctx)
        popped = drv.pop()
        rec.add("setup", "popped", {"handle": popped, "pushed": ctx}, context=(None, None))
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

    # What each handoff checks, in the order of the values ``step`` observes.
    CHECKS = ("no context before push", "current context", "array pointer context", "driver pointer context",
              "global address", "stream context", "array sum left by the previous thread",
              "global left by the previous thread")

    def step(self, r: int):
        """Round ``r``'s handoff: push, verify everything thread 1 and the previous thread left, update, pop.

        The kernel is launched as soon as the context is pushed, and the host reads and compares the context's
        state (the current context, its allocations, the global's address, the stream's context) while it runs:
        every check is made on every handoff, by the thread holding the context, and only the two values the
        kernel read wait for it. A mismatch is then told check by check."""
        driver = self.driver
        module_get_global, sync = driver.cuModuleGetGlobal, driver.cuStreamSynchronize
        get_current, push_current = driver.cuCtxGetCurrent, driver.cuCtxPushCurrent
        context_of, stream_context = drv.pointer_context, drv.stream_context

        def handoff(ctx):
            module, stream, launch, seen, a_ptr, d_ptr, cu_ctx = self.hot  # what setup made, looked up once
            err, before = get_current()
            if int(err):
                ok_or_raise((err, before), "cuCtxGetCurrent")
            # The handle handed over is pushed: as setup's CUcontext when it is the same handle, which saves
            # making one per handoff (a different one is made into its own and fails the check below).
            ok_or_raise(push_current(cu_ctx if ctx == self.ctx else drv.as_context(ctx)), "cuCtxPushCurrent")
            launch(stream)  # first, so that every check below runs while the kernel does
            cur = drv.current()
            a_ctx, d_ctx = context_of(a_ptr), context_of(d_ptr)
            address = int(ok_or_raise(module_get_global(module, b"probe_global"), "cuModuleGetGlobal")[0])
            stream_ctx = stream_context(stream)
            state = (int(before), (cur.handle, cur.id), a_ctx, d_ctx, address, stream_ctx)
            state_ok = state == self.expected_state  # compared while the kernel still runs
            ok_or_raise(sync(stream), "cuStreamSynchronize")
            total, value = seen
            ok = state_ok and total == self.sum and value == self.global_value
            if not ok:  # told check by check, so the first mismatch names what differed
                observed, expected = (*state, total, value), (*self.expected_state, self.sum, self.global_value)
                told = zip(self.CHECKS, observed, expected, strict=True)
                ok = all([self.check(label, o, e, r) for label, o, e in told])
            self.sum += ARRAY_LEN
            self.global_value += GLOBAL_STEP
            if self.index < TIMELINE_HANDOFFS:
                self.rec.add("handoff", "verified", {"array_sum": total, "global": value, "all_checks": bool(ok)},
                             round=r)
            else:
                self.rec.discard_events()
            popped = drv.pop()
            if popped != self.ctx:
                ok = self.check("popped the same context", popped, self.ctx, r)
            self.verified += 1 if ok else 0
            self.index += 1
            return popped

        return handoff

    def finish(self, ctx):
        """The last thread: read back every element and the global, recorded raw for the claim to judge.

        What each element gained (its least and greatest change since setup) and the global's value are
        recorded, not compared here: whether they are what all the handoffs added is the claim's decision
        (``final_values_right``), where a mutant of it can be caught."""
        import numpy

        self.t1 = time.perf_counter()
        drv.push(ctx)
        final = numpy.frombuffer(drv.copy_from_device(self.a.data.ptr, ARRAY_LEN * 8), dtype=numpy.int64)
        added = final - self.initial
        self.final = {"element_added_min": int(added.min()), "element_added_max": int(added.max()),
                      "global": self.probe.read_global()}
        self.rec.add("finish", "final values", {"array_sum": int(final.sum()), **self.final})
        drv.pop()
        return ctx

    def steps(self) -> list:
        """Setup on the first thread, every round's handoffs in thread order, the check on the last."""
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
    green = None
    if kind == GREEN:
        green = green_or_skip(f"handoff-{kind}", device)
        if isinstance(green, dict):  # none here: why is recorded
            return green
    relay = Relay(device, kind, threads, rounds, green)
    steps = relay.steps()
    total = len(steps) - 2
    choreo = Choreography(relay.names, timeout=timeout, progress=report_progress, progress_every=max(64, total // 50),
                          one_core=one_core)
    ctx = choreo.run(steps)
    relay.rec.add("summary", "handoffs verified",
                  {"verified": relay.verified, "handoffs": total, "mismatches": relay.mismatches,
                   "first_mismatch": relay.first_mismatch, "final": relay.final, "threads": threads,
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
