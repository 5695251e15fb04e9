"""Clean: a dispatcher that registers its batch under the table's lock and lets go of it before it waits.

The same inference-server dispatcher as hang_host_func_waits_for_lock_held_across_sync.py: each batch runs
on a CuPy stream with, behind its kernels, a host function (Stream.launch_host_func) that marks the
batch's requests done under the request table's lock. Here the dispatcher holds the lock only while it
registers the batch and enqueues the work; it waits for the stream outside the lock, so the host
function can take the lock, return, and let the stream complete. The host function makes no CUDA call.

Report: https://github.com/NVIDIA/numba-cuda/issues/317 -- stream callbacks that run Python code need locks
on a driver thread; a thread must not wait in a CUDA call while it holds a lock a callback needs.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_host_func_lock_released_before_sync.py
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


def dispatch(table: RequestTable, batches: queue.Queue, sums: list) -> None:
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
            stream.synchronize()  # outside the lock: the host function can take it
            sums.append(float(total))


def main() -> int:
    table, batches, sums = RequestTable(), queue.Queue(), []
    worker = threading.Thread(target=dispatch, args=(table, batches, sums), name="dispatcher")
    worker.start()
    for batch in ((1, 2, 3), (4, 5)):
        batches.put(batch)
    batches.put(None)
    worker.join()
    expected = float(N) * (N - 1)
    print(f"request states {dict(sorted(table.state.items()))}; sums right: {all(s == expected for s in sums)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
