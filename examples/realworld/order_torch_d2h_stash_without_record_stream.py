"""An activation stashed to the host on a copy stream, then dropped without record_stream: its block is reused.

A training step offloads an activation to pinned host memory on a dedicated copy stream, queued behind
that stream's earlier offloads (here a chain of 24 products of 4096 x 4096 float32 matrices). The copy
stream waits for the main stream first, so the copy reads the finished activation. Then the step drops
its reference to the activation: PyTorch's caching allocator knows only the stream the tensor was
allocated on (the main stream) and, with no record_stream(copy stream), hands the block to the main
stream's next allocation at once. That allocation fills it with 7 while the copy has not run yet, and the
host stash gets 7 instead of the activation's 3. No call fails; the program prints what the stash holds.

Report: https://github.com/meta-pytorch/torchrec/pull/4231 -- a NaN corruption "caused by missing
record_stream() calls": async D2H copies on a side stream whose source tensor's memory was released back
to the caching allocator, which "can immediately reuse that memory for new allocations on the default
stream -- corrupting the in-flight copy".

Expected finding: freed-while-in-use on thread MainThread, at the line marked HAZARD in main() (the del of
the activation, the caching allocator's free); its cause is the copy on the copy stream, the line marked
CAUSE.

    ctxlab audit -- examples/realworld/order_torch_d2h_stash_without_record_stream.py

Info listed after the first wave-5 audit counted it: several-runtime-copies (MainThread).
"""

import torch

N = 4096
PRODUCTS = 24


def main() -> int:
    small = torch.full((64, 64), 1.0 / 64, device="cuda")
    (small @ small + small).sum().item()  # PyTorch's CUDA state and cuBLAS ready
    w = torch.full((N, N), 1.0 / N, device="cuda")
    stash = torch.empty(N * N, dtype=torch.float32, pin_memory=True)
    main_stream = torch.cuda.current_stream()
    offload = torch.cuda.Stream()
    act = torch.full((N * N,), 3.0, device="cuda")  # allocated on the main stream
    offload.wait_stream(main_stream)  # the copy reads the finished activation
    with torch.cuda.stream(offload):
        earlier = w
        for _ in range(PRODUCTS):
            earlier = earlier @ w  # the copy stream's earlier offloads
        stash.copy_(act, non_blocking=True)  # CAUSE: freed-while-in-use
    del act  # HAZARD: freed-while-in-use
    grad = torch.full((N * N,), 7.0, device="cuda")  # the main stream's next tensor: the same block
    offload.synchronize()
    torch.cuda.synchronize()
    print(f"stash values 3.0 (the activation): {int((stash == 3.0).sum())} of {N * N} (expected all); "
          f"7.0 (the next tensor's): {int((stash == 7.0).sum())}; next tensor {tuple(grad.shape)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
