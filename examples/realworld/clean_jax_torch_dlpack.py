"""Clean: PyTorch and JAX exchange arrays through DLPack with the consumer's stream passed both ways.

PyTorch produces on its current stream and JAX takes the tensor with jax.dlpack.from_dlpack, which passes
JAX's stream to tensor.__dlpack__: PyTorch orders that stream after its current stream, the one that
produced the data. Back the other way, torch.from_dlpack passes PyTorch's stream to the JAX array's
__dlpack__, and JAX makes it wait until the array is ready. Both libraries work on the primary context.

Report: https://github.com/mila-iqia/torch_jax_interop/pull/3 -- torch/JAX interop through from_dlpack
with the __dlpack__ protocol (the consumer's stream is handed to the producer), instead of raw capsules.

Expected findings: none (no error, no warning; several-runtime-copies is info: PyTorch and XLA each
bring a CUDA runtime).

    ctxlab audit -- examples/realworld/clean_jax_torch_dlpack.py
Info listed after the wave-4 audit counted it: several-runtime-copies (MainThread)."""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import torch  # noqa: E402

N = 1 << 12


def main() -> int:
    t = torch.arange(N, device="cuda", dtype=torch.float32) * 2.0  # on PyTorch's current stream
    arr = jax.dlpack.from_dlpack(t)  # JAX's stream is ordered after PyTorch's current stream
    total = float(jnp.sum(arr))
    y = jnp.sqrt(arr + 1.0)
    back = torch.from_dlpack(y)  # PyTorch's stream waits until y is ready
    checksum = float(back.sum())
    print(f"torch -> jax sum {total:.0f} (expected {float(N) * (N - 1):.0f}); jax -> torch checksum {checksum:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
