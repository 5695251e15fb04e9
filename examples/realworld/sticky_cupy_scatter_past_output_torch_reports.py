"""A CuPy scatter kernel that writes padding rows far past its output, and PyTorch reports the fault.

A batching stage packs variable-length sequences into a fixed number of slots: each input row carries
the slot it goes to, and padding rows carry slot -1. The slots travel to the GPU as uint32, so -1 turns
into 4294967295, and the hand-written CuPy RawKernel that scatters the rows does not check the slot
against the number of slots: it writes the padding rows terabytes past the end of its output. The
launch itself returns success; the fault is found asynchronously, and the next CUDA call, which
happens to be PyTorch's, in code that has nothing to do with the scatter (reading the model's confidence
with .item()), raises "CUDA error: an illegal memory access was encountered" (700). The context is broken
from then on: every later CUDA call of every library fails with the same error.

Report: https://github.com/kwea123/ngp_pl/issues/29 -- a custom CUDA kernel indexes past its array when
an index goes out of range; the illegal memory access is raised afterwards by a PyTorch call that had
nothing to do with it.

Expected finding: sticky-error on thread MainThread, at the line marked HAZARD in main() (the
RawKernel launch that faults, the only launch since the last synchronisation); the error first surfaces
at the line marked SYMPTOM (PyTorch's .item(), a copy and a wait, no launch). The program catches the
RuntimeError and prints it.

    ctxlab audit -- examples/realworld/sticky_cupy_scatter_past_output_torch_reports.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import cupy
import numpy as np
import torch

ROWS, COLS, SLOTS = 96, 128, 64  # 64 real rows and 32 padding rows

SCATTER = r"""
extern "C" __global__ void scatter_rows(const float* rows, const unsigned int* slot, float* out,
                                        int n_rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows * cols) return;
    int r = i / cols;
    int c = i - r * cols;
    // no check that slot[r] is below the number of slots: a padding row's slot -1 is 4294967295 here
    out[(unsigned long long)slot[r] * cols + c] = rows[i];
}
"""


def main() -> int:
    logits = torch.randn(SLOTS, 10, device="cuda")  # the model's side, computed by PyTorch
    confidence = logits.softmax(-1).amax(-1).mean()
    torch.cuda.synchronize()

    slots = np.full(ROWS, -1, dtype=np.int64)
    slots[:SLOTS] = np.arange(SLOTS)
    rows = cupy.asarray(np.random.default_rng(0).random((ROWS, COLS), dtype=np.float32))
    slot = cupy.asarray(slots.astype(np.uint32))  # -1 becomes 4294967295
    out = cupy.zeros((SLOTS, COLS), dtype=cupy.float32)
    scatter = cupy.RawKernel(SCATTER, "scatter_rows")
    scatter.compile()
    n = ROWS * COLS
    scatter(((n + 255) // 256,), (256,), (rows, slot, out, np.int32(ROWS), np.int32(COLS)))  # HAZARD: sticky-error
    try:
        value = confidence.item()  # SYMPTOM: sticky-error
        status = f"no error (confidence {value:.4f})"
    except RuntimeError as exc:  # torch.AcceleratorError is a RuntimeError
        status = str(exc).strip().splitlines()[0]
    print(f"PyTorch's next call after the CuPy scatter: {status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
