"""Clean (stress): eight threads released by a barrier make their first CuPy calls at the same moment.

Nothing initialised CUDA before the threads start. All of them wait on a threading.Barrier and then, at
once, select the device, allocate and reduce with CuPy: the runtime's lazy initialisation, the primary
context's creation and CuPy's per-thread state are all raced. Each thread checks its own result.

Report: https://github.com/pytorch/pytorch/pull/25788 -- a race in lazy CUDA initialisation when several
threads make their first CUDA call together; fixed by locking the initialisation (see also
https://github.com/cupy/cupy/pull/8774, a race during CuPy's SoftLink initialisation).

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_cupy_barrier_stress.py
Info listed after the wave-4 audit counted it: several-runtime-copies (racer-)."""

import threading

import cupy

THREADS = 8
N = 1 << 18


def racer(i: int, barrier: threading.Barrier, out: dict) -> None:
    barrier.wait(60)
    cupy.cuda.Device(0).use()
    x = cupy.full(N, i + 1, dtype=cupy.int64)
    out[i] = int(x.sum()) == (i + 1) * N


def main() -> int:
    barrier = threading.Barrier(THREADS)
    out: dict = {}
    threads = [threading.Thread(target=racer, args=(i, barrier, out), name=f"racer-{i}") for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{sum(out.values())} of {THREADS} threads computed the right sum")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
