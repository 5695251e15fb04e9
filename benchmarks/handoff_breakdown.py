"""Where a verified handoff's time goes: each operation of ``migrate``'s
handoff step timed alone in one thread, a bare thread-to-thread handoff, and
the relay itself with 2, 8 and 32 threads (as migrate runs it, its threads on one
core, and with them spread over the cores), side by side with the same relay in
C++ (``benchmarks/native_relay.cu``, built with nvcc when this runs).

    python benchmarks/handoff_breakdown.py [--iterations N] [--handoffs N] [--json FILE]

Needs a GPU (and nvcc for the native figures). Prints microseconds per operation
(median of 5 batches), then ctxlab's and the native verified handoffs per second
and their ratio. The native relay runs with each of its hand-overs (a condition
variable per thread; an atomic turn counter polled with yield; a condition
variable per thread with every thread on one core); the ratio is taken against
the fastest.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from common import positive, refuse_without_gpu

THREADS = (2, 8, 32)
HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn, n: int) -> float:
    batches = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(batches)


def ping_pong(n: int) -> float:
    a: queue.SimpleQueue[int] = queue.SimpleQueue()
    b: queue.SimpleQueue[int] = queue.SimpleQueue()

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


def build_native() -> tuple[str | None, str]:
    """The native relay built with nvcc: (path, how), or (None, why not)."""
    nvcc = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda*/bin/nvcc")), None)
    if not nvcc:
        return None, "nvcc not found"
    work = tempfile.mkdtemp(prefix="ctxlab-native-relay-")
    binary = os.path.join(work, "native_relay")
    stubs = os.path.join(os.path.dirname(os.path.dirname(nvcc)), "lib64", "stubs")
    last = ""
    for arch in (["-arch=native"], []):
        for link in (["-lcuda"], [f"-L{stubs}", "-lcuda"]):
            cmd = [nvcc, "-O2", "-std=c++17", *arch, "-o", binary, os.path.join(HERE, "native_relay.cu"), *link]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if done.returncode == 0:  # the command as recorded: nvcc's flags, the source relative to the repository
                return binary, " ".join(["nvcc", "-O2", "-std=c++17", *arch, "benchmarks/native_relay.cu", *link])
            last = done.stderr.strip()[-300:]
    return None, f"nvcc failed: {last}"


# a condition variable per thread; an atomic turn counter polled with yield; cv with the threads on one core
NATIVE_MODES = ("cv", "spin", "cv1")


def native_rate(binary: str, threads: int, rounds: int, mode: str) -> dict:
    """One run of the native relay: its JSON line (verified handoffs per second and the checks)."""
    done = subprocess.run([binary, str(threads), str(rounds), mode], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"native relay ({threads} threads) exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
