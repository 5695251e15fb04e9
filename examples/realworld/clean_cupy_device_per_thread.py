"""Clean: worker threads that each enter cupy.cuda.Device(0) and compute on a non-blocking stream of their own.

Each thread selects the device inside the thread (`with cupy.cuda.Device(0)`), creates its own stream,
runs its part of the reduction on that stream and synchronises the stream before reporting.

Report: https://github.com/cupy/cupy/issues/6434 -- multi-GPU work with joblib threads, each thread in
`with cp.cuda.Device(device)`: the per-thread device selection is what makes the threads' work go to
their device.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_cupy_device_per_thread.py
Info listed after the wave-4 audit counted it: several-runtime-copies (part-)."""

import threading

import cupy

N = 1 << 20


def part(i: int, out: dict) -> None:
    with cupy.cuda.Device(0):
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            x = cupy.arange(N, dtype=cupy.float64) * (i + 1)
            total = x.sum()
        stream.synchronize()
        out[i] = float(total)


def main() -> int:
    out: dict = {}
    threads = [threading.Thread(target=part, args=(i, out), name=f"part-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = {i: (i + 1) * N * (N - 1) / 2 for i in range(4)}
    print(f"parts {dict(sorted(out.items()))}; all right: {out == expected}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
