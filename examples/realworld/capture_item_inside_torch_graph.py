"""A training step captured with torch.cuda.graph that reads its loss with .item() inside the capture.

The step (an elementwise layer and a mean-square loss) is warmed up on a side stream, as the PyTorch
documentation shows, and then captured with torch.cuda.graph. The step checks the loss for divergence
with loss.item(): eagerly that works, but inside the captured region .item() copies the value to the host
and waits for the capturing stream, which CUDA does not permit: the call fails with "operation not
permitted when stream is capturing" (cudaErrorStreamCaptureUnsupported) and invalidates the capture, so
leaving the torch.cuda.graph block fails too ("operation failed due to a previous error during
capture"). The program catches the error and prints both messages.

Report: https://github.com/Lightning-AI/lightning-thunder/issues/727 -- a function that calls
Tensor.item() works eagerly and fails under CUDA graphs with "RuntimeError: CUDA error: operation not
permitted when stream is capturing".

Expected finding: capture-violation on thread MainThread, at the line marked HAZARD in step() (the .item()
that runs during the capture; the same line ran without fault during the warm-up); the failure when the
capture ends follows from it.

    ctxlab audit -- examples/realworld/capture_item_inside_torch_graph.py
"""

import torch

N = 1 << 16


def step(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
    y = torch.tanh(x * w + b)
    loss = (y * y).mean()
    if loss.item() > 1e4:  # HAZARD: capture-violation
        raise FloatingPointError("loss diverged")
    return y, loss


def first_line(exc: BaseException | None) -> str:
    return str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else repr(exc)


def main() -> int:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, device="cuda", generator=gen)
    w = torch.full((N,), 0.5, device="cuda")
    b = torch.zeros(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(x, w, b)  # warm-up: eager, .item() is allowed here
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            step(x, w, b)
        status, cause = "captured", None
    except RuntimeError as exc:
        status, cause = first_line(exc), exc.__context__
    print(f"capture: {status}")
    if cause is not None:
        print(f"raised first, inside the capture: {first_line(cause)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
