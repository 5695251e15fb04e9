"""The migrate lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

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

from ctxlab.lab import Lab, exports, scenarios_in
from ctxlab.labs.migrate import claims
from ctxlab.labs.migrate.claims import ARRAY_LEN, CLAIMS, GREEN, NAME
from ctxlab.labs.migrate.options import MigrateOptions

__all__ = ["ARRAY_LEN", "CLAIMS", "GREEN", "LAB", "NAME", "MigrateOptions", "Relay", "concurrent_green",
           "cupy_kernel_reverse", "green_cupy", "green_memory", "green_sm", "handoff"]

# The help of ``ctxlab migrate`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab migrate
  ctxlab migrate --threads 8 --rounds 100 --context all
  ctxlab migrate --format json -o migrate.json

Thread 1 allocates with CuPy, writes a __device__ global and makes a
stream; every thread in turn pushes the context, verifies pointers,
global, stream and values, updates them, pops and hands over. Also: one
context current on two threads, a thread without the context, CuPy's
caches under a second context (repeated), and a cross-context dereference,
each in its own process. With --context green (or all): the same relay of
a green context, and that context current on two threads at once
(repeated), the SMs its kernels ran on, which context owns its memory, and
CuPy under it.
"""

LAB = Lab(NAME, "If a context belongs to a host thread, how do other threads reach it, and do pointers, "
                "__device__ globals and streams follow it?", MigrateOptions, claims.CLAIMS,
          scenarios_in(f"{__name__}.scenarios"),
          # check relays all three kinds: the green-context claims are judged where the GPU has green contexts
          # (elsewhere their scenarios say why not)
          check_options={"context": "all"}, help=HELP)

# The scenario functions, loaded when first used (they import ctxlab's tracer and CUDA helpers).
__getattr__ = exports(__name__, {"cupy_kernel_reverse": "scenarios", "concurrent_green": "green",
                                 "green_cupy": "green", "green_memory": "green", "green_sm": "green",
                                 "Relay": "relay", "handoff": "relay"})
