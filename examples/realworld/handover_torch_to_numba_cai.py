"""A PyTorch tensor wrapped with numba.cuda.as_cuda_array and copied to the host while a side stream writes it.

The tensor is produced on a torch.cuda.Stream. numba.cuda.as_cuda_array(tensor) synchronises the stream
the interface names (NUMBA_CUDA_ARRAY_INTERFACE_SYNC is on by default), but PyTorch's interface names
none, so Numba orders nothing. Numba's copy_to_host on the legacy default stream does not wait for a
non-blocking stream: the host copy can see the buffer before the last product is written. The program
prints the sum it got and the one expected.

Report: https://github.com/numba/numba/issues/7706 -- Numba syncs on the interface's stream when it
accepts an array (CUDA_ARRAY_INTERFACE_SYNC); the sync is only as good as the stream the producer exports.

Expected finding: unordered-handover on thread MainThread, at the line marked HAZARD in main() (the
as_cuda_array); the consumer's read is the line marked SYMPTOM.

    ctxlab audit -- examples/realworld/handover_torch_to_numba_cai.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import torch
from numba import cuda

N = 4096
PRODUCTS = 24


def main() -> int:
    small = torch.full((64, 64), 1.0 / 64, device="cuda")
    (small @ small + small).sum().item()  # PyTorch's CUDA state and cuBLAS ready
    cuda.current_context()  # Numba attached to the primary context before the hand-over
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        w = torch.full((N, N), 1.0 / N, device="cuda")  # J/n
        scores = w
        for _ in range(PRODUCTS):
            scores = scores @ w + w  # c J/n -> (c + 1) J/n
    column = cuda.as_cuda_array(scores)  # HAZARD: unordered-handover
    host = column.copy_to_host()  # SYMPTOM: unordered-handover
    side.synchronize()
    print(f"sum copied by Numba: {float(host.sum()):.3f}; after the side stream finished: "
          f"{float(scores.sum()):.3f} (expected {(PRODUCTS + 1) * N})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
