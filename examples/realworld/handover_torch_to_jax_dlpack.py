"""A PyTorch tensor handed to JAX through DLPack after the side stream's block was left.

The tensor is produced on a torch.cuda.Stream. jax.dlpack.from_dlpack(tensor) passes JAX's stream to
tensor.__dlpack__, and PyTorch orders JAX's stream after PyTorch's *current* stream, the default stream
by then, not the side stream that is still running the products. JAX's reduction can read the buffer
before it is written. The program prints the sum it got and the one expected.

Report: https://github.com/jax-ml/jax/pull/28057 -- a DLPack round trip between to_dlpack and from_dlpack
with no synchronisation in between occasionally fails with a data mismatch on GPUs.

Expected finding: unordered-handover on thread MainThread, at the line marked HAZARD in main() (the
jax.dlpack.from_dlpack); the consumer's read is the line marked SYMPTOM.

    ctxlab audit -- examples/realworld/handover_torch_to_jax_dlpack.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

N = 4096
PRODUCTS = 24


def main() -> int:
    small = torch.full((64, 64), 1.0 / 64, device="cuda")
    (small @ small + small).sum().item()  # PyTorch's CUDA state and cuBLAS ready
    warm = jax.device_put(jnp.zeros((N, N), dtype=jnp.float32), jax.devices()[0])
    float(jnp.sum(warm))  # JAX's GPU client up and its reduction compiled before the hand-over
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        w = torch.full((N, N), 1.0 / N, device="cuda")  # J/n
        emb = w
        for _ in range(PRODUCTS):
            emb = emb @ w + w  # c J/n -> (c + 1) J/n
    arr = jax.dlpack.from_dlpack(emb)  # HAZARD: unordered-handover
    total = float(jnp.sum(arr))  # SYMPTOM: unordered-handover
    side.synchronize()
    expected = (PRODUCTS + 1) * N
    print(f"sum read by JAX: {total:.3f}; after the side stream finished: {float(emb.sum()):.3f} "
          f"(expected {expected})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
