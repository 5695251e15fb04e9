"""A CPU inference service whose metrics thread reports GPU memory, and so makes a context on GPU 0.

The service runs its model on the CPU. A metrics thread, copied from the GPU variant of the service,
samples torch.cuda.mem_get_info() whenever torch.cuda.is_available() says a GPU is there. is_available()
only counts devices; mem_get_info() calls cudaMemGetInfo, which creates the primary context of GPU 0 and
pins its memory for the rest of the process.

Report: https://github.com/pytorch/pytorch/issues/103584 -- torch.cuda.mem_get_info itself triggers CUDA
context initialisation (a maintainer: cudaMemGetInfo is expected to initialise the context).

Expected finding: stray-context on thread gpu-metrics, at the line marked HAZARD in metrics() (the first
sample; the later ones find the context made).

    ctxlab audit -- examples/realworld/stray_metrics_thread_mem_get_info.py
"""

import threading

import torch


def metrics(stop: threading.Event, first: threading.Event, samples: list) -> None:
    while not stop.is_set():
        if torch.cuda.is_available():
            free, total = torch.cuda.mem_get_info()  # HAZARD: stray-context
            samples.append(total - free)
        first.set()
        stop.wait(0.02)


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Linear(128, 10).eval()
    stop, first, samples = threading.Event(), threading.Event(), []
    sampler = threading.Thread(target=metrics, args=(stop, first, samples), name="gpu-metrics")
    sampler.start()
    first.wait(30)
    with torch.no_grad():
        answers = [int(model(torch.randn(32, 128)).argmax(dim=1).sum()) for _ in range(50)]
    stop.set()
    sampler.join()
    used = f"{samples[-1] / 2**20:.0f} MiB of GPU memory in use" if samples else "no GPU"
    print(f"served {len(answers)} CPU batches; metrics: {len(samples)} samples, {used}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
