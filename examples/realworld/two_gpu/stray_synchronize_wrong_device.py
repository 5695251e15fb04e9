"""A step timer that calls torch.cuda.synchronize() with no device while the work runs on GPU 1.

The model runs on cuda:1 (tensors placed with device="cuda:1", no set_device). A timing thread measures
each step by synchronising and reading the clock; torch.cuda.synchronize() with no argument synchronises
the thread's current device, GPU 0: the timer does not wait for the work on GPU 1, so it reports a time
far too short, and the synchronize creates a context on GPU 0, a GPU the job never uses.

Report: https://github.com/pytorch/pytorch/issues/181238 -- torch.cuda.synchronize() syncs on device 0
when the current device is not set, so kernels on the other GPU are still running after the call (see
also https://github.com/meta-pytorch/gpt-fast/pull/113: pass the device to synchronize()).

Expected finding: stray-context on thread step-timer, at the line marked HAZARD in timer() (the
synchronize on GPU 0).

    ctxlab audit -- examples/realworld/two_gpu/stray_synchronize_wrong_device.py
"""

import queue
import threading
import time

import torch


def timer(ticks: queue.Queue, times: list) -> None:
    while (t0 := ticks.get()) is not None:
        torch.cuda.synchronize()  # HAZARD: stray-context
        times.append(time.perf_counter() - t0)


def main() -> int:
    dev = torch.device("cuda:1")
    w = torch.randn(4096, 4096, device=dev)
    torch.cuda.synchronize(dev)
    ticks: queue.Queue = queue.Queue()
    times: list = []
    clock = threading.Thread(target=timer, args=(ticks, times), name="step-timer")
    clock.start()
    for _ in range(3):
        t0 = time.perf_counter()
        y = w
        for _ in range(20):
            y = torch.tanh(y @ w)
        ticks.put(t0)
    ticks.put(None)
    clock.join()
    t0 = time.perf_counter()
    torch.cuda.synchronize(dev)
    print(f"timer's step times {[f'{t * 1e3:.1f} ms' for t in times]}; "
          f"GPU 1 was still busy for {(time.perf_counter() - t0) * 1e3:.1f} ms after them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
