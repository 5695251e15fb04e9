"""A CPU benchmark whose timer synchronises CUDA because a GPU is present, and so makes a context on GPU 0.

The model is timed on the CPU (device "cpu"). The timing helper, shared with the GPU benchmark, calls
torch.cuda.synchronize() whenever torch.cuda.is_available(): on a machine with a GPU that call
initialises CUDA and creates the primary context of GPU 0, for a run that never uses the GPU, and every
timing pays a device synchronisation.

Report: https://github.com/ultralytics/yolov5/issues/1816 -- time_synchronized() checks
torch.cuda.is_available() (True on a GPU workstation) although inference runs with --device cpu.

Expected finding: stray-context on thread MainThread, at the line marked HAZARD in time_synchronized()
(its first call).

    ctxlab audit -- examples/realworld/stray_cpu_benchmark_synchronize.py
"""

import time

import torch


def time_synchronized() -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # HAZARD: stray-context
    return time.perf_counter()


def main() -> int:
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)).to(device)
    images = torch.randn(8, 3, 64, 64, device=device)
    times = []
    with torch.no_grad():
        for _ in range(5):
            t0 = time_synchronized()
            out = model(images)
            times.append(time_synchronized() - t0)
    print(f"inference on {device}: output {tuple(out.shape)}, best {min(times) * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
