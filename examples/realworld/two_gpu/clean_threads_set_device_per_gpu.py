"""Clean (two GPUs): one worker thread per GPU, each calling torch.cuda.set_device first, with its own stream.

Each thread binds its GPU before any CUDA call (the current device is per thread), creates a stream on
that GPU, runs its share of the batch there and synchronises its stream; the main thread gathers the
results on the CPU.

Report: https://github.com/kokkos/kokkos/pull/5746 -- a new thread gets the default CUDA environment
(device 0) unless cudaSetDevice is called on that thread, so it must be called on each thread.

Expected findings: none (no error, no warning).

    ctxlab audit -- examples/realworld/two_gpu/clean_threads_set_device_per_gpu.py
"""

import threading

import torch


def shard(gpu: int, x: torch.Tensor, out: dict) -> None:
    torch.cuda.set_device(gpu)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        w = torch.full((x.shape[1], 16), 0.5, device="cuda")
        y = (x.to("cuda") @ w).relu().sum(dim=0)
    stream.synchronize()
    out[gpu] = y.cpu()


def main() -> int:
    torch.manual_seed(0)
    batch = torch.randn(1024, 256)
    out: dict = {}
    threads = [threading.Thread(target=shard, args=(g, part, out), name=f"gpu-{g}")
               for g, part in enumerate(batch.chunk(2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = out[0] + out[1]
    print(f"per-GPU partial sums gathered: {tuple(total.shape)}, total {float(total.sum()):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
