"""The lifecycle lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

Each scenario runs in a child process, recording after every call the thread's
current context (handle and id) and the primary context's state; with
--trace, the driver calls and resource events each call caused. The
first-context scenario starts in a new interpreter (nothing imported) so that
``import cupy`` itself is watched. Scenarios call ``cuda.bindings`` and CuPy
directly: those calls are the subject of the experiment.
"""

from __future__ import annotations

from ctxlab.lab import Lab, LabOptions, exports, scenarios_in
from ctxlab.labs.lifecycle import claims
from ctxlab.labs.lifecycle.claims import CLAIMS, NAME, VIEWS

__all__ = ["CLAIMS", "LAB", "NAME", "VIEWS", "first_context", "green_runtime"]

# The help of ``ctxlab lifecycle`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab lifecycle
  ctxlab lifecycle --trace --steps

Each sequence runs in a fresh process: import and first calls (in a new
interpreter that has imported nothing), cudaFree(0), cudaInitDevice, a
cuCtxCreate context made first, the handle through cuCtxGetCurrent, a new
host thread, and device flags before and after activation. --trace shows
the driver calls beneath.
"""

LAB = Lab(NAME, "When, and by which calls, does the runtime create its context, and how do I get its handle?",
          LabOptions, claims.CLAIMS, scenarios_in(f"{__name__}.scenarios"), views=VIEWS,
          check_options={"trace": True}, help=HELP)  # lifecycle.driver-calls-beneath needs the calls beneath each step

# The scenario functions, loaded when first used (they import ctxlab's tracer and CUDA helpers).
__getattr__ = exports(__name__, {"first_context": "scenarios", "green_runtime": "scenarios"})
