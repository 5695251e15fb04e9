"""A consumer stream told to wait for the producer's event before the producer has recorded it: it waits for nothing.

An overlap scheduler queues the consumer side of a step first: on the consumer stream it waits for the
producer's "ready" event and then reduces the activations. Only after that does it queue the producer
(a chain of 24 products of 4096 x 4096 float32 matrices, the last written into the activations) and
record the event. A torch.cuda.Event is created lazily on its first record, so the earlier wait() made no
CUDA call at all: the consumer stream is ordered after nothing, and its reduction reads the activations
before the producer has written them. No call fails; the program prints the sum read and the one expected.

Report: https://github.com/sgl-project/sglang/pull/14214 -- an event based on a waited-for value "for the
scenarios where the record happens later than the wait": event.wait() on one stream queued before
event.record() on another.

Expected finding: wait-orders-nothing on thread MainThread, at the line marked HAZARD in main() (the
wait()); its cause is the event's creation, the line marked CAUSE.

    ctxlab audit -- examples/realworld/order_torch_event_wait_before_record.py

Info listed after the first wave-5 audit counted it: several-runtime-copies (MainThread).
"""

import torch

N = 4096
PRODUCTS = 24


def main() -> int:
    small = torch.full((64, 64), 1.0 / 64, device="cuda")
    (small @ small + small).sum().item()  # PyTorch's CUDA state and cuBLAS ready
    producer = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    ready = torch.cuda.Event()  # CAUSE: wait-orders-nothing
    w = torch.full((N, N), 1.0 / N, device="cuda")  # J/n
    act = torch.zeros((N, N), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(consumer):  # the consumer is queued first
        ready.wait()  # HAZARD: wait-orders-nothing
        total = act.sum()
    with torch.cuda.stream(producer):
        x = w
        for _ in range(PRODUCTS - 1):
            x = x @ w + w  # c J/n -> (c + 1) J/n
        torch.matmul(x, w, out=act)
        ready.record()
    consumer.synchronize()
    producer.synchronize()
    print(f"sum the consumer read: {float(total):.3f}; after the producer: {float(act.sum()):.3f} "
          f"(expected {PRODUCTS * N})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
