"""Clean: cuda.core worker threads that each call Device(0).set_current() before using the device.

Each thread makes the device current on itself first, creates its own stream, allocates a device buffer,
fills it, copies it into pinned host memory and synchronises its stream before reading the result. The
main thread makes the device current too, so the primary context lives for the whole run.

Report: https://github.com/ofiwg/libfabric/pull/12490 -- worker threads that call CUDA need the context set
up per thread (cudaSetDevice on each worker), not only on the main thread.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/clean_cuda_core_threads.py
"""

import ctypes
import threading

try:
    from cuda.core import Device, LegacyPinnedMemoryResource
except ImportError:  # cuda.core before 1.0
    from cuda.core.experimental import Device, LegacyPinnedMemoryResource

NBYTES = 1 << 16


def worker(value: int, out: dict) -> None:
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    buf = dev.allocate(NBYTES, stream=stream)
    host = LegacyPinnedMemoryResource().allocate(NBYTES, stream=stream)
    buf.fill(value, stream=stream)
    buf.copy_to(host, stream=stream)
    stream.sync()
    data = ctypes.string_at(int(host.handle), NBYTES)
    out[value] = data == bytes([value]) * NBYTES
    buf.close(stream)
    host.close(stream)
    stream.sync()
    stream.close()


def main() -> int:
    Device(0).set_current()  # the main thread's own reference to the primary context, for the whole run
    out: dict = {}
    threads = [threading.Thread(target=worker, args=(v, out), name=f"cc-worker-{v}") for v in (7, 9, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"each worker read back its fill: {dict(sorted(out.items()))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
