"""What N processes starting CUDA at once cost each other: the bound on ``ctxlab check``'s parallelism.

    python benchmarks/context_contention.py [--processes 1,2,4,8,16] [--threads 1,2,4,8] [--rounds R] [--json FILE]

``ctxlab check`` runs every scenario in a child process of its own, and each child
initialises CUDA and makes at least one context. For each N, N forkserver
children (cuda.bindings imported, CUDA not yet initialised: the same start as a
check child) wait at a barrier, then each times cuInit, cuDevicePrimaryCtxRetain
(which creates the primary context), a 1 MiB cuMemAlloc in it, cuCtxCreate plus
cuCtxDestroy of a second context, and the release. Printed per N: the median
and the slowest child's time for each step, and the batch's wall time. If the
driver serialises context creation across processes, the batch's wall time
grows with N like N times one child's: that is the floor of a check that
starts that many children.

Then the same question inside one process: for each N of ``--threads``, N
threads of this process (CUDA initialised, the primary context made) wait at a
barrier and each times cuCtxCreate and then cuCtxDestroy of a context of its
own. If the driver serialises these across threads too, running scenarios as
threads of one process instead of processes would not lift the floor.
The figures depend on the environment the driver reads (CUDA_DEVICE_MAX_CONNECTIONS
above all: the hardware queues each context sets up); the report records it.
Without a GPU: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time

from common import counts, refuse_without_gpu

STEPS = ("cuInit", "primary retain", "cuMemAlloc 1 MiB", "cuCtxCreate+Destroy", "primary release")


def child(barrier, answers, device: int) -> None:
    """One child's timings, seconds per step from the moment the barrier opened, sent on ``answers``."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver

    barrier.wait()
    times, t = {}, time.perf_counter()
    opened = t

    def step(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        times[name], t = now - t, now

    init_driver()
    step("cuInit")
    primary = drv.primary_retain(device)
    step("primary retain")
    drv.set_current(primary)
    drv.mem_alloc(1 << 20)
    step("cuMemAlloc 1 MiB")
    drv.destroy_context(drv.create_context(device))
    step("cuCtxCreate+Destroy")
    drv.set_current(0)
    drv.primary_release(device)
    step("primary release")
    answers.put({"steps": times, "total": time.perf_counter() - opened})


def batch(n: int, device: int) -> dict:
    """N children at once; their step timings and the batch's wall time (barrier to the last child's end)."""
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["cuda.bindings.driver", "ctxlab.cuda.driver"])
    barrier, answers = mp.Barrier(n + 1), mp.Queue()
    children = [mp.Process(target=child, args=(barrier, answers, device)) for _ in range(n)]
    for c in children:
        c.start()
    barrier.wait(timeout=300)
    t = time.perf_counter()
    results = [answers.get(timeout=300) for _ in children]
    wall = time.perf_counter() - t
    for c in children:
        c.join(30)
    return {"processes": n, "wall": wall,
            "median": {s: statistics.median(r["steps"][s] for r in results) for s in STEPS},
            "slowest": {s: max(r["steps"][s] for r in results) for s in STEPS},
            "child_total_median": statistics.median(r["total"] for r in results)}


def thread_batch(n: int, device: int) -> dict:
    """N threads of this process at once, each creating then destroying a context of its own."""
    import threading

    from ctxlab.cuda import driver as drv

    barrier, times, lock = threading.Barrier(n + 1), [], threading.Lock()

    def work() -> None:
        barrier.wait()
        t0 = time.perf_counter()
        ctx = drv.create_context(device)
        t1 = time.perf_counter()
        drv.destroy_context(ctx)
        with lock:
            times.append((t1 - t0, time.perf_counter() - t1))

    threads = [threading.Thread(target=work) for _ in range(n)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=300)
    start = time.perf_counter()
    for thread in threads:
        thread.join(300)
    wall = time.perf_counter() - start
    if len(times) != n:  # a thread raised (its traceback is above) or never finished
        raise RuntimeError(f"{n - len(times)} of {n} threads did not make and destroy their context")
    return {"threads": n, "wall": wall, "median": {"cuCtxCreate": statistics.median(c for c, _ in times),
                                                   "cuCtxDestroy": statistics.median(d for _, d in times)},
            "slowest": {"cuCtxCreate": max(c for c, _ in times), "cuCtxDestroy": max(d for _, d in times)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=counts(64), default=[1, 2, 4, 8, 16], help="batch sizes, e.g. 1,2,4,8,16")
    parser.add_argument("--threads", type=counts(64), default=[1, 2, 4, 8], help="thread batch sizes in one process")
    parser.add_argument("--rounds", type=int, default=3, help="batches per size; the median batch is kept (1-20)")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be between 1 and 20")
    if args.device < 0:
        parser.error("--device must be a GPU index (0 or more)")
    if refuse_without_gpu("context_contention", args.device):
        return 2
    from ctxlab.cuda.environment import capture

    rows = []
    for n in args.processes:
        batches = sorted((batch(n, args.device) for _ in range(args.rounds)), key=lambda b: b["wall"])
        row = batches[len(batches) // 2]
        rows.append(row)
        steps = "  ".join(f"{s} {row['median'][s] * 1e3:.0f}/{row['slowest'][s] * 1e3:.0f}" for s in STEPS)
        print(f"{n:3d} processes: batch {row['wall']:.3f} s ({row['wall'] / n * 1e3:.0f} ms per process); "
              f"median/slowest ms: {steps}", flush=True)
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver

    init_driver()
    drv.set_current(drv.primary_retain(args.device))  # this process's CUDA is up: only the contexts are timed
    in_threads = []
    for n in args.threads:
        batches = sorted((thread_batch(n, args.device) for _ in range(args.rounds)), key=lambda b: b["wall"])
        row = batches[len(batches) // 2]
        in_threads.append(row)
        print(f"{n:3d} threads:   batch {row['wall']:.3f} s ({row['wall'] / n * 1e3:.0f} ms per thread); "
              f"median/slowest ms: cuCtxCreate {row['median']['cuCtxCreate'] * 1e3:.0f}/"
              f"{row['slowest']['cuCtxCreate'] * 1e3:.0f}  cuCtxDestroy {row['median']['cuCtxDestroy'] * 1e3:.0f}/"
              f"{row['slowest']['cuCtxDestroy'] * 1e3:.0f}", flush=True)
    report = {"environment": capture(args.device), "rounds": args.rounds, "batches": rows, "threads": in_threads,
              "note": "seconds; median batch of --rounds; each child: cuInit, primary retain, 1 MiB cuMemAlloc, "
                      "cuCtxCreate+cuCtxDestroy, primary release, started together at a barrier; each thread "
                      "of one process: cuCtxCreate, cuCtxDestroy"}
    if args.json:
        from ctxlab.output import write_outputs

        write_outputs([(args.json, json.dumps(report, indent=1) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
