"""The peer lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

The lab runs on its device and the next one (``--device N`` pairs GPU N with GPU
(N+1) mod the count, so ``check --devices all`` on two GPUs runs 0->1 and 1->0).
Context A on the lab's GPU enables peer access toward a context P on the other
(cuDeviceCanAccessPeer first, then cuCtxEnablePeerAccess twice), is popped on
thread T1 and pushed on T2, which copies P's memory (cuMemcpyPeer, cuMemcpyDtoD)
and launches a kernel in A that reads it; once with cuCtxCreate contexts, once
with both primary contexts. Kernels that read the other GPU's memory without
access granted to their context (no context enabled it; only a sibling did; the
reverse direction) may fault, so they run repeated, each in a fresh process.
A primary context reset (of either GPU) shows whether access survives the
context being made again. ``thread-devices`` records each thread's runtime
device (cudaGetDevice/cudaSetDevice) and both primary contexts as two threads use them.

On a machine with one GPU every scenario records ``skipped`` with the reason.
The scenarios call cuda.bindings' peer-access and copy calls directly: they are
the subject of the experiment.
"""

from __future__ import annotations

from ctxlab.lab import Lab, LabOptions, exports, scenarios_in
from ctxlab.labs.peer import claims
from ctxlab.labs.peer.claims import CLAIMS, HANDOFF, NAME, RESET, THREADS, WITHOUT_ACCESS

__all__ = ["CLAIMS", "HANDOFF", "LAB", "NAME", "RESET", "THREADS", "WITHOUT_ACCESS", "can_access", "pair_or_reason"]

# The help of ``ctxlab peer`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab peer --device 0
  ctxlab peer --trace --steps

Runs on --device and the next GPU. A context enables access toward a
context on the other GPU (twice), moves to another thread, and there copies
and reads the other GPU's memory; kernels of contexts without access
(repeated), a primary context reset of either GPU, and each thread's
current device. Needs 2 GPUs: on one, every claim is skipped with why.
"""

LAB = Lab(NAME, "On two GPUs, does peer access belong to the context and follow it to another thread, and what is "
                "each thread's current device?", LabOptions, claims.CLAIMS, scenarios_in(f"{__name__}.scenarios"),
          help=HELP, gpus=2)

# The scenario functions, loaded when first used (they import ctxlab's tracer and CUDA helpers).
__getattr__ = exports(__name__, {"can_access": "scenarios", "pair_or_reason": "scenarios"})
