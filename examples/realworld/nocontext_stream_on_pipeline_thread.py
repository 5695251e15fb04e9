"""An I/O pipeline thread that creates its copy stream with the driver API, on a thread with no context.

The main thread sets the device up with cuda.core (Device(0).set_current(), which makes the primary
context current there) and allocates the destination buffer. The read-ahead thread of the I/O layer
creates a stream for its host-to-device copies with cuStreamCreate, without making a context current
first: a new thread has none, and the driver returns CUDA_ERROR_INVALID_CONTEXT.

Report: https://github.com/rapidsai/cudf/issues/13019 -- a dask worker thread calls into libcudf with no
active context (cuCtxGetCurrent returns 0x0), and the driver calls below fail.

Expected finding: no-context on thread read-ahead, at the line marked HAZARD in read_ahead() (the program
catches the status and prints it).

    ctxlab audit -- examples/realworld/nocontext_stream_on_pipeline_thread.py
"""

import threading

from cuda.bindings import driver

try:
    from cuda.core import Device
except ImportError:  # cuda.core before 1.0
    from cuda.core.experimental import Device


def read_ahead(out: dict) -> None:
    err, stream = driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING))  # HAZARD: no-context
    out["stream"] = err.name
    if not int(err):
        driver.cuStreamDestroy(stream)


def main() -> int:
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    destination = dev.allocate(1 << 20, stream=stream)
    out: dict = {}
    reader = threading.Thread(target=read_ahead, args=(out,), name="read-ahead")
    reader.start()
    reader.join()
    destination.close(stream)
    stream.sync()
    stream.close()
    print(f"cuStreamCreate on the read-ahead thread: {out['stream']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
