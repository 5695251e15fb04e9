"""A simulation engine that keeps its own context current and calls a PyTorch model from inside it.

The engine (OpenMM-like) creates its context with cuCtxCreate and keeps it current while it steps. A
PyTorch force model is evaluated inside the step. PyTorch works on the primary context: it does not push
it, so its allocator and kernels run in whichever context is current, here the engine's, or fail with
obscure errors depending on what PyTorch had cached before.

Report: https://github.com/openmm/openmm-torch/pull/78 -- the CUDA runtime API that PyTorch uses expects
the primary context to be current when a PyTorch function is invoked; if it is not, things often still
work but sometimes fail with obscure errors. The fix pushes the primary context around the model call.

Expected finding: non-primary-current on thread MainThread, at the line marked HAZARD in forces() (the
first PyTorch CUDA call, while the engine's context is current).

    ctxlab audit -- examples/realworld/nonprimary_torch_under_created_context.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import os
import sys

import torch
from cuda.bindings import driver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _rw import check, device  # noqa: E402


def forces(model: torch.nn.Module, positions) -> float:
    model = model.to("cuda")  # HAZARD: non-primary-current
    x = torch.as_tensor(positions, device="cuda")
    energy = model(x).sum()
    return float(energy)


def main() -> int:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    engine = check(driver.cuCtxCreate(None, 0, device(0)), "cuCtxCreate")  # the engine's context, kept current
    positions = torch.rand(128, 3).numpy()
    try:
        print(f"energy under the engine's context: {forces(model, positions):.4f}")
        torch.cuda.empty_cache()
    except Exception as exc:
        print(f"PyTorch under the engine's context: {type(exc).__name__}: {exc}")
    check(driver.cuCtxDestroy(engine), "cuCtxDestroy")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
