"""PyTorch activations handed to CuPy through __cuda_array_interface__ while a side stream still writes them.

The model's last layers run on a torch.cuda.Stream (non-blocking, like every stream from PyTorch's pool)
so that they overlap with other work. The output goes to CuPy post-processing with cupy.asarray, which
reads PyTorch's __cuda_array_interface__: PyTorch exports version 2 of the interface, with no "stream"
entry, so CuPy has nothing to wait for and its reduction on the null stream can read the buffer before
the side stream has written it. The program prints the sum it got and the one expected.

Report: https://github.com/numba/numba/pull/5162 -- the CUDA Array Interface v3 adds a "stream" entry
because a consumer cannot otherwise know that the producer's work on its stream has not finished; a
producer that exports no stream leaves the synchronisation to the user.

Expected finding: unordered-handover on thread MainThread, at the line marked HAZARD in main() (the
cupy.asarray); the consumer's read is the line marked SYMPTOM.

    ctxlab audit -- examples/realworld/handover_torch_to_cupy_cai.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import cupy
import torch

N = 4096
PRODUCTS = 24


def main() -> int:
    small = torch.full((64, 64), 1.0 / 64, device="cuda")
    (small @ small + small).sum().item()  # PyTorch's CUDA state and cuBLAS ready
    float(cupy.zeros((N, N), dtype=cupy.float32).sum())  # CuPy's reduction compiled before the hand-over
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        w = torch.full((N, N), 1.0 / N, device="cuda")  # J/n
        act = w
        for _ in range(PRODUCTS):
            act = act @ w + w  # c J/n -> (c + 1) J/n
    post = cupy.asarray(act)  # HAZARD: unordered-handover
    total = float(post.sum())  # SYMPTOM: unordered-handover
    side.synchronize()
    expected = (PRODUCTS + 1) * N
    print(f"sum read by CuPy: {total:.3f}; after the side stream finished: {float(act.sum()):.3f} "
          f"(expected {expected})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
