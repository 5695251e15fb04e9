"""Where a verified handoff's time goes: each operation of ``migrate``'s
handoff step timed alone in one thread, a bare thread-to-thread handoff, and
the relay itself with 2, 8 and 32 threads.

    python benchmarks/handoff_breakdown.py [--iterations N] [--json FILE]

Needs a GPU. Prints microseconds per operation (median of 5 batches).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import queue
import statistics
import threading
import time


def timed(fn, n: int) -> float:
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(batches)


def ping_pong(n: int) -> float:
    a, b = queue.SimpleQueue(), queue.SimpleQueue()

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = args.iterations

    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import capture, init_driver
    from ctxlab.cuda.kernels import VERIFY_THREADS, ProbeModule
    from ctxlab.labs.migrate import ARRAY_LEN

    driver = init_driver()
    cupy.cuda.runtime.setDevice(0)
    ctx = drv.current().handle
    a = cupy.arange(ARRAY_LEN, dtype=cupy.int64)
    out = drv.host_alloc_mapped(16)
    probe = ProbeModule.load()
    stream = cupy.cuda.Stream(non_blocking=True)
    cu_stream = driver.CUstream(stream.ptr)
    handoff = probe.packed("verify_and_update", [(a.data.ptr, ctypes.c_void_p), (ARRAY_LEN, ctypes.c_longlong),
                                                 (3, ctypes.c_longlong), (out, ctypes.c_void_p)], 1, VERIFY_THREADS)

    def push_pop():
        drv.pop()
        drv.push(ctx)

    results = {
        "cuCtxGetCurrent (raw)": timed(driver.cuCtxGetCurrent, n),
        "drv.current() (handle + id)": timed(drv.current, n),
        "drv.pointer_context": timed(lambda: drv.pointer_context(a.data.ptr), n),
        "cuModuleGetGlobal": timed(lambda: driver.cuModuleGetGlobal(probe.module, b"probe_global"), n),
        "drv.stream_context": timed(lambda: drv.stream_context(stream.ptr), n),
        "pop + push": timed(push_pop, n),
        "verify_and_update + stream sync": timed(lambda: (handoff(cu_stream), driver.cuStreamSynchronize(cu_stream)), n),
        "thread handoff (SimpleQueue)": ping_pong(n * 5),
    }
    # The relay itself as migrate runs it, by number of threads: verified and bare handoffs per second.
    from ctxlab.labs.migrate import handoff

    relay = {}
    for threads in (2, 8, 32):
        metrics = handoff(0, "primary", threads, max(1, 16000 // threads), 30.0)["metrics"]
        relay[f"{threads} threads"] = {"verified_per_s": metrics["primary: verified handoffs/s"],
                                       "bare_per_s": metrics["primary: bare handoffs/s"]}
    report = {"environment": capture(0), "iterations": n, "microseconds": results, "relay_by_threads": relay}
    width = max(map(len, results))
    for name, us in results.items():
        print(f"{name:<{width}}  {us:8.2f} us")
    for threads, rates in relay.items():
        print(f"relay, {threads:<19} {rates['verified_per_s']:8.0f} verified/s  {rates['bare_per_s']:8.0f} bare/s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
