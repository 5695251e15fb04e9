"""A dispatcher that waits for its batch while holding the lock the batch's completion callback needs.

An inference server's dispatcher thread runs each batch on a CuPy stream and enqueues, behind the batch's
kernels, a host function (Stream.launch_host_func) that marks the batch's requests done in the request
table, under the table's lock. The dispatcher takes that lock to register the batch, enqueues the work and
the callback, and then waits for the batch with stream.synchronize() without letting go of the lock. The
driver runs the host function on its own thread once the kernels finish; the function blocks on the lock;
a stream does not complete while a host function in it has not returned, so the synchronize never
returns: a deadlock that no timeout in the program undoes. The audit's --timeout ends it.

Report: https://github.com/NVIDIA/numba-cuda/issues/317 -- a test suite deadlocks: stream callbacks run
Python code on a CUDA driver thread and need a lock (the GIL) that a thread waiting in a CUDA call holds;
the maintainers add deadlock warnings to Stream.add_callback and async_done (numba-cuda#321).

Expected finding: program-hung on thread dispatcher, at the line marked HAZARD in dispatch() (the
stream.synchronize() it is blocked in). Ends only when the audit's timeout kills it.

    ctxlab audit -- examples/realworld/hang_host_func_waits_for_lock_held_across_sync.py
Info listed after the wave-4 audit counted it: several-runtime-copies (dispatcher)."""

import queue
import threading

import cupy

N = 1 << 22


class RequestTable:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: dict = {}


def mark_done(arg) -> None:
    """Host function run by the driver when the batch's kernels are done: no CUDA calls, only the table."""
    table, batch = arg
    with table.lock:
        for request in batch:
            table.state[request] = "done"


def dispatch(table: RequestTable, batches: queue.Queue) -> None:
    with cupy.cuda.Device(0):
        stream = cupy.cuda.Stream(non_blocking=True)
        while (batch := batches.get()) is not None:
            with table.lock:
                for request in batch:
                    table.state[request] = "running"
                with stream:
                    x = cupy.arange(N, dtype=cupy.float64)
                    total = (x * 2.0).sum()
                stream.launch_host_func(mark_done, (table, batch))
                stream.synchronize()  # HAZARD: program-hung
                print(f"batch {batch}: sum {float(total):.0f}, states {[table.state[r] for r in batch]}", flush=True)


def main() -> int:
    table, batches = RequestTable(), queue.Queue()
    worker = threading.Thread(target=dispatch, args=(table, batches), name="dispatcher")
    worker.start()
    for batch in ((1, 2, 3), (4, 5)):
        batches.put(batch)
    batches.put(None)
    worker.join()
    print("all batches served (not expected: the first batch deadlocks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
