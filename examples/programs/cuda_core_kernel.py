"""A small cuda.core program: compile a kernel with NVRTC, launch it from the main
thread and from a second thread that binds the device with Device.set_current(),
and check the result. Written without ctxlab in mind; trace it with

    ctxlab trace -- examples/programs/cuda_core_kernel.py
"""

import sys
import threading

import numpy as np
from cuda.bindings import driver

try:
    from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError:  # cuda.core before 1.0
    from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
extern "C" __global__ void fill(unsigned long long* out, unsigned long long n, unsigned long long k) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = k * i;
}
"""
N = 1 << 12


def run(dev, kernel, k: int) -> int:
    """Launch ``fill`` on a stream of this thread's own, copy back, return the sum."""
    stream = dev.create_stream()
    buf = dev.allocate(N * 8, stream=stream)
    config = LaunchConfig(grid=(N + 255) // 256, block=256)
    try:
        launch(stream, config, kernel, buf, np.uint64(N), np.uint64(k))
    except TypeError:  # cuda.core before 0.3: launch(kernel, config with its stream, *args)
        launch(kernel, LaunchConfig(grid=(N + 255) // 256, block=256, stream=stream), buf, np.uint64(N), np.uint64(k))
    stream.sync()
    host = np.empty(N, dtype=np.uint64)
    (err,) = driver.cuMemcpyDtoH(host.ctypes.data, int(buf.handle), N * 8)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuMemcpyDtoH: {err.name}")
    buf.close(stream)
    stream.close()
    return int(host.sum())


def main() -> int:
    dev = Device(0)
    dev.set_current()
    arch = "sm_" + "".join(str(x) for x in dev.compute_capability)
    module = Program(CODE, code_type="c++", options=ProgramOptions(arch=arch)).compile("cubin")
    kernel = module.get_kernel("fill")
    sums = {"main": run(dev, kernel, 2)}

    def worker() -> None:
        dev.set_current()  # a new thread binds the device's primary context
        sums["worker"] = run(dev, kernel, 3)

    thread = threading.Thread(target=worker, name="cuda-core-worker")
    thread.start()
    thread.join()
    expected = {"main": 2 * N * (N - 1) // 2, "worker": 3 * N * (N - 1) // 2}
    print(f"cuda.core sums: main {sums['main']}, worker {sums.get('worker')} (expected {expected['main']}, "
          f"{expected['worker']})")
    return 0 if sums == expected else 1


if __name__ == "__main__":
    sys.exit(main())
