"""Clean: an activation stashed to the host on a copy stream, marked with record_stream before it is dropped.

The same offload as order_torch_d2h_stash_without_record_stream.py, done right: the activation is marked
with record_stream(copy stream) after its copy is queued, so PyTorch's caching allocator does not hand its
block to another tensor until the work queued on the copy stream at the time of the free has completed.
The next tensor gets another block, and the stash holds the activation's 3.

Report: https://github.com/meta-pytorch/torchrec/pull/4231 -- the fix of the NaN corruption was "adding
tensor.record_stream(d2h_stream) to tell the allocator to defer reuse until the side stream catches up".

Expected findings: none.

    ctxlab audit -- examples/realworld/clean_order_torch_d2h_stash_record_stream.py

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
        stash.copy_(act, non_blocking=True)
    act.record_stream(offload)  # the allocator waits for the copy stream before reusing the block
    del act
    grad = torch.full((N * N,), 7.0, device="cuda")  # the main stream's next tensor: another block
    offload.synchronize()
    torch.cuda.synchronize()
    print(f"stash values 3.0 (the activation): {int((stash == 3.0).sum())} of {N * N} (expected all); "
          f"7.0 (the next tensor's): {int((stash == 7.0).sum())}; next tensor {tuple(grad.shape)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
