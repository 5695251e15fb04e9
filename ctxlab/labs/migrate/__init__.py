"""migrate: host threads hand a context around; does runtime state move with it?

Thread 1 makes a context current, fills CuPy arrays, loads the probe module
and writes its ``__device__`` global, makes a stream, pops the context and
hands it on. Every thread in turn pushes it, checks it sees exactly what
thread 1 recorded and what the previous thread left, changes both, pops and
hands on. Side scenarios, each in its own process: one context current on two
threads at once, a thread that never received the context, CuPy's per-device
caches under a second context, and a kernel dereferencing memory of another
context. ``--context green`` relays a green context (its CUcontext from
cuCtxFromGreenCtx, made by ``ctxlab.cuda.green``) the same way, and adds: two
threads with it current at once (repeated), the SMs its kernels ran on, which
context owns memory allocated under it, and CuPy under it.
"""

from __future__ import annotations

from ctxlab.lab import Lab
from ctxlab.labs.migrate import claims, scenarios
from ctxlab.labs.migrate.claims import ARRAY_LEN, CLAIMS, GREEN, NAME
from ctxlab.labs.migrate.green import concurrent_green, green_cupy, green_memory, green_sm
from ctxlab.labs.migrate.options import MigrateOptions
from ctxlab.labs.migrate.relay import Relay, handoff
from ctxlab.labs.migrate.scenarios import cupy_kernel_reverse

__all__ = ["ARRAY_LEN", "CLAIMS", "GREEN", "LAB", "NAME", "MigrateOptions", "Relay", "concurrent_green",
           "cupy_kernel_reverse", "green_cupy", "green_memory", "green_sm", "handoff"]

LAB = Lab(NAME, "If a context belongs to a host thread, how do other threads reach it, and do pointers, "
                "__device__ globals and streams follow it?", MigrateOptions, claims.CLAIMS, scenarios.scenarios)
