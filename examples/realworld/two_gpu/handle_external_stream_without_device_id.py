"""A PyTorch stream of GPU 1 wrapped in cupy.cuda.ExternalStream without device_id, and used on GPU 0.

The program runs CuPy on GPU 0 and takes a stream PyTorch made on GPU 1 to run CuPy work on it, the way
an allocator shim wraps torch streams for CuPy. ExternalStream(ptr) without device_id marks the stream's
device unknown, so CuPy accepts it on the current device, GPU 0: entering it makes a stream of GPU 1's
context CuPy's current stream on GPU 0, and the next CuPy kernel launch on GPU 0 is refused
(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"). The program catches CuPy's error and prints it.

Report: https://github.com/pfnet/pytorch-pfn-extras/issues/744 -- pass device_id to
cupy.cuda.ExternalStream from torch.cuda.Stream.device (the fix, in #745, passes
device_id=stream.device_index); https://github.com/cupy/cupy/issues/3980 shows the failing launch.

Expected finding: handle-from-another-context on thread MainThread, at the line marked HAZARD in main()
(the CuPy kernel launched on GPU 0 with GPU 1's stream).

    ctxlab audit -- examples/realworld/two_gpu/handle_external_stream_without_device_id.py
"""

import cupy
import torch


def main() -> int:
    cupy.cuda.Device(0).use()
    base = cupy.arange(1 << 20, dtype=cupy.float32)  # GPU 0's context is made and current
    torch_stream = torch.cuda.Stream(device=1)
    shim = cupy.cuda.ExternalStream(torch_stream.cuda_stream)  # no device_id: "unknown", taken as GPU 0
    try:
        with shim:
            scaled = base * 2.0  # HAZARD: handle-from-another-context
            print(f"scaled on the wrapped stream: {float(scaled.sum()):.1f}")
    except Exception as exc:
        print(f"CuPy on GPU 0 with GPU 1's stream: {type(exc).__name__}: {exc}")
    torch.cuda.synchronize(1)
    print(f"with device_id the mix-up is refused up front: ExternalStream(ptr, device_id={torch_stream.device_index})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
