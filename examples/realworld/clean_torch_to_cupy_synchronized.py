"""Clean: a side-stream PyTorch result handed to CuPy through __cuda_array_interface__ after a synchronize.

The same hand-over as handover_torch_to_cupy_cai.py, done right: the side stream is synchronised before
cupy.asarray reads the tensor's interface (PyTorch exports no stream in it), so CuPy's reduction sees
the finished data.

Report: https://github.com/numba/numba/pull/5162 -- the CUDA Array Interface synchronisation semantics:
when the producer exports no stream, the user must make sure the data is ready before the consumer uses
it.

Expected findings: none (no error, no warning; several-runtime-copies is info).

    ctxlab audit -- examples/realworld/clean_torch_to_cupy_synchronized.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import cupy
import torch

N = 2048
PRODUCTS = 8


def main() -> int:
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        w = torch.full((N, N), 1.0 / N, device="cuda")  # J/n
        act = w
        for _ in range(PRODUCTS):
            act = act @ w + w  # c J/n -> (c + 1) J/n
    side.synchronize()  # the data is ready before anyone else reads it
    total = float(cupy.asarray(act).sum())
    print(f"sum read by CuPy: {total:.3f} (expected {(PRODUCTS + 1) * N})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
