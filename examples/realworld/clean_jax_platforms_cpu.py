"""Clean: a CPU-only JAX job that keeps JAX off the GPU with JAX_PLATFORMS=cpu, set before importing jax.

The same job as stray_jax_cpu_backend.py with the fix: JAX_PLATFORMS=cpu limits the backends JAX
initialises to the CPU one, so the CUDA plugin's client never comes up and no context is made.

Report: https://github.com/jax-ml/jax/issues/27232 -- choosing the CPU backend still initialises the GPU
and allocates GPU memory; restricting the platforms keeps the GPU out of the process.

Expected findings: none (no CUDA context at all).

    ctxlab audit -- examples/realworld/clean_jax_platforms_cpu.py
"""

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def main() -> int:
    cpu = jax.devices("cpu")[0]
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((256, 256), dtype=np.float32), cpu)
    w = jax.device_put(rng.standard_normal((256, 64), dtype=np.float32), cpu)
    loss = jax.jit(lambda a, b: jnp.tanh(a @ b).mean())(x, w)
    print(f"loss {float(loss):.5f} on {[d.platform for d in jax.devices()]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
