"""CuPy features handed to PyTorch through DLPack after the producer stream's block was left.

The feature extractor runs in CuPy on a non-blocking stream (a chain of large matrix products that keeps
the GPU busy for tens of milliseconds; both libraries are warmed up first, so the chain is only queued
GPU work). The result is converted with torch.from_dlpack after the `with stream:` block: torch passes
its current stream to __dlpack__, and CuPy orders that stream after CuPy's
*current* stream, which is the null stream by then, not the producer. A non-blocking stream does not
synchronise with the null stream, so PyTorch's reduction can read the buffer before the last product has
written it. The program prints the sum it got and the one expected.

Report: https://github.com/cupy/cupy/pull/8683 -- DLPack stream handling: syncing over the consumer
stream is wrong when "the stream order was not established before calling toDlpack()"; the producer's
stream must be the one ordered before the consumer's.

Expected finding: unordered-handover on thread MainThread, at the line marked HAZARD in main() (the
torch.from_dlpack); the consumer's read is the line marked SYMPTOM.

    ctxlab audit -- examples/realworld/handover_cupy_to_torch_dlpack.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import cupy
import torch

N = 4096
PRODUCTS = 24


def main() -> int:
    cupy.cuda.Device(0).use()
    small = cupy.full((64, 64), 1.0 / 64, dtype=cupy.float32)
    (small @ small + small).sum()  # CuPy's kernels and cuBLAS ready: the chain below is only queued GPU work
    torch.ones(1, device="cuda").sum().item()  # PyTorch's CUDA state ready before the hand-over
    producer = cupy.cuda.Stream(non_blocking=True)
    with producer:
        w = cupy.full((N, N), 1.0 / N, dtype=cupy.float32)  # J/n
        features = w
        for _ in range(PRODUCTS):
            features = features @ w + w  # c J/n -> (c + 1) J/n
    tensor = torch.from_dlpack(features)  # HAZARD: unordered-handover
    total = tensor.sum().item()  # SYMPTOM: unordered-handover
    producer.synchronize()
    print(f"sum read by PyTorch: {total:.3f}; after the producer finished: {float(features.sum()):.3f} "
          f"(expected {(PRODUCTS + 1) * N})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
