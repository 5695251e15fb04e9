"""interop, area 4: each library with another context current on the calling thread.

A ``cuCtxCreate`` context, or a green context (``ctxlab.cuda.green``, made current
by ``cuCtxPushCurrent`` of its ``cuCtxFromGreenCtx`` handle), is current when the
library makes its first allocation and runs its first kernel, in a fresh
interpreter per library and context kind. Recorded: which context owns the
allocation (``CU_POINTER_ATTRIBUTE_CONTEXT``, compared by ``cuCtxGetId`` with
the created or green context and the primary context), whether the kernel gave
the right values, and the thread's current context after each step. PyTorch's
own ``torch.cuda.green_contexts`` is recorded too: its SM partition (``%smid`` of
a probe kernel on its stream) and where its allocations land.

``make`` and ``Made`` (one array of known values per library) are shared with the
blast-radius scenarios (``interop_blast``). Scenarios call the libraries and
``cuda.bindings`` directly: those calls are the subject of the experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxlab.claim import Claim, Facts, Observations, some
from ctxlab.cuda.green import SOURCE_AS_PRIMARY
from ctxlab.lab import Isolation, Scenario
from ctxlab.labs.interop_names import CUDA_CORE, ENV, JAX_DOC, LIBRARIES, TITLES

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


# ---------------------------------------------------------------- one array per library

@dataclass
class Made:
    """An array of 1..N made by one library: what keeps it alive, its pointer, and how the library reads it."""

    keep: Any
    pointer: int | None
    call: str
    read: Callable[[], int]  # the sum, computed by the library (a kernel) or copied back
    kernel: Callable[[], str]  # the library's own kernel over the array: ``correct``, an error, or a wrong value


def _checked_read(read: Callable[[], int]) -> Callable[[], str]:
    from ctxlab.cuda.outcome import checked

    return lambda: checked(read, SUM)


def _cuda_core_kernel(dev: Any, buf: Any, pointer: int) -> Callable[[], str]:
    """cuda.core's Program (NVRTC) -> cubin, and launch on a stream of the device: fills 1..N, then reads back."""
    from ctxlab.cuda.outcome import checked

    def run() -> int:
        import numpy

        try:
            from cuda.core import LaunchConfig, Program, launch
        except ImportError:
            from cuda.core.experimental import LaunchConfig, Program, launch
        kernel = Program(IOTA, code_type="c++").compile("cubin").get_kernel("ctxlab_iota")
        stream = dev.create_stream()
        launch(stream, LaunchConfig(grid=(N + 255) // 256, block=256), kernel, buf, numpy.int32(N))
        stream.sync()
        return _device_sum(pointer)

    return lambda: checked(run, SUM)


def _device_sum(pointer: int) -> int:
    import numpy

    from ctxlab.cuda import driver as drv

    return int(numpy.frombuffer(drv.copy_from_device(pointer, 8 * N), dtype=numpy.int64).sum())


def _numba_kernel(array: Any) -> Callable[[], str]:
    """A Numba kernel writing 1..N, then the array read back (numba-cuda must be able to compile here)."""
    from ctxlab.cuda.outcome import checked

    def run() -> int:
        from numba import cuda

        @cuda.jit
        def iota(a):
            i = cuda.grid(1)
            if i < a.size:
                a[i] = i + 1

        iota[(N + 255) // 256, 256](array)
        cuda.synchronize()
        return int(array.copy_to_host().sum())

    return lambda: checked(run, SUM)


def make(lib: str, device: int) -> Made:
    """``lib``'s array of 1..N on ``device``, made the library's own way, with no device selection first (the
    context current on the thread is the one under test). cuda.core needs ``Device.set_current()``."""
    import numpy

    if lib == "cupy":
        import cupy

        a = cupy.arange(1, N + 1, dtype=cupy.int64)
        return Made(a, a.data.ptr, "cupy.arange; sum", lambda: int(a.sum()), _checked_read(lambda: int(a.sum())))
    if lib == "torch":
        import torch

        t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
        return Made(t, t.data_ptr(), "torch.arange(device='cuda:d'); sum", lambda: int(t.sum().item()),
                    _checked_read(lambda: int(t.sum().item())))
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        from ctxlab.labs.interop import Missing

        try:
            dev = jax.devices("gpu")[device]
        except RuntimeError as exc:
            raise Missing(f"jax has no GPU backend ({str(exc).splitlines()[0]})") from None
        x = jax.device_put(jnp.arange(1, N + 1, dtype=jnp.int32), dev)
        x.block_until_ready()
        return Made(x, x.unsafe_buffer_pointer(), "jax.device_put(jnp.arange, gpu); jnp.sum",
                    lambda: int(jnp.sum(x)), _checked_read(lambda: int(jnp.sum(x))))
    if lib == "numba":
        from numba import cuda

        d = cuda.to_device(numpy.arange(1, N + 1, dtype=numpy.int64))
        return Made(d, d.__cuda_array_interface__["data"][0], "numba.cuda.to_device; copy_to_host",
                    lambda: int(d.copy_to_host().sum()), _numba_kernel(d))
    from ctxlab.cuda import driver as drv
    from ctxlab.labs.interop import _as_int, _cuda_core_device

    dev = _cuda_core_device()(device)
    dev.set_current()
    buf = dev.allocate(8 * N, stream=dev.default_stream)
    dev.sync()
    pointer = _as_int(buf.handle) or 0
    drv.copy_to_device(pointer, numpy.arange(1, N + 1, dtype=numpy.int64).tobytes())
    return Made(buf, pointer, "Device(d).set_current(); Device.allocate, filled by cuMemcpyHtoD",
                lambda: _device_sum(pointer), _cuda_core_kernel(dev, buf, pointer))


# ---------------------------------------------------------------- under a created or green context

def which(context_id: int | None, ids: dict[str, int | None]) -> str:
    """A context named by what it is here: ``ids`` maps a name ("the created context"...) to its cuCtxGetId."""
    if context_id is None:
        return "none"
    for name, known in ids.items():
        if known is not None and known == context_id:
            return name
    return f"another context (id {context_id})"


def _current_id() -> int | None:
    from ctxlab.cuda import driver as drv

    found = drv.outcome(drv.current)
    return found["value"].id if found["ok"] else None


def owner_of(pointer: int | None, ids: dict[str, int | None]) -> str:
    """What CU_POINTER_ATTRIBUTE_CONTEXT reports for ``pointer``: a context named by ``which``, ``none`` (NULL),
    or the error's name."""
    from ctxlab.cuda import driver as drv

    if not pointer:
        return "none (no pointer)"
    found = drv.outcome(drv.pointer_context, pointer)
    if not found["ok"]:
        return found["status"]
    if not found["value"]:
        return "none"
    return which(drv.outcome(drv.context_id, found["value"]).get("value"), ids)


def _enter(kind: str, device: int) -> tuple[int, Any]:
    """Make the created or green context current on this thread: (its handle, what keeps it)."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda import green

    if kind == "created":
        return drv.create_context(device), None
    made, why = green.make_or_reason(device)
    if made is None:
        raise green.GreenUnavailable(why)
    drv.push(made.handle)
    return made.handle, made


def under(device: int, kind: str, lib: str) -> dict:
    """``lib``'s first allocation and kernel with a created or green context current, in a fresh interpreter."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.green import GreenUnavailable
    from ctxlab.cuda.outcome import attempt, status_name
    from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
    from ctxlab.labs.interop import Missing, _primary, _require, _version

    scenario = f"under-{kind}-{lib}"
    try:
        _require(lib)
        init_driver()
        handle, keep_context = _enter(kind, device)
    except (Missing, GreenUnavailable) as why:
        return skipped_output(scenario, str(why))
    rec = cuda_recorder(scenario)
    context_id = drv.context_id(handle)
    first_call = None
    if lib == "cuda-core":  # its documented first step is set_current(): what does allocate do before it?
        from ctxlab.labs.interop import _as_int, _cuda_core_device

        dev = _cuda_core_device()(device)
        first_call = attempt(lambda: _as_int(dev.allocate(64, stream=dev.default_stream).handle) and "allocated")
    before = _current_id()
    try:
        made: Made | None = make(lib, device)
        alloc = "ok"
    except Missing as why:
        return skipped_output(scenario, str(why))
    except Exception as exc:  # the library refused: its error, by name, is the outcome
        made, alloc = None, status_name(exc)[:300]
    after_alloc = _current_id()
    kernel = made.kernel() if made else "not run (no allocation)"
    after_kernel = _current_id()
    primary, primary_id = _primary(device)
    ids = {CONTEXT_NAMES[kind]: context_id, "the primary context": primary_id}
    rec.add("under", "under context",
            {"library": lib, "version": _version(lib), "kind": kind, "context": handle, "context_id": context_id,
             "primary": primary, "primary_id": primary_id, "call": made.call if made else "-", "alloc": alloc,
             "pointer": made.pointer if made else None, "before_is": which(before, ids),
             "owner_is": owner_of(made.pointer, ids) if made else "none (no allocation)",
             "after_alloc_is": which(after_alloc, ids), "kernel": kernel, "after_kernel_is": which(after_kernel, ids),
             "first_call": first_call, "green": keep_context.info() if keep_context else None})
    return scenario_output(rec)


# ---------------------------------------------------------------- torch.cuda.green_contexts

def _torch_green(torch: Any, sms: int, device: int) -> tuple[Any, str]:
    """PyTorch's green context, by whichever constructor this PyTorch has (create() up to 2.10, the class later)."""
    from torch.cuda import green_contexts

    cls = green_contexts.GreenContext
    if hasattr(cls, "create"):
        return cls.create(sms, device), f"GreenContext.create({sms}, {device})"
    return cls(num_sms=sms, device_id=device), f"GreenContext(num_sms={sms}, device_id={device})"


def torch_green(device: int) -> dict:
    """torch.cuda.green_contexts: the SMs a kernel on its stream uses, and the context owning a tensor made there."""
    import importlib

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import status_name
    from ctxlab.labs.common import cuda_recorder, scenario_output, skipped_output
    from ctxlab.labs.interop import Missing, _primary, _require, _version
    from ctxlab.labs.migrate.green import SMID_BLOCKS, distinct_sms

    scenario = "torch-green-contexts"
    try:
        torch = _require("torch")
        importlib.import_module("torch.cuda.green_contexts")
    except (Missing, ImportError) as why:
        return skipped_output(scenario, f"torch.cuda.green_contexts is not available: {why}")
    init_driver()
    rec = cuda_recorder(scenario)
    torch.cuda.set_device(device)
    torch.zeros(1, device=f"cuda:{device}")  # the primary context first, as PyTorch's green context expects
    primary, primary_id = _primary(device)
    sms = 16
    try:
        gc, how = _torch_green(torch, sms, device)
    except Exception as exc:
        return skipped_output(scenario, f"PyTorch's green context could not be made here: {status_name(exc)[:300]}")
    if hasattr(gc, "Stream"):  # its documented way: work on a stream of the green context
        stream = gc.Stream()
        handle, green_ctx = int(stream.cuda_stream), drv.stream_context(int(stream.cuda_stream))
        how += "; work on GreenContext.Stream() under torch.cuda.stream"
        with torch.cuda.stream(stream):
            t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
            total = int(t.sum().item())
        current = _current_id()
    else:  # older PyTorch: set_context() makes it current, pop_context() restores the previous context
        gc.set_context()
        green_ctx = drv.current().handle
        handle = drv.stream_create()
        how += "; work between set_context() and pop_context()"
        t = torch.arange(1, N + 1, dtype=torch.int64, device=f"cuda:{device}")
        total = int(t.sum().item())
        current = _current_id()
        gc.pop_context()
    green_id = drv.context_id(green_ctx)
    # The primary first: a green context that turned out to be the primary context is named as such.
    ids = {"the primary context": primary_id, "PyTorch's green context": green_id}
    drv.push(green_ctx)  # the probe module must live in the stream's context
    try:
        smids = distinct_sms(ProbeModule.load(), handle, SMID_BLOCKS)
        measured = f"{len(smids)} distinct SMs"
    except Exception as exc:
        measured = status_name(exc)[:300]
    finally:
        drv.pop()
    partition = getattr(getattr(gc, "sm_partition", None), "sm_count", None)
    rec.add("green", "torch green context",
            {"version": _version("torch"), "how": how, "asked_sms": sms, "reported_sms": partition,
             "stream_context_is": which(green_id, ids), "kernel_sms": measured,
             "tensor_owner_is": owner_of(t.data_ptr(), ids), "sum": "correct" if total == SUM else
             f"silent-wrong-result (got {total}, expected {SUM})", "current_after_is": which(current, ids),
             "primary": primary})
    return scenario_output(rec)


# ---------------------------------------------------------------- claims

def facts_under(kind: str, lib: str) -> Callable[[Observations], dict]:
    """What ``lib`` did under the created or green context: its allocation's owner, its kernel, the current context."""

    def facts(obs: Observations) -> dict:
        v = some(obs, "under context", f"under-{kind}-{lib}")[0].value
        return {"library": TITLES[lib], "version": v.get("version") or "unknown", "context": CONTEXT_NAMES[kind],
                "context_id": v["context_id"], "primary_id": v["primary_id"], "call": v["call"],
                "alloc": v["alloc"], "owner_is": v["owner_is"], "before_is": v["before_is"],
                "after_alloc_is": v["after_alloc_is"], "kernel": v["kernel"],
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


def scenarios(device: int) -> list[Scenario]:
    """One fresh interpreter per context kind and library, and PyTorch's own green context."""
    here = "ctxlab.labs.interop_under"
    out = [Scenario(f"under-{kind}-{lib}", f"{here}:under", (device, kind, lib), isolation=Isolation.FRESH, env=ENV)
           for kind in KINDS for lib in LIBRARIES]
    out.append(Scenario("torch-green-contexts", f"{here}:torch_green", (device,), isolation=Isolation.FRESH, env=ENV))
    return out
