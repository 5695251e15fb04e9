"""Where a verified handoff's time goes: each operation of ``migrate``'s
handoff step timed alone in one thread, a bare thread-to-thread handoff, and
the relay itself with 2, 8 and 32 threads (as migrate runs it, its threads on one
core, and with them spread over the cores), side by side with the same relay in
C++ (``benchmarks/native_relay.cu``, built with nvcc when this runs).

    python benchmarks/handoff_breakdown.py [--iterations N] [--handoffs N] [--json FILE]

Needs a GPU (and nvcc for the native figures). Prints microseconds per operation
(median of 5 batches), then ctxlab's and the native verified handoffs per second
and their ratio. The native relay runs with each of its hand-overs
(``native_build.NATIVE_MODES``); the ratio is taken against the fastest.
``relay_vs_native.py`` gives the ratio at 32 threads as pairs that alternate.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import queue
import statistics
import sys
import threading
import time

from common import positive, refuse_without_gpu
from native_build import NATIVE_MODES, build_native, native_rate

THREADS = (2, 8, 32)


def timed(fn, n: int) -> float:
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(batches)


def ping_pong(n: int, inbox=queue.SimpleQueue) -> float:
    a, b = inbox(), inbox()

    def echo():
        for _ in range(n):
            b.put(a.get())

    thread = threading.Thread(target=echo)
    thread.start()
    t = time.perf_counter()
    for i in range(n):
        a.put(i)
        b.get()
    thread.join()
    return (time.perf_counter() - t) / (2 * n) * 1e6  # one handoff = one direction


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=positive, default=2000, help="calls per timed batch (>= 1)")
    parser.add_argument("--handoffs", type=positive, default=16000, help="handoffs per relay run (>= 1)")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    if refuse_without_gpu("handoff_breakdown"):
        return 2
    n = args.iterations

    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import capture, init_driver
    from ctxlab.cuda.kernels import VERIFY_THREADS, ProbeModule
    from ctxlab.harness.threads import Inbox
    from ctxlab.labs.migrate import ARRAY_LEN

    driver = init_driver()
    cupy.cuda.runtime.setDevice(0)
    ctx = drv.current().handle
    a = cupy.arange(ARRAY_LEN, dtype=cupy.int64)
    out = drv.host_alloc_mapped(16)
    probe = ProbeModule.load()
    stream = cupy.cuda.Stream(non_blocking=True)
    cu_stream = driver.CUstream(stream.ptr)
    launch = probe.packed("verify_and_update", [(a.data.ptr, ctypes.c_void_p), (ARRAY_LEN, ctypes.c_longlong),
                                                 (3, ctypes.c_longlong), (out, ctypes.c_void_p)], 1, VERIFY_THREADS)

    def push_pop():
        drv.pop()
        drv.push(ctx)

    def launch_and_sync():
        launch(cu_stream)
        driver.cuStreamSynchronize(cu_stream)

    results = {
        "cuCtxGetCurrent (raw)": timed(driver.cuCtxGetCurrent, n),
        "drv.current() (handle + id)": timed(drv.current, n),
        "drv.pointer_context": timed(lambda: drv.pointer_context(a.data.ptr), n),
        "cuModuleGetGlobal": timed(lambda: driver.cuModuleGetGlobal(probe.module, b"probe_global"), n),
        "drv.stream_context": timed(lambda: drv.stream_context(stream.ptr), n),
        "pop + push": timed(push_pop, n),
        "verify_and_update + stream sync": timed(launch_and_sync, n),
        "thread handoff (SimpleQueue)": ping_pong(n * 5),
        "thread handoff (Choreography's inbox)": ping_pong(n * 5, Inbox),
    }
    # The relay itself as migrate runs it, by number of threads: verified and bare handoffs per second.
    from ctxlab.labs.migrate import handoff as run_relay

    binary, how = build_native()
    relay = {}
    for threads in THREADS:
        rounds = max(1, args.handoffs // threads)
        # migrate's relay as it runs (its threads on one core), then the same with the threads spread over the
        # cores, for comparison; the ratio is the default's.
        metrics = run_relay(0, "primary", threads, rounds, 30.0)["metrics"]
        spread = run_relay(0, "primary", threads, rounds, 30.0, one_core=False)["metrics"]
        row = {"verified_per_s": metrics["primary: verified handoffs/s"],
               "bare_per_s": metrics["primary: bare handoffs/s"],
               "spread": {"verified_per_s": spread["primary: verified handoffs/s"],
                          "bare_per_s": spread["primary: bare handoffs/s"]}}
        if binary:  # ctxlab is compared with the faster of the native hand-overs
            natives = {mode: native_rate(binary, threads, rounds, mode) for mode in NATIVE_MODES}
            fastest = max(NATIVE_MODES, key=lambda mode: natives[mode]["verified_per_s"])
            row |= {"native_verified_per_s": natives[fastest]["verified_per_s"], "native_mode": fastest,
                    "native_by_mode": {mode: natives[mode]["verified_per_s"] for mode in NATIVE_MODES},
                    "native_checks_ok": all(r["mismatches"] == 0 and r["final_ok"] for r in natives.values()),
                    "ratio": row["verified_per_s"] / natives[fastest]["verified_per_s"]}
        relay[f"{threads} threads"] = row
    report = {"environment": capture(0), "iterations": n, "handoffs": args.handoffs, "microseconds": results,
              "relay_by_threads": relay, "native": how if binary else {"skipped": how}}
    width = max(map(len, results))
    for name, us in results.items():
        print(f"{name:<{width}}  {us:8.2f} us")
    for label, rates in relay.items():
        native = (f"  native {rates['native_verified_per_s']:8.0f} verified/s ({rates['native_mode']}; "
                  + ", ".join(f"{m} {r:.0f}" for m, r in rates["native_by_mode"].items())
                  + f")  ratio {rates['ratio']:.3f}"
                  if "ratio" in rates else f"  native: {how}")
        print(f"relay, {label:<11} {rates['verified_per_s']:8.0f} verified/s  {rates['bare_per_s']:8.0f} bare/s "
              f"(threads spread over the cores: {rates['spread']['verified_per_s']:.0f} verified/s, "
              f"{rates['spread']['bare_per_s']:.0f} bare/s)" + native)
    if args.json:  # ctxlab's one writer: replaced atomically, never half-written
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=2) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
