"""A trainer on GPU 1 whose prefetch thread uploads batches with .cuda(), and so makes a context on GPU 0.

The trainer selects GPU 1 on its main thread (torch.cuda.set_device(1)) and trains there. A background
thread prefetches the next batches and uploads them with tensor.cuda(non_blocking=True) to overlap the
copy with compute. The current device is per thread: the prefetch thread's is still GPU 0, so .cuda()
creates the primary context of GPU 0, a GPU this job never means to use (on a shared node, someone
else's), and puts the batches there; the main thread then has to move them to GPU 1.

Report: https://github.com/facebookresearch/fairseq/pull/3560 -- a cuda:0 context appeared until the
BackgroundConsumer thread set its device to the right GPU: the default device is thread-specific, so new
threads fall back to GPU 0 (also https://github.com/pytorch/pytorch/issues/21081).

Expected finding: stray-context on thread prefetch, at the line marked HAZARD in prefetch() (the first
upload; it makes the context on GPU 0).

    ctxlab audit -- examples/realworld/two_gpu/stray_prefetch_thread_gpu0.py
"""

import queue
import threading

import torch


def prefetch(batches: queue.Queue, steps: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(256, 64, generator=gen)
        batches.put(x.cuda(non_blocking=True))  # HAZARD: stray-context
    batches.put(None)


def main() -> int:
    torch.cuda.set_device(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches: queue.Queue = queue.Queue(maxsize=4)
    loader = threading.Thread(target=prefetch, args=(batches, 10), name="prefetch")
    loader.start()
    devices = set()
    while (x := batches.get()) is not None:
        devices.add(str(x.device))
        loss = model(x.to("cuda:1")).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    loader.join()
    torch.cuda.synchronize()
    print(f"trained on cuda:{torch.cuda.current_device()}, loss {loss.item():.4f}; "
          f"batches arrived on {sorted(devices)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
