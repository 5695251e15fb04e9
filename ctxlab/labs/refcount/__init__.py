"""The refcount lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

The old text says a context's lifetime is a usage count moved by
cuCtxAttach/cuCtxDetach and decremented by cudaThreadExit. Today the primary
context has a reference count (cuDevicePrimaryCtxRetain/Release) that each
copy of the runtime in the process also holds. Every scenario runs in its own
child process: a reset or an over-release leaves the process unusable. Those
that use data or handles after a release, a reset or a destroy are undefined
behaviour: they run several times, each in a fresh process, and their claims
judge over the distribution. The scenarios call cuda.bindings' driver and
runtime directly where the call is the subject of the experiment.
"""

from __future__ import annotations

from ctxlab.lab import Lab, LabOptions, scenarios_in
from ctxlab.labs.refcount import claims
from ctxlab.labs.refcount.claims import CLAIMS, NAME, VIEWS

__all__ = ["CLAIMS", "LAB", "NAME", "VIEWS"]

# The help of ``ctxlab refcount`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab refcount
  ctxlab refcount --repeats 10 --steps

Each scenario runs in its own process: the runtime's own references to
the primary context, releasing without a retain, cudaDeviceReset under
CuPy, cuDevicePrimaryCtxReset, cuCtxAttach/cuCtxDetach and cuCtxDestroy
on a created context, and whether cudaThreadExit still exists. Scenarios
that use data after a release, reset or destroy run --repeats times.
"""

LAB = Lab(NAME, "What keeps a context alive, and what do release and reset destroy?", LabOptions, claims.CLAIMS,
          scenarios_in(f"{__name__}.scenarios"), views=VIEWS, help=HELP)
