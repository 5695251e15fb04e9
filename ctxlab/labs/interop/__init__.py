"""The interop lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

What this lab covers, area by area as issue 15 numbers them:

1. **Which context**: each library initialised alone in a fresh interpreter, and
   all of them together in one: the context (handle and ``cuCtxGetId``) each one
   leaves current, whether it is the device's primary context, where its first
   allocation lands (``CU_POINTER_ATTRIBUTE_CONTEXT``), and what a fresh host
   thread's first use of the library does.
2. **References**: how many primary-context references a library's
   initialisation holds, counted as ``refcount`` counts them: the releases the
   driver accepts beyond the lab's own retains before the primary context goes
   inactive (one library per fresh process, then all together).
3. **Exchange**: DLPack and ``__cuda_array_interface__`` between pairs of
   libraries: the same pointer, the context that owns it, and whether the value
   the consumer reads is what the producer wrote on its own (non-default)
   stream; on the main thread and on a worker thread that received the context
   by push. A handover made after leaving the producer's stream is recorded too.
4. **Under another context** (``interop.under``): each library with a
   ``cuCtxCreate`` or a green context current, and PyTorch's own green contexts.
5. **Blast radius** (``interop.blast``): each way to tear a context down, against
   every library's live data, repeated in fresh processes.
6. **Processes**: after CUDA was initialised in the parent, what the driver,
   CuPy and PyTorch return in a child made by ``os.fork()``, and which
   multiprocessing start methods give a working CUDA child (undefined-behaviour
   territory: repeated in fresh processes); CUDA IPC memory handles opened in a
   child started with ``spawn`` (``interop.memory``).
7. **Memory that belongs to no context** (``interop.memory``): what
   ``CU_POINTER_ATTRIBUTE_CONTEXT`` reports for the virtual memory API and the
   other allocators, and for the libraries built on them.

A second GPU is not covered yet; labs/interop.md says what is left.

Every library is optional: a scenario that needs a missing one records why and
its claims are ``skipped``. Numba is used through its context and array APIs
(``current_context``, ``device_array``, ``as_cuda_array``); only the scenarios
under another context try a Numba kernel, and record what compiling it gives.
Scenarios call each library and ``cuda.bindings`` directly: those calls are the
subject of the experiment.
"""


from __future__ import annotations

from ctxlab.lab import Lab, LabOptions, exports, scenarios_in
from ctxlab.labs.interop import claims
from ctxlab.labs.interop.blast_claims import TEARDOWNS
from ctxlab.labs.interop.claims import CLAIMS, NAME, PAIRS
from ctxlab.labs.interop.names import LIBRARIES

__all__ = ["CLAIMS", "LAB", "LIBRARIES", "NAME", "PAIRS", "TEARDOWNS", "Missing", "alone", "refs"]

# The help of ``ctxlab interop`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab interop
  ctxlab interop --format markdown -o interop.md

Each library alone in a fresh process (the context it leaves current, its
allocation's context, a fresh thread's first use, the primary-context
references it holds), all of them together, DLPack and
__cuda_array_interface__ exchanges between pairs (same pointer, owning
context, stream order, a worker thread), each library under a cuCtxCreate
or green context, each teardown (device reset, primary release or reset,
cuCtxDestroy) against every library's data (repeated), a child made by fork
or by each multiprocessing start method (repeated), CUDA IPC handles in a
spawned child, and which context owns VMM and pool memory. A missing
library is skipped.
"""

LAB = Lab(NAME, "Do CuPy, PyTorch, JAX, Numba and cuda.core share one context, who holds it, can they exchange "
          "arrays safely, what do they do under another context, what does one teardown do to the others, and what "
          "survives fork?", LabOptions, claims.CLAIMS, scenarios_in(f"{__name__}.scenarios"), help=HELP)

# The scenario functions, loaded when first used (they import ctxlab's tracer and CUDA helpers).
__getattr__ = exports(__name__, {"Missing": "libs", "alone": "scenarios", "refs":
                       "scenarios"})
