"""The calls behind the runtime's first context: cudaSetDevice, an allocation on
a new host thread, and a kernel launch. Run it under the tracer:

    ctxlab trace --only context -- examples/first_context.py
"""

import threading

import cupy


def main() -> None:
    cupy.cuda.runtime.setDevice(0)  # CUDA 12+: initialises and binds the primary context
    result = {}

    def worker() -> None:
        a = cupy.arange(1 << 10, dtype=cupy.float32)  # a new thread: the runtime binds the primary context
        result["sum"] = float((a * 2).sum())  # the first kernel launch loads CuPy's module

    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    thread.join()
    print(f"sum computed on thread 'worker': {result['sum']:.0f}")


if __name__ == "__main__":
    main()
