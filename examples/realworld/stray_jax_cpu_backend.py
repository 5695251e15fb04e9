"""A CPU-only JAX job that still brings up the GPU backend, and with it a context on GPU 0.

The job places its arrays on the CPU device and never puts anything on the GPU. Asking JAX for its CPU
devices initialises every backend it has a plugin for: the CUDA plugin's client comes up and retains a
context on GPU 0 that holds GPU memory for the life of the process (XLA_PYTHON_CLIENT_PREALLOCATE=false
only keeps the pool from growing to most of the GPU).

Report: https://github.com/jax-ml/jax/issues/27232 -- a program that opts for the CPU backend with
jax.devices('cpu') makes JAX allocate GPU memory; twenty such test processes take 40% of the GPU.

Expected finding: stray-context on thread MainThread, at the line marked HAZARD in main() (the first
jax.devices call, which initialises the CUDA backend). The fix, JAX_PLATFORMS=cpu before importing jax,
is clean_jax_platforms_cpu.py.

    ctxlab audit -- examples/realworld/stray_jax_cpu_backend.py
"""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def main() -> int:
    cpu = jax.devices("cpu")[0]  # HAZARD: stray-context
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((256, 256), dtype=np.float32), cpu)
    w = jax.device_put(rng.standard_normal((256, 64), dtype=np.float32), cpu)
    loss = jax.jit(lambda a, b: jnp.tanh(a @ b).mean())(x, w)
    print(f"loss {float(loss):.5f} computed on {sorted(str(d) for d in loss.devices())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
