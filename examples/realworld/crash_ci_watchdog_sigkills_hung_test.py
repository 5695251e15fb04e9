"""A GPU test whose kernels wait for each other on one stream, SIGKILLed by the suite's own watchdog.

The test checks a producer/consumer hand-off between two CuPy kernels through a ready flag in device
memory: the consumer spins until the flag is set, the producer sets it. Both are launched on the same
stream, consumer first. A stream runs its work in order, so the producer never starts and the consumer
never ends: the test's stream.synchronize() blocks for good. The suite runs each test under a watchdog
thread that does what `timeout --kill-after` does to a wedged CI step: when the test misses its deadline
(3 s) it prints that it kills the test process and sends SIGKILL to its own process.

Report: https://github.com/NVIDIA/cuvs/pull/2577 -- a wedged Python/GPU test process consumed the whole
six-hour CI limit; the fix runs each pytest invocation under a timeout followed by a forced kill after a
grace period.

Expected findings: program-hung on thread test-worker at the line marked HAZARD program-hung in
run_test() (the stream.synchronize() it is blocked in), and program-crashed on thread ci-watchdog at the
line marked HAZARD program-crashed in watchdog() (the os.kill that sends SIGKILL). Ends by SIGKILL about
3 s after the kernels are launched.

    ctxlab audit -- examples/realworld/crash_ci_watchdog_sigkills_hung_test.py
"""

import os
import signal
import threading

import cupy

DEADLINE_S = 3.0

KERNELS = r"""
extern "C" __global__ void consume(const volatile int* ready, int* seen) {
    while (*ready == 0) {
        __nanosleep(10000);
    }
    seen[0] = 1;
}

extern "C" __global__ void produce(int* ready) {
    ready[0] = 1;
}
"""


def run_test(started: threading.Event, finished: threading.Event) -> None:
    with cupy.cuda.Device(0):
        module = cupy.RawModule(code=KERNELS)
        consume, produce = module.get_function("consume"), module.get_function("produce")
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            ready = cupy.zeros(1, dtype=cupy.int32)
            seen = cupy.zeros(1, dtype=cupy.int32)
            consume((1,), (1,), (ready, seen))
            produce((1,), (1,), (ready,))  # queued behind the consumer on the same stream: never runs
        started.set()
        stream.synchronize()  # HAZARD: program-hung
        print(f"test passed: consumer saw the flag {int(seen[0])}", flush=True)
        finished.set()


def watchdog(started: threading.Event, finished: threading.Event) -> None:
    started.wait(120)
    if finished.wait(DEADLINE_S):
        return
    print(f"ci-watchdog: test exceeded its {DEADLINE_S:.0f} s deadline; killing the test process", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # HAZARD: program-crashed


def main() -> int:
    started, finished = threading.Event(), threading.Event()
    threads = [threading.Thread(target=run_test, args=(started, finished), name="test-worker"),
               threading.Thread(target=watchdog, args=(started, finished), name="ci-watchdog")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
