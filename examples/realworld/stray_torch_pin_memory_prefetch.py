"""A CPU-only training loop whose prefetch thread pins its batches, and so makes a context on GPU 0.

A small model trains on the CPU. A background thread builds the batches and pins them, as GPU input
pipelines do "to make the host-to-device copy fast"; this job never copies anything to the GPU. Pinned
memory comes from cudaHostAlloc, which needs a context: the CUDA runtime creates the primary context of
the thread's current device (GPU 0) in a program that uses no GPU at all.

Report: https://github.com/pytorch/pytorch/issues/21081 -- tensor.pin_memory() always asks for a context
on the current device, so a DataLoader(..., pin_memory=True) creates a context on GPU 0.

Expected finding: stray-context on thread prefetch, at the line marked HAZARD in prefetch() (the first
pin_memory call; the later ones find the context made).

    ctxlab audit -- examples/realworld/stray_torch_pin_memory_prefetch.py
"""

import queue
import threading

import torch


def prefetch(batches: queue.Queue, steps: int) -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(64, 32, generator=gen)
        y = (x.sum(dim=1, keepdim=True) > 0).float()
        batches.put((x.pin_memory(), y))  # HAZARD: stray-context
    batches.put(None)


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches: queue.Queue = queue.Queue(maxsize=4)
    loader = threading.Thread(target=prefetch, args=(batches, 20), name="prefetch")
    loader.start()
    losses = []
    while (item := batches.get()) is not None:
        x, y = item
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    loader.join()
    print(f"trained {len(losses)} steps on the CPU: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
