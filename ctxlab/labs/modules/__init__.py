"""The modules lab: its question, help, options and claims (``LAB``); the scenarios load when it runs.

Each scenario runs in its own child process (CUDA_MODULE_LOADING is read once,
when CUDA initialises). Witnesses of a load, recorded after every step by the
shared step recorder: CUPTI's MODULE_LOADED resource event where CUPTI works,
and device memory in use (cuMemGetInfo): the probe module carries a large
``__device__`` array whose memory appears when the module is really loaded into
a context. Module and library loading are the subject of these experiments, so
the scenarios call cuda.bindings' module and library functions directly.
"""


from ctxlab.lab import Lab, LabOptions, exports, scenarios_in
from ctxlab.labs.modules import claims
from ctxlab.labs.modules.claims import CLAIMS, NAME, VIEWS

__all__ = ["CLAIMS", "LAB", "NAME", "library", "module_loading", "nvcc", "two_contexts"]

# The help of ``ctxlab modules`` below its question: examples, then what it runs.
HELP = """\b
  ctxlab modules
  ctxlab modules --format junit -o modules.xml

Each scenario runs in a fresh process: the same module under
CUDA_MODULE_LOADING=EAGER, LAZY and unset (witnessed by CUPTI's
MODULE_LOADED and by device memory), one module in two contexts, a
context-independent library (cuLibraryLoadData) in two contexts, nvcc's
registration stub and a library built with it (needs nvcc), and CuPy's
kernel cache under another context (repeated).
"""

LAB = Lab(NAME, "How and when are modules loaded into a context, from nvcc's stub to lazy loading?", LabOptions,
          claims.CLAIMS, scenarios_in(f"{__name__}.scenarios"), views=VIEWS, help=HELP)

# The scenario functions, loaded when first used (they import ctxlab's tracer and CUDA helpers).
__getattr__ = exports(__name__, {"library": "scenarios", "module_loading": "scenarios", "nvcc": "scenarios",
                       "two_contexts": "scenarios"})
