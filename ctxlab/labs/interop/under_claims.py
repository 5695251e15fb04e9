"""interop's claims under another context (area 4): a library used while a cuCtxCreate or a green context is
current, and PyTorch's own green contexts. Pure: no CUDA."""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.claim import Claim, Facts, Observations, decided, some
from ctxlab.cuda.green import SOURCE_AS_PRIMARY
from ctxlab.labs.interop.names import CUDA_CORE, JAX_DOC, LIBRARIES, TITLES

N = 4096  # elements of each library's array: 1..N, whose sum is known
SUM = N * (N + 1) // 2
KINDS = ("created", "green")
CONTEXT_NAMES = {"created": "the created context", "green": "the green context"}
IOTA = ('extern "C" __global__ void ctxlab_iota(long long* a, int n) '
        "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = i + 1; }")

RUNTIME_CURRENT = ("CUDA Runtime API (13.0), Interactions with the CUDA Driver API: 'CUDA Runtime API calls operate "
                   "on the CUDA Driver API CUcontext which is current to to the calling host thread.' "
                   "(https://docs.nvidia.com/cuda/archive/13.0.1/cuda-runtime-api/group__CUDART__DRIVER.html); "
                   "{lib} calls the CUDA Runtime")
NUMBA_SOURCE = ("numba-cuda, cudadrv/driver.py, get_or_create_context: raises RuntimeError('Numba cannot operate on "
                "non-primary CUDA context ...') when the active context is not the device's primary context "
                "(https://github.com/NVIDIA/numba-cuda/blob/main/numba_cuda/numba/cuda/cudadrv/driver.py); not in "
                "the user documentation: recorded as observed")
TORCH_GREEN = ("PyTorch, torch.cuda.green_contexts.GreenContext (beta): 'Wrapper around a CUDA green context'; "
               "create: 'num_sms (int): The number of SMs to use in the green context'; 'CUDA work should be placed "
               "on streams created from the green context' (https://github.com/pytorch/pytorch/blob/main/torch/"
               "cuda/green_contexts.py); which SMs its kernels use and where its allocations land are not "
               "documented: recorded as observed")


def which(context_id: int | None, ids: dict[str, int | None]) -> str:
    """A context named by what it is here: ``ids`` maps a name ("the created context"...) to its cuCtxGetId (the
    scenarios name contexts so for the evidence; the claims where a name decides)."""
    if context_id is None:
        return "none"
    for name, known in ids.items():
        if known is not None and known == context_id:
            return name
    return f"another context (id {context_id})"


def facts_under(kind: str, lib: str) -> Callable[[Observations], dict]:
    """What ``lib`` did under the created or green context: its allocation's owner, its kernel, the current context."""

    def facts(obs: Observations) -> dict:
        v = some(obs, "under context", f"under-{kind}-{lib}")[0].value
        ids = {CONTEXT_NAMES[kind]: v["context_id"], "the primary context": v["primary_id"]}
        # decided: recordings made before the scenario recorded the id current after the allocation carry its name
        after_alloc = decided(v, "after_alloc_is", lambda current: which(current, ids), "after_alloc_id")
        return {"library": TITLES[lib], "version": v.get("version") or "unknown", "context": CONTEXT_NAMES[kind],
                "context_id": v["context_id"], "primary_id": v["primary_id"], "call": v["call"],
                "alloc": v["alloc"], "owner_is": v["owner_is"], "before_is": v["before_is"],
                "after_alloc_is": after_alloc, "kernel": v["kernel"],
                "after_kernel_is": v["after_kernel_is"],
                "first_call": f"; Device.allocate before set_current(): {v['first_call']}" if v["first_call"] else ""}

    return facts


def _expect_stays(kind: str) -> Callable[[Facts], bool]:
    """The runtime's promise: its calls operate on the current context, so they land there and leave it current."""
    name = CONTEXT_NAMES[kind]
    return lambda f: (f["owner_is"] == name and f["after_alloc_is"] == name == f["after_kernel_is"]
                      and f["kernel"] == "correct")


def _expect_primary(f: Facts) -> bool:
    """cuda.core's promise: set_current() without a context makes the primary context current."""
    return f["after_alloc_is"] == "the primary context"


def _under_claim(kind: str, lib: str) -> Claim:
    # The runtime's promise binds the runtime, not the libraries over it: CuPy and PyTorch call cudaSetDevice
    # or retain the primary context themselves (on the H200, CuPy's kernel left the primary context current and
    # PyTorch allocated in it), and neither documents what it does under another context: observations.
    promised = lib == "cuda-core"
    if lib in ("cupy", "torch"):
        source = RUNTIME_CURRENT.format(lib=TITLES[lib]) + ("" if kind == "created" else "; " + SOURCE_AS_PRIMARY) \
            + f"; {TITLES[lib]} documents nothing of its own about another context current: recorded as observed"
    else:
        source = {"jax": JAX_DOC, "numba": NUMBA_SOURCE, "cuda-core": CUDA_CORE}[lib]
    if lib == "cuda-core":
        statement = (f"With {CONTEXT_NAMES[kind]} current, cuda.core's Device.set_current() makes the primary "
                     "context current (where its allocation lands and whether its kernel runs are recorded).")
        expect: Callable[[Facts], bool] | None = _expect_primary
    elif promised:
        statement = (f"With {CONTEXT_NAMES[kind]} current, {TITLES[lib]}'s allocation belongs to it, its kernel "
                     "gives the right values, and it stays the thread's current context.")
        expect = _expect_stays(kind)
    else:
        statement = (f"With {CONTEXT_NAMES[kind]} current: which context owns {TITLES[lib]}'s allocation, whether "
                     "its kernel gives the right values, and which context it leaves current.")
        expect = None
    return Claim(f"interop.under-{kind}.{lib}", statement, source, "promise" if expect else "observation",
                 (f"under-{kind}-{lib}",), facts_under(kind, lib),
                 "{library} {version}, with {context} current (id {context_id}; the primary context's id "
                 "{primary_id}): {call} -> {alloc}; the allocation belongs to {owner_is}; current after it: "
                 "{after_alloc_is}; its kernel -> {kernel}; current after the kernel: {after_kernel_is}{first_call}",
                 expect)


def facts_torch_green(obs: Observations) -> dict:
    """PyTorch's green context: SMs asked, reported and used by a kernel on its stream; the tensor's owner."""
    v = some(obs, "torch green context", "torch-green-contexts")[0].value
    return {"version": v.get("version") or "unknown", "how": v["how"], "asked": v["asked_sms"],
            "reported": "not reported" if v["reported_sms"] is None else v["reported_sms"],
            "kernel_sms": v["kernel_sms"], "stream_is": v["stream_context_is"], "owner": v["tensor_owner_is"],
            "sum": v["sum"], "current": v["current_after_is"]}


CLAIMS = (
    *(_under_claim(kind, lib) for kind in KINDS for lib in LIBRARIES),
    Claim("interop.torch.green-contexts",
          "torch.cuda.green_contexts: how many SMs a kernel on its green context's stream uses, and which context "
          "owns a tensor made on that stream.", TORCH_GREEN, "observation", ("torch-green-contexts",),
          facts_torch_green,
          "PyTorch {version}, {how}: {asked} SMs asked, the partition reports {reported}; a %smid kernel on its "
          "stream ran on {kernel_sms}; the stream belongs to {stream_is}; a tensor made under that stream belongs "
          "to {owner} (its sum: {sum}); the thread's current context after it: {current}"),
)
