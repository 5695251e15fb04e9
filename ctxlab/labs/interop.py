"""interop: CuPy, PyTorch, JAX, Numba and cuda.core in one process, and across fork.

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
4. **Under another context** (``interop_under``): each library with a
   ``cuCtxCreate`` or a green context current, and PyTorch's own green contexts.
5. **Blast radius** (``interop_blast``): each way to tear a context down, against
   every library's live data, repeated in fresh processes.
6. **Processes**: after CUDA was initialised in the parent, what the driver,
   CuPy and PyTorch return in a child made by ``os.fork()``, and which
   multiprocessing start methods give a working CUDA child (undefined-behaviour
   territory: repeated in fresh processes); CUDA IPC memory handles opened in a
   child started with ``spawn`` (``interop_memory``).
7. **Memory that belongs to no context** (``interop_memory``): what
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

from collections.abc import Callable
from typing import Any

from ctxlab.claim import (
    Claim,
    Facts,
    Inapplicable,
    MissingObservation,
    Observations,
    hexed,
    select,
    silent_wrong,
    some,
    spread,
)
from ctxlab.lab import Isolation, Lab, LabOptions, Scenario
from ctxlab.labs import interop_blast, interop_memory, interop_under
from ctxlab.labs.common import skipped_output
from ctxlab.labs.interop_names import CUDA_CORE, DISTRIBUTIONS, ENV, JAX_DOC, LIBRARIES, NUMBA_DOC, TITLES

NAME = "interop"

N = 1 << 24  # elements written by the producer: a 64 MiB int32 array
K = 64  # increments the producer launches on its own stream: every element ends at K
ROUNDS = 2  # handovers per thread kind and pair
# (producer, consumer, protocol): the pairs exchanged; Numba produces by an async copy (no kernel).
PAIRS = (("cupy", "torch", "dlpack"), ("torch", "cupy", "dlpack"), ("cupy", "jax", "dlpack"),
         ("torch", "jax", "dlpack"), ("cupy", "numba", "cai"), ("torch", "numba", "cai"),
         ("numba", "cupy", "cai"), ("numba", "torch", "cai"))
UNORDERED = ("exchange-cupy-torch", "exchange-torch-cupy")  # also hand over after leaving the producer's stream
NUMBA_KERNELS = ("numba-cuda cannot compile kernels here (with numpy 2.5 its compile path calls the removed "
                 "np.row_stack): only its context and array APIs are used")

RUNTIME = ("CUDA Runtime API, 'Interactions with the CUDA Driver API': 'Unless explicitly overridden, either by making "
           "a different context current via the Driver API ... the Runtime will implicitly initialize and use the "
           "primary context' (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html); "
           "{lib} calls the CUDA Runtime")
PRIMARY = ("CUDA Driver API, Primary Context Management: 'The primary context is unique per device and shared with "
           "the CUDA runtime API. These functions allow integration with other libraries using CUDA.' "
           "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html); how many references "
           "each library holds is not documented; recorded as observed")
DLPACK = ("Python array API, array.__dlpack__: 'stream is provided by the consumer to the producer to instruct the "
          "producer to ensure that operations can safely be performed on the array' "
          "(https://data-apis.org/array-api/latest/API_specification/generated/array_api.array.__dlpack__.html)")
CAI = ("CUDA Array Interface (Version 3), stream: 'An optional stream upon which synchronization must take place at "
       "the point of consumption' (https://nvidia.github.io/numba-cuda/user/cuda_array_interface.html)")
CONSUMER_DOCS = {
    "torch": "torch.from_dlpack: 'The returned PyTorch tensor will share the memory with the input tensor' "
             "(https://docs.pytorch.org/docs/stable/generated/torch.from_dlpack.html)",
    "cupy": "cupy.from_dlpack: 'Zero-copy conversion ... a CuPy array that can be safely accessed on CuPy's current "
            "stream' (https://docs.cupy.dev/en/stable/reference/generated/cupy.from_dlpack.html)",
    "jax": "jax.dlpack.from_dlpack: 'The returned Array shares memory with external_array if no device transfer or "
           "copy was requested' (https://docs.jax.dev/en/latest/_autosummary/jax.dlpack.from_dlpack.html)",
    "numba": "numba.cuda.as_cuda_array: 'A view of the underlying GPU buffer is created. No copying of the data is "
             "done.' (https://nvidia.github.io/numba-cuda/reference/host.html)",
}
CAI_CONSUMERS = {"cupy": "cupy.asarray", "torch": "torch.as_tensor", "numba": "numba.cuda.as_cuda_array"}
TORCH_MP = ("PyTorch, Multiprocessing best practices: 'The CUDA runtime does not support the fork start method; "
            "either the spawn or forkserver start method are required to use CUDA in subprocesses.' "
            "(https://docs.pytorch.org/docs/stable/notes/multiprocessing.html#cuda-in-multiprocessing)")
TORCH_FORK = ("PyTorch, torch.cuda lazy initialisation raises 'Cannot re-initialize CUDA in forked subprocess. To use "
              "CUDA with multiprocessing, you must use the 'spawn' start method' "
              "(https://github.com/pytorch/pytorch/blob/main/torch/cuda/__init__.py); " + TORCH_MP)
FORK_DOC = TORCH_MP + "; what the driver and CuPy return in such a child is not documented: recorded as observed"
REINIT = "Cannot re-initialize CUDA in forked subprocess"
START_METHODS = ("fork", "spawn", "forkserver")


# ---------------------------------------------------------------- claims

def _runs(values: list) -> str:
    return f"{len(values)} run(s)"


def _text(value: Any) -> str:
    return "none" if value is None else str(value)


def _together_run(t: dict) -> str:
    """One repeat of ``together`` for one library, as the evidence names it: what it left current, who owns its
    allocation (against that run's primary context)."""
    if not t["present"]:
        return "not loaded there: " + t["reason"]
    owner = ("the primary context" if t["pointer_context"] and t["pointer_context"] == t["primary"] else
             hexed(t["pointer_context"]))
    current = ("the primary context" if t["primary"] and t["current"] == t["primary"] else
               f"context {hexed(t['current'])}")
    return f"{current} current (id {_text(t['current_id'])}), its allocation in {owner}"


def facts_primary(lib: str) -> Callable[[Observations], dict]:
    """Alone: the context left current and the allocation's context against the primary; together: the same, in
    every repeat of ``together`` (each one a fresh process)."""

    def facts(obs: Observations) -> dict:
        alone = [o.value for o in some(obs, "library context", f"alone-{lib}")]
        together = [o.value for o in some(obs, "together", "together") if o.value["library"] == lib]
        if not together:
            raise MissingObservation(f"together: no entry for {lib}")
        a = alone[0]
        loaded = [t for t in together if t["present"]]
        return {"library": TITLES[lib], "version": a.get("version") or "unknown",
                "current": hexed(a["current"]), "current_id": _text(a["current_id"]),
                "primary": hexed(a["primary"]), "primary_id": _text(a["primary_id"]),
                "alone_primary": sum(1 for v in alone if v["current"] and v["current"] == v["primary"]),
                "alone_pointer": sum(1 for v in alone if v["pointer_context"] and v["pointer_context"] == v["primary"]),
                "alone_runs": len(alone), "pointer_context": hexed(a["pointer_context"]),
                "reported": f"; the library reports context {hexed(a['reported'])}" if a.get("reported") else "",
                "together": f"over {len(together)} run(s): " + spread(_together_run(t) for t in together),
                "together_runs": len(together), "together_loaded": len(loaded),
                "together_primary": sum(1 for t in loaded if t["primary"] and t["current"] == t["primary"]),
                "together_pointer": sum(1 for t in loaded if t["primary"] and t["pointer_context"] == t["primary"])}

    return facts


def facts_fresh_thread(lib: str) -> Callable[[Observations], dict]:
    """A fresh thread's first use of ``lib``: its current context before and after, and who owns its allocation."""
    def facts(obs: Observations) -> dict:
        v = some(obs, "fresh thread", f"alone-{lib}")[0].value
        return {"library": TITLES[lib], "call": v["call"], "before": hexed(v["current_before"]),
                "after": hexed(v["current_after"]), "after_id": _text(v["current_after_id"]),
                "is_primary": "the primary context" if v["current_after"] and v["current_after"] == v["primary"]
                else "not the primary context", "outcome": v["outcome"],
                "pointer": "none" if v["pointer_context"] is None else
                ("the primary context" if v["pointer_context"] == v["primary"] else hexed(v["pointer_context"])),
                "before_set": v.get("before_set_current") or "-"}

    return facts


def facts_references(lib: str) -> Callable[[Observations], dict]:
    """Primary-context references ``lib`` holds alone: releases accepted beyond the lab's own, and the refusal."""
    def facts(obs: Observations) -> dict:
        found = [o.value for o in some(obs, "references", f"refs-{lib}")]
        return {"library": TITLES[lib], "version": found[0].get("version") or "unknown",
                "extra": spread(v["extra"] for v in found), "refused": spread(v["refused"] for v in found),
                "inactive": sum(1 for v in found if v["inactive_after"]), "runs": _runs(found)}

    return facts


def facts_together_references(obs: Observations) -> dict:
    """Primary-context references all libraries hold together: releases accepted beyond the lab's own, the refusal."""
    found = [o.value for o in some(obs, "references", "together")]
    v = found[0]
    return {"loaded": ", ".join(v["loaded"]) or "none", "extra": spread(x["extra"] for x in found),
            "refused": spread(x["refused"] for x in found)}


def _exchange_name(producer: str, consumer: str) -> str:
    return f"exchange-{producer}-{consumer}"


def facts_exchange(producer: str, consumer: str) -> Callable[[Observations], dict]:
    """One handover from ``producer`` to ``consumer``: same memory, its owning context, the values read, per thread."""
    def facts(obs: Observations) -> dict:
        found = [o.value for o in some(obs, "exchange", _exchange_name(producer, consumer))]
        reads = [v["read"] for v in found]
        return {"producer": TITLES[producer], "consumer": TITLES[consumer], "handovers": len(found),
                "threads": spread(v["thread"] for v in found),
                "same": sum(1 for v in found if v["same_pointer"]),
                "in_primary": sum(1 for v in found if v["pointer_context"] and v["pointer_context"] == v["primary"]),
                "reads": spread(reads), "correct": sum(1 for r in reads if r == "correct"),
                "silent_wrong": silent_wrong(reads), "how": found[0]["how"],
                "worker_current": spread(v["worker_current_after"] for v in found if v["thread"] == "worker")
                or "no worker handover",
                "interface": "" if found[0]["protocol"] != "cai" else
                "; the producer's interface: " + spread(f"version {v.get('cai_version')}, stream "
                                                         f"{'none' if v.get('cai_stream') is None else 'named'}"
                                                         for v in found),
                "stream_named": sum(1 for v in found if _names_stream(v)),
                "unnamed": sum(1 for v in found if not _names_stream(v))}

    return facts


def _names_stream(v: dict) -> bool:
    """Whether a handover tells the consumer which stream to order after: DLPack always (the consumer passes its
    stream), ``__cuda_array_interface__`` from version 3 when the producer exports a stream."""
    return v["protocol"] == "dlpack" or ((v.get("cai_version") or 0) >= 3 and v.get("cai_stream") is not None)


CAI_EXCHANGES = tuple(_exchange_name(p, c) for p, c, how in PAIRS if how == "cai")


def facts_unnamed_stream(obs: Observations) -> dict:
    """Every ``__cuda_array_interface__`` handover whose producer names no stream: who produced it, what was read."""
    found = [o.value for scenario in CAI_EXCHANGES for o in select(obs, "exchange", scenario)]
    if not found:
        raise MissingObservation("exchange in scenario " + " or ".join(CAI_EXCHANGES))
    unnamed = [v for v in found if not _names_stream(v)]
    return {"handovers": len(found), "unnamed": len(unnamed),
            "producers": spread(f"{TITLES[v['producer']]} -> {TITLES[v['consumer']]} (interface version "
                                f"{v.get('cai_version')})" for v in unnamed) or "none",
            "reads": spread(v["read"] for v in unnamed) or "none",
            "silent_wrong": silent_wrong(v["read"] for v in unnamed)}


def facts_unordered(obs: Observations) -> dict:
    """What the consumer read in each handover made after leaving the producer's stream, and the silent wrong values."""
    parts, reads = [], []
    for scenario in UNORDERED:
        mine = [o.value for o in select(obs, "exchange unordered", scenario)]
        reads += [v["read"] for v in mine]
        if mine:
            parts.append(f"{mine[0]['how']}: {spread(v['read'] for v in mine)}")
    if not parts:
        raise MissingObservation("exchange unordered in scenario " + " or ".join(UNORDERED))
    return {"outcomes": "; ".join(parts), "silent_wrong": silent_wrong(reads)}


def _forked(obs: Observations) -> list[dict]:
    return [o.value for o in some(obs, "forked child", "fork")]


def facts_fork_driver(obs: Observations) -> dict:
    """What each driver call returned in the forked child, and in how many runs it inherited a context handle."""
    found = _forked(obs)
    return {"runs": _runs(found), "init": spread(v["cuInit"] for v in found),
            "current": spread(v["cuCtxGetCurrent"] for v in found),
            "inherited": sum(1 for v in found if v["current_handle"]),
            "alloc": spread(v["cuMemAlloc"] for v in found), "retain": spread(v["cuDevicePrimaryCtxRetain"]
                                                                              for v in found)}


def facts_fork_cupy(obs: Observations) -> dict:
    """What a CuPy reduction returned in the forked child, and how often it was wrong without an error."""
    found = _forked(obs)
    return {"runs": _runs(found), "cupy": spread(v["cupy"] for v in found),
            "silent_wrong": silent_wrong(v["cupy"] for v in found)}


def facts_fork_torch(obs: Observations) -> dict:
    """What PyTorch's first CUDA call did in the forked child; inapplicable when the parent never initialised CUDA."""
    found = _forked(obs)
    if any(v["torch"] is None for v in found):
        raise Inapplicable("fork: " + (found[0].get("torch_reason") or "PyTorch did not initialise CUDA in the parent"))
    return {"runs": _runs(found), "torch": spread(v["torch"] for v in found),
            "refused": sum(1 for v in found if REINIT in v["torch"]), "count": len(found)}


def facts_start_methods(obs: Observations) -> dict:
    """What a CuPy reduction returned in a child of each start method, and how many spawn and forkserver runs worked."""
    found = [o.value for o in some(obs, "start methods", "start-methods")]
    by = {m: [v["methods"].get(m, "not run") for v in found] for m in START_METHODS}
    return {"runs": _runs(found), **{m: spread(by[m]) for m in START_METHODS},
            "working": sum(1 for v in found for m in ("spawn", "forkserver") if v["methods"].get(m) == "correct"),
            "needed": 2 * len(found)}


def _primary_claim(lib: str) -> Claim:
    kind = "promise" if lib in ("cupy", "torch", "cuda-core") else "observation"
    source = {"cupy": RUNTIME.format(lib="CuPy"), "torch": RUNTIME.format(lib="PyTorch"), "cuda-core": CUDA_CORE,
              "jax": JAX_DOC, "numba": NUMBA_DOC}[lib]
    statement = (f"{TITLES[lib]}'s initialisation leaves the device's primary context current on the calling thread, "
                 "alone in a process and with the other libraries loaded"
                 + (", and its first allocation belongs to it." if lib != "cuda-core" else
                    " (where its allocation lands is recorded).")
                 if kind == "promise" else
                 f"Which context {TITLES[lib]}'s initialisation leaves current, alone and with the other libraries "
                 "loaded, and which context owns its first allocation.")
    evidence = ("{library} {version} alone: current context {current} (id {current_id}), the primary context is "
                "{primary} (id {primary_id}); current = primary in {alone_primary} of {alone_runs} run(s), its "
                "allocation in the primary context in {alone_pointer} (owner {pointer_context}){reported}; with the "
                "other libraries: {together}")
    return Claim(f"interop.{lib}.context", statement, source, kind, (f"alone-{lib}", "together"), facts_primary(lib),
                 evidence, None if kind == "observation" else _expect_primary(pointer=lib != "cuda-core"))


def _expect_primary(pointer: bool) -> Callable[[Facts], bool]:
    """The primary context current alone and together; with ``pointer``, the allocations in it too (the runtime
    promises that for its allocations; cuda.core's documentation promises only the current context)."""

    def expect(f: Facts) -> bool:
        current = f["alone_primary"] == f["alone_runs"] and f["together_primary"] == f["together_loaded"]
        return current and (not pointer or (f["alone_pointer"] == f["alone_runs"]
                                            and f["together_pointer"] == f["together_loaded"]))

    return expect


def _thread_claim(lib: str) -> Claim:
    return Claim(f"interop.{lib}.fresh-thread",
                 f"What a fresh host thread's first use of {TITLES[lib]} does to that thread's current context.",
                 {"cupy": RUNTIME.format(lib="CuPy"), "torch": RUNTIME.format(lib="PyTorch"), "cuda-core": CUDA_CORE,
                  "jax": JAX_DOC, "numba": NUMBA_DOC}[lib] + "; per-thread behaviour recorded as observed",
                 "observation", (f"alone-{lib}",), facts_fresh_thread(lib),
                 "a new host thread (current context before: {before}); {call}: {outcome}; current context after: "
                 "{after} (id {after_id}), {is_primary}; its allocation belongs to {pointer}; before set_current: "
                 "{before_set}")


def _refs_claim(lib: str) -> Claim:
    return Claim(f"interop.{lib}.references",
                 f"How many primary-context references {TITLES[lib]}'s initialisation holds (alone in a process).",
                 PRIMARY, "observation", (f"refs-{lib}",), facts_references(lib),
                 "{library} {version}, over {runs}: releases the driver accepted beyond the lab's own retains: "
                 "{extra}; the release after them returned {refused}; primary context inactive afterwards in "
                 "{inactive}")


def _exchange_claim(producer: str, consumer: str, protocol: str) -> Claim:
    how = "DLPack" if protocol == "dlpack" else "__cuda_array_interface__"
    source = (DLPACK if protocol == "dlpack" else CAI) + "; " + CONSUMER_DOCS[consumer]
    order = ("reads what the producer wrote on its own stream" if protocol == "dlpack" else
             "where the producer's interface (version 3) names its stream, reads what the producer wrote on it (a "
             "version 2 interface names no stream: what the consumer reads then is recorded)")
    return Claim(f"interop.exchange.{producer}-to-{consumer}",
                 f"{TITLES[producer]} -> {TITLES[consumer]} through {how}: the consumer views the same memory, owned "
                 f"by the device's primary context, and {order}; on the main thread and on a worker thread that "
                 "received the context by push.",
                 source, "promise", (_exchange_name(producer, consumer),), facts_exchange(producer, consumer),
                 "{handovers} handovers ({how}; threads: {threads}){interface}: same pointer in {same}, owned by the "
                 "primary context in {in_primary}; value read: {reads}; wrong values without an error: "
                 "{silent_wrong}; the worker's current context after the consumer call: {worker_current}",
                 _expect_exchange, precondition=_every_stream_named,
                 unmet="the value read is promised only where the handover names the producer's stream, and "
                       "{unnamed} of {handovers} handovers named none (interop.exchange.unnamed-stream reports "
                       "what was read then)")


def _every_stream_named(f: Facts) -> bool:
    """The promise's precondition: every handover named the producer's stream, so the value read is promised."""
    return f["stream_named"] == f["handovers"]


def _expect_exchange(f: Facts) -> bool:
    """Same memory, owned by the primary context; the value is promised only where the handover names the stream
    (DLPack always: the consumer passes its stream; the interface from version 3, when the producer exports one)."""
    if not f["same"] == f["in_primary"] == f["handovers"]:
        return False
    ordered = f["stream_named"]
    return ordered == 0 or (ordered == f["handovers"] and f["correct"] == f["handovers"])  # correct: no wrong value


CLAIMS = (
    *(_primary_claim(lib) for lib in LIBRARIES),
    *(_thread_claim(lib) for lib in LIBRARIES),
    *(_refs_claim(lib) for lib in LIBRARIES),
    Claim("interop.together.references",
          "How many primary-context references every library together holds in one process.", PRIMARY,
          "observation", ("together",), facts_together_references,
          "with {loaded} initialised: releases the driver accepted beyond the lab's own retains: {extra}; the "
          "release after them returned {refused}"),
    *(_exchange_claim(p, c, how) for p, c, how in PAIRS),
    Claim("interop.exchange.unnamed-stream",
          "What the consumer reads when the producer's __cuda_array_interface__ names no stream (version 2, which "
          "has no stream field, or version 3 without one): nothing orders the consumer after the producer's "
          "stream.", CAI + "; what a consumer reads from an interface without a stream is not documented: recorded "
          "as observed, a wrong value without an error flagged", "observation", CAI_EXCHANGES, facts_unnamed_stream,
          "{unnamed} of {handovers} __cuda_array_interface__ handovers named no stream ({producers}); the value the "
          "consumer read then: {reads}; wrong values without an error: {silent_wrong}"),
    Claim("interop.exchange.unordered",
          "What the consumer reads when the handover is made after leaving the producer's stream (the producer "
          "then orders the consumer after its current stream, not the one it wrote on).",
          DLPACK + "; which stream the producer orders against is not documented beyond that: recorded as observed",
          "observation", UNORDERED, facts_unordered,
          "{outcomes}; wrong values returned without an error: {silent_wrong}"),
    Claim("interop.fork.driver",
          "What the driver returns in a child made by os.fork() after CUDA was initialised in the parent.", FORK_DOC,
          "observation", ("fork",), facts_fork_driver,
          "over {runs}: cuInit -> {init}; cuCtxGetCurrent -> {current} (a context handle inherited in {inherited}); "
          "cuDevicePrimaryCtxRetain -> {retain}; cuMemAlloc -> {alloc}"),
    Claim("interop.fork.cupy", "What CuPy returns in a forked child after it initialised CUDA in the parent.",
          FORK_DOC, "observation", ("fork",), facts_fork_cupy,
          "over {runs}: a new CuPy array and reduction in the child -> {cupy}; wrong values without an error: "
          "{silent_wrong}"),
    Claim("interop.fork.torch",
          "In a child forked after PyTorch initialised CUDA, PyTorch refuses its next CUDA call with 'Cannot "
          "re-initialize CUDA in forked subprocess'.", TORCH_FORK, "promise", ("fork",), facts_fork_torch,
          "over {runs}: torch.ones(device='cuda') in the child -> {torch}; refused with that message in {refused}",
          lambda f: f["refused"] == f["count"]),
    Claim("interop.start-methods",
          "After CUDA was initialised in the parent, a multiprocessing child started with spawn or forkserver uses "
          "CUDA normally (fork is not supported).", TORCH_MP, "promise", ("start-methods",), facts_start_methods,
          "over {runs}, a CuPy reduction in a child started with fork -> {fork}; spawn -> {spawn}; forkserver -> "
          "{forkserver}",
          lambda f: f["working"] == f["needed"]),
    *interop_under.CLAIMS,
    *interop_blast.CLAIMS,
    *interop_memory.CLAIMS,
)


# ---------------------------------------------------------------- the libraries, in children

class Missing(Exception):
    """A library this scenario needs is not installed or has no GPU backend: the scenario records why."""


def _version(lib: str) -> str | None:
    from ctxlab.cuda.environment import cupy_distribution, package_version

    names = (cupy_distribution() or "cupy",) if lib == "cupy" else DISTRIBUTIONS[lib]
    for name in names:
        found = package_version(name)
        if found:
            return found
    return None


def _require(lib: str) -> Any:
    """Import a library (lazily); Missing with why when it is absent."""
    import importlib

    module = {"cupy": "cupy", "torch": "torch", "jax": "jax", "numba": "numba.cuda", "cuda-core": "cuda.core"}[lib]
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        if _version(lib) is None:
            raise Missing(f"{lib} is not installed") from None
        raise Missing(f"{lib} could not be imported: {exc}") from None
    if lib == "torch" and not found.cuda.is_available():
        raise Missing("torch has no CUDA device (a CPU-only build, or no driver)")
    return found  # JAX's GPU backend is looked for in _init: looking starts its client, which creates a context


def _cuda_core_device() -> Any:
    try:
        from cuda.core import Device
    except ImportError:
        from cuda.core.experimental import Device
    return Device


def _as_int(handle: Any) -> int | None:
    if handle is None:
        return None
    try:
        return int(handle)
    except TypeError:
        return int(getattr(handle, "value", 0) or 0)


def _init(lib: str, device: int) -> dict:
    """The library's own way to start on ``device`` and make a first allocation: {pointer, keep, reported}."""
    if lib == "cupy":
        import cupy

        cupy.cuda.Device(device).use()
        a = cupy.arange(16, dtype=cupy.int32)
        cupy.cuda.Device(device).synchronize()
        return {"pointer": a.data.ptr, "keep": a, "call": "cupy.cuda.Device(d).use(); cupy.arange"}
    if lib == "torch":
        import torch

        torch.cuda.set_device(device)
        t = torch.arange(16, dtype=torch.int32, device=f"cuda:{device}")
        torch.cuda.synchronize(device)
        return {"pointer": t.data_ptr(), "keep": t, "call": "torch.cuda.set_device(d); torch.arange(device='cuda')"}
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        try:
            dev = jax.devices("gpu")[device]
        except RuntimeError as exc:
            raise Missing(f"jax has no GPU backend ({str(exc).splitlines()[0]})") from None
        x = jax.device_put(jnp.arange(16, dtype=jnp.int32), dev)
        x.block_until_ready()
        return {"pointer": x.unsafe_buffer_pointer(), "keep": x, "call": "jax.device_put(jnp.arange, gpu)"}
    if lib == "numba":
        import numpy
        from numba import cuda

        ctx = cuda.current_context(device)
        arr = cuda.device_array(16, dtype=numpy.int32)
        return {"pointer": arr.__cuda_array_interface__["data"][0], "keep": arr, "reported": _as_int(ctx.handle),
                "call": "numba.cuda.current_context(d); numba.cuda.device_array"}
    Device = _cuda_core_device()
    dev = Device(device)
    dev.set_current()
    buf = dev.allocate(64, stream=dev.default_stream)
    dev.sync()
    return {"pointer": _as_int(buf.handle), "keep": buf,
            "call": "Device(d).set_current(); Device.allocate(stream=default_stream)"}


def _thread_use(lib: str, device: int, out: dict) -> Any:
    """A fresh thread's first use of the library: returns the allocation made (kept alive by the caller)."""
    if lib == "cupy":
        import cupy

        a = cupy.arange(10, dtype=cupy.int64) + 1
        out["call"], out["pointer"], out["outcome"] = "cupy.arange(10) + 1, sum", a.data.ptr, str(int(a.sum()))
        return a
    if lib == "torch":
        import torch

        t = torch.ones(10, dtype=torch.int64, device=f"cuda:{device}")
        out["call"], out["pointer"] = "torch.ones(10, device='cuda:d'), sum", t.data_ptr()
        out["outcome"] = str(int(t.sum().item()))
        return t
    if lib == "jax":
        import jax
        import jax.numpy as jnp

        x = jax.device_put(jnp.ones(10, dtype=jnp.int32), jax.devices("gpu")[device]) + 1
        out["call"], out["pointer"], out["outcome"] = "jnp.ones(10) + 1 on the GPU, sum", x.unsafe_buffer_pointer(), \
            str(int(jnp.sum(x)))
        return x
    if lib == "numba":
        import numpy
        from numba import cuda

        cuda.current_context(device)
        arr = cuda.device_array(10, dtype=numpy.int32)
        out["call"], out["pointer"], out["outcome"] = ("numba.cuda.current_context(d); device_array(10)",
                                                       arr.__cuda_array_interface__["data"][0], "ok")
        return arr
    from ctxlab.cuda.outcome import attempt

    dev = _cuda_core_device()(device)
    out["before_set_current"] = attempt(lambda: _as_int(dev.allocate(64, stream=dev.default_stream).handle)
                                        and "allocated")
    dev.set_current()
    buf = dev.allocate(64, stream=dev.default_stream)
    out["call"], out["pointer"], out["outcome"] = "Device(d).allocate before and after set_current()", \
        _as_int(buf.handle), "ok"
    return buf


def _primary(device: int) -> tuple[int | None, int | None]:
    """The primary context's handle and id while it is active (a balanced retain/release reads it)."""
    from ctxlab.cuda import driver as drv
    from ctxlab.labs.common import context_state

    handle = context_state(device)["primary"]
    return handle, (drv.outcome(drv.context_id, handle).get("value") if handle else None)


def _owner(pointer: int | None) -> int | None:
    from ctxlab.cuda import driver as drv

    if not pointer:
        return None
    found = drv.outcome(drv.pointer_context, pointer)
    return found["value"] if found["ok"] else None


def alone(device: int, lib: str) -> dict:
    """One library in a fresh interpreter: the context it leaves current, its allocation, a fresh thread's use."""
    import threading

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import context_state, cuda_recorder, scenario_output

    scenario = f"alone-{lib}"
    try:
        _require(lib)
    except Missing as why:
        return skipped_output(scenario, str(why))
    init_driver()
    rec = cuda_recorder(scenario)
    before = context_state(device)
    try:
        made = _init(lib, device)
    except Missing as why:
        return skipped_output(scenario, str(why))
    cur = drv.current()
    primary, primary_id = _primary(device)
    owner = _owner(made["pointer"])
    rec.add("init", "library context",
            {"library": lib, "version": _version(lib), "call": made["call"], "active_before": before["active"],
             "current_before": before["current"], "current": cur.handle, "current_id": cur.id, "primary": primary,
             "primary_id": primary_id, "pointer": made["pointer"], "pointer_context": owner,
             "pointer_context_id": drv.outcome(drv.context_id, owner).get("value") if owner else None,
             "reported": made.get("reported")})
    out: dict = {}

    def fresh() -> None:
        out["current_before"] = drv.current().handle
        try:
            out["keep"] = _thread_use(lib, device, out)
        except Exception as exc:  # what the library said, by name: the outcome of this thread's first use
            from ctxlab.cuda.outcome import status_name

            out["outcome"] = status_name(exc)[:300]
        after = drv.current()
        out["current_after"], out["current_after_id"] = after.handle, after.id
        out["pointer_context"] = _owner(out.get("pointer"))

    worker = threading.Thread(target=fresh, name="fresh-thread")
    worker.start()
    worker.join(60)
    rec.add("fresh thread", "fresh thread",
            {"library": lib, "call": out.get("call", "(none)"), "outcome": out.get("outcome", "did not finish"),
             "current_before": out.get("current_before"), "current_after": out.get("current_after"),
             "current_after_id": out.get("current_after_id"), "primary": primary,
             "pointer_context": out.get("pointer_context"), "before_set_current": out.get("before_set_current")},
            context=(out.get("current_after"), out.get("current_after_id")))
    return scenario_output(rec)


def _count_references(device: int, rec, extra_fields: dict) -> None:
    """Release the primary context until the driver refuses: the releases accepted are the references held."""
    import signal

    from ctxlab.cuda import driver as drv
    from ctxlab.labs.common import context_state

    # The libraries' own teardown at exit meets a destroyed context: whatever it does after the result is sent,
    # the process ends within 20 s.
    signal.alarm(20)
    extra, refused, trail = 0, None, []
    for _ in range(16):
        status = drv.outcome(drv.primary_release, device)["status"]
        state = context_state(device, with_primary=False)
        trail.append(bool(state["active"]))
        if status != "CUDA_SUCCESS":
            refused = status
            break
        extra += 1
    rec.add("count", "references", {**extra_fields, "extra": extra, "refused": refused, "active_trail": trail,
                                    "inactive_after": not trail[-1] if trail else None}, context=(None, None))


def refs(device: int, lib: str) -> dict:
    """One library in a fresh interpreter: initialise it, then count the primary-context references it holds."""
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output

    scenario = f"refs-{lib}"
    try:
        _require(lib)
    except Missing as why:
        return skipped_output(scenario, str(why))
    init_driver()
    rec = cuda_recorder(scenario)
    try:
        made = _init(lib, device)
    except Missing as why:
        return skipped_output(scenario, str(why))
    rec.add("init", "initialised", {"library": lib, "version": _version(lib), "call": made["call"]})
    _count_references(device, rec, {"library": lib, "version": _version(lib)})
    return scenario_output(rec)


def together(device: int) -> dict:
    """Every library present, in one fresh interpreter, one after the other: the context each leaves current."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output

    init_driver()
    rec = cuda_recorder("together")
    kept, loaded = [], []
    for lib in LIBRARIES:
        try:
            _require(lib)
            made = _init(lib, device)
        except Missing as why:
            rec.add(lib, "together", {"library": lib, "present": False, "reason": str(why)})
            continue
        kept.append(made["keep"])
        loaded.append(lib)
        cur = drv.current()
        primary, primary_id = _primary(device)
        owner = _owner(made["pointer"])
        rec.add(lib, "together", {"library": lib, "present": True, "version": _version(lib), "current": cur.handle,
                                  "current_id": cur.id, "primary": primary, "primary_id": primary_id,
                                  "pointer_context": owner,
                                  "pointer_context_id": drv.outcome(drv.context_id, owner).get("value")
                                  if owner else None})
    _count_references(device, rec, {"loaded": loaded})
    return scenario_output(rec)


# ---------------------------------------------------------------- exchange

def _produce(lib: str, device: int) -> tuple[Any, Any, Callable[[], Any]]:
    """An int32 array of N elements, each K, written on the producer's own non-default stream (not synchronized).

    Returns (array, stream, enter) where ``enter()`` is a context manager making that stream the library's current
    one (Numba carries its stream in __cuda_array_interface__ instead).
    """
    import contextlib

    if lib == "cupy":
        import cupy

        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            x = cupy.zeros(N, dtype=cupy.int32)
            for _ in range(K):
                x += 1
        return x, s, lambda: s
    if lib == "torch":
        import torch

        ts = torch.cuda.Stream(device=device)
        with torch.cuda.stream(ts):
            t = torch.zeros(N, dtype=torch.int32, device=f"cuda:{device}")
            for _ in range(K):
                t += 1
        return t, ts, lambda: torch.cuda.stream(ts)
    import numpy
    from numba import cuda

    ns = cuda.stream()
    host = numpy.full(N, K, dtype=numpy.int32)
    d = cuda.to_device(host, stream=ns)  # an async copy on Numba's stream, exported in the interface
    return d, ns, contextlib.nullcontext


def _pointer(lib: str, array: Any) -> int:
    if lib == "cupy":
        return array.data.ptr
    if lib == "torch":
        return array.data_ptr()
    if lib == "jax":
        return array.unsafe_buffer_pointer()
    return array.__cuda_array_interface__["data"][0]


def _consume(lib: str, protocol: str, array: Any, device: int) -> tuple[Any, Callable[[], int]]:
    """The consumer's view of ``array`` and a function reading its sum in the consumer's own library."""
    if lib == "cupy":
        import cupy

        y = cupy.from_dlpack(array) if protocol == "dlpack" else cupy.asarray(array)
        return y, lambda: int(y.sum())
    if lib == "torch":
        import torch

        t = torch.from_dlpack(array) if protocol == "dlpack" else torch.as_tensor(array, device=f"cuda:{device}")
        return t, lambda: int(t.sum().item())
    if lib == "jax":
        import jax.dlpack
        import jax.numpy as jnp

        z = jax.dlpack.from_dlpack(array)
        return z, lambda: int(jnp.sum(z))
    from numba import cuda

    d = cuda.as_cuda_array(array)
    return d, lambda: int(d.copy_to_host().sum(dtype="int64"))


def _handover(consumer: str, protocol: str, produced: tuple, device: int, ordered: bool = True) -> dict:
    """The consumer's side of one exchange on the calling thread: import (inside the producer's stream, or after
    leaving it), then read the sum in the consumer's library."""
    from ctxlab.cuda.outcome import checked, status_name

    producer, x, enter = produced
    interface = {}
    if protocol == "cai":  # what the producer's interface says, read where the consumer reads it
        with enter() if ordered else _nothing():
            cai = x.__cuda_array_interface__
        interface = {"cai_version": cai.get("version"), "cai_stream": cai.get("stream")}
    try:
        if ordered:
            with enter():
                y, read = _consume(consumer, protocol, x, device)
        else:
            y, read = _consume(consumer, protocol, x, device)
    except Exception as exc:
        return {"read": status_name(exc)[:300], "same_pointer": False, "pointer_context": None,
                "producer_pointer": _pointer(producer, x), "consumer_pointer": None}
    got = checked(read, N * K)
    px, py = _pointer(producer, x), _pointer(consumer, y)
    return {"read": got, "same_pointer": px == py, "producer_pointer": px, "consumer_pointer": py,
            "pointer_context": _owner(py), "keep": (x, y), **interface}


def _nothing() -> Any:
    import contextlib

    return contextlib.nullcontext()


def exchange(device: int, producer: str, consumer: str, protocol: str) -> dict:
    """The producer writes on its own stream on the main thread; the consumer imports by DLPack or CAI and reads,
    on the main thread and on a worker thread that received the context by push."""
    import threading

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output

    scenario = _exchange_name(producer, consumer)
    try:
        for lib in (producer, consumer):
            _require(lib)
        init_driver()
        rec = cuda_recorder(scenario)
        _init(producer, device)
        _init(consumer, device)
    except Missing as why:
        return skipped_output(scenario, str(why))
    primary, _ = _primary(device)
    how = (f"{producer} -> {'from_dlpack' if protocol == 'dlpack' else CAI_CONSUMERS[consumer]} in {consumer}, "
           f"handed over inside the producer's stream")
    common = {"producer": producer, "consumer": consumer, "protocol": protocol, "primary": primary, "how": how,
              "versions": {producer: _version(producer), consumer: _version(consumer)}}
    kept: list = []

    def produce() -> tuple:
        x, stream, enter = _produce(producer, device)
        kept.append((x, stream))
        return producer, x, enter

    for r in range(ROUNDS):
        v = _handover(consumer, protocol, produce(), device)
        kept.append(v.pop("keep", None))
        rec.add("main", "exchange", {**common, **v, "thread": "main", "worker_current_after": None}, round=r)
    ctx = drv.current().handle or primary

    def work(r: int, produced: tuple) -> None:
        drv.push(ctx)
        v = _handover(consumer, protocol, produced, device)
        kept.append(v.pop("keep", None))
        after = drv.current()
        rec.add("worker", "exchange", {**common, **v, "thread": "worker", "pushed": ctx,
                                       "worker_current_after": "the pushed context" if after.handle == ctx
                                       else hexed(after.handle)}, round=r)
        drv.pop()

    for r in range(ROUNDS):
        worker = threading.Thread(target=work, args=(r, produce()), name=f"worker-{r + 1}")
        worker.start()
        worker.join(120)
    if scenario in UNORDERED:
        for r in range(ROUNDS):
            v = _handover(consumer, protocol, produce(), device, ordered=False)
            kept.append(v.pop("keep", None))
            rec.add("main", "exchange unordered",
                    {**common, **v, "how": f"{producer} -> {consumer} handed over after leaving the producer's "
                                           "stream"}, round=r)
    return scenario_output(rec)


# ---------------------------------------------------------------- processes

def _driver_in_child(device: int) -> dict:
    """Raw driver calls in a forked child: their status names (the parent's init state is not trusted)."""
    from cuda.bindings import driver

    def name(result) -> str:
        status = result[0] if isinstance(result, tuple) else result
        return getattr(status, "name", str(status))

    out: dict[str, Any] = {"cuInit": name(driver.cuInit(0))}
    err, ctx = driver.cuCtxGetCurrent()
    out["cuCtxGetCurrent"], out["current_handle"] = name(err), int(ctx) if int(err) == 0 else None
    dev = driver.CUdevice(device)
    retained = driver.cuDevicePrimaryCtxRetain(dev)
    out["cuDevicePrimaryCtxRetain"] = name(retained)
    alloc = driver.cuMemAlloc(64)
    out["cuMemAlloc"] = name(alloc)
    return out


def _forked_child(device: int, torch_ready: bool, write_fd: int) -> None:
    import json
    import os

    from ctxlab.cuda.outcome import checked, status_name

    result: dict = {}
    try:
        result.update(_driver_in_child(device))
    except Exception as exc:
        result["driver_error"] = status_name(exc)[:300]
    try:
        import cupy

        result["cupy"] = checked(lambda: int((cupy.arange(10, dtype=cupy.int64) + 1).sum()), 55)[:300]
    except Exception as exc:
        result["cupy"] = status_name(exc)[:300]
    if torch_ready:
        try:
            import torch

            result["torch"] = checked(lambda: int(torch.ones(10, device=f"cuda:{device}").sum().item()), 10)[:300]
        except Exception as exc:
            result["torch"] = status_name(exc)[:300]
    os.write(write_fd, json.dumps(result).encode())
    os.close(write_fd)


def _wait_child(pid: int, read_fd: int, timeout: float) -> tuple[bytes, str]:
    """The forked child's report and how it ended; it is killed after ``timeout`` seconds."""
    import os
    import select
    import signal
    import time

    data, deadline = b"", time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return data, f"killed after {timeout:g} s"
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    return data, (f"exit status {os.waitstatus_to_exitcode(status)}")


def fork(device: int) -> dict:
    """CUDA initialised in this process (CuPy, then PyTorch if present); then os.fork(): what the child gets."""
    import json
    import os

    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output

    init_driver()
    rec = cuda_recorder("fork")
    _require("cupy")
    keep = [_init("cupy", device)["keep"]]
    torch_reason = None
    try:
        _require("torch")
        keep.append(_init("torch", device)["keep"])
    except Missing as why:
        torch_reason = str(why)
    rec.add("parent", "parent initialised", {"cupy": _version("cupy"), "torch": _version("torch"),
                                             "torch_reason": torch_reason})
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running any of the parent's exit handlers
        code = 0
        try:
            os.close(read_fd)
            _forked_child(device, torch_reason is None, write_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    data, ended = _wait_child(pid, read_fd, 60)
    os.close(read_fd)
    try:
        value = json.loads(data.decode() or "{}")
    except ValueError:
        value = {"driver_error": f"unreadable report: {data[:200]!r}"}
    for key in ("cuInit", "cuCtxGetCurrent", "cuDevicePrimaryCtxRetain", "cuMemAlloc", "cupy"):
        value.setdefault(key, "no answer (" + ended + ")")
    value.setdefault("current_handle", None)
    value.setdefault("torch", None if torch_reason else "no answer (" + ended + ")")
    rec.add("child", "forked child", {**value, "ended": ended, "torch_reason": torch_reason})
    return scenario_output(rec)


def _mp_child(device: int, conn) -> None:
    """In a multiprocessing child: a CuPy reduction with a known answer."""
    from ctxlab.cuda.outcome import checked, status_name

    try:
        import cupy

        conn.send(checked(lambda: int((cupy.arange(10, dtype=cupy.int64) + 1).sum()), 55)[:300])
    except Exception as exc:
        conn.send(status_name(exc)[:300])
    conn.close()


def start_methods_main(device: int) -> dict:
    """Run as a plain (non-daemon) process: CuPy initialised, then a child per start method."""
    import multiprocessing

    import cupy

    cupy.cuda.Device(device).use()
    parent_sum = int((cupy.arange(10, dtype=cupy.int64) + 1).sum())
    methods = {}
    for method in START_METHODS:
        ctx: Any = multiprocessing.get_context(method)
        receive, send = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_mp_child, args=(device, send), name=f"ctxlab-{method}")
        try:
            process.start()
            send.close()
            methods[method] = receive.recv() if receive.poll(30) else "no answer within 30 s"
        except EOFError:
            methods[method] = f"the child ended without answering (exit status {process.exitcode})"
        finally:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(5)
    return {"parent_sum": parent_sum, "methods": methods}


def start_methods(device: int) -> dict:
    """A fresh non-daemon interpreter initialises CUDA, then starts a child with each multiprocessing method."""
    import json
    import subprocess
    import sys

    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder("start-methods")
    code = ("import json, sys; from ctxlab.labs.interop import start_methods_main; "
            "print('CTXLAB-RESULT ' + json.dumps(start_methods_main(int(sys.argv[1]))))")
    try:
        done = subprocess.run([sys.executable, "-c", code, str(device)], capture_output=True, text=True, timeout=150)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("CTXLAB-RESULT ")), None)
        value = json.loads(line.split(" ", 1)[1]) if line else {
            "methods": {}, "problem": f"exit status {done.returncode}: {done.stderr[-500:]}"}
    except subprocess.TimeoutExpired:
        value = {"methods": {}, "problem": "the parent did not finish within 150 s"}
    rec.add("parent", "start methods", value, context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- the lab

def scenarios(options: LabOptions) -> list[Scenario]:
    """Each library alone and counted in fresh interpreters, all together, the exchanges, fork, then areas 4 to 7
    (under another context, blast radius, IPC and memory of no context)."""
    here, device = "ctxlab.labs.interop", options.device
    out = [Scenario(f"alone-{lib}", f"{here}:alone", (device, lib), isolation=Isolation.FRESH, env=ENV)
           for lib in LIBRARIES]
    # Counting references releases the primary context to zero under live libraries: undefined behaviour
    # (on the H200 JAX's process once died by SIGSEGV there), so these repeat and a crash is an outcome.
    out += [Scenario(f"refs-{lib}", f"{here}:refs", (device, lib), isolation=Isolation.FRESH, env=ENV, undefined=True)
            for lib in LIBRARIES]
    out.append(Scenario("together", f"{here}:together", (device,), isolation=Isolation.FRESH, env=ENV,
                        undefined=True))
    # The exchanges share one child (harness.batch): each starts its two libraries (or finds them started) on
    # the primary context and leaves them so; none needs a fresh process.
    out += [Scenario(_exchange_name(p, c), f"{here}:exchange", (device, p, c, how), env=ENV,
                     isolation=Isolation.SHARED) for p, c, how in PAIRS]
    out += [Scenario("fork", f"{here}:fork", (device,), undefined=True, timeout=90, env=ENV),
            Scenario("start-methods", f"{here}:start_methods", (device,), undefined=True, timeout=180, env=ENV)]
    out += interop_under.scenarios(device) + interop_blast.scenarios(device) + interop_memory.scenarios(device)
    return out


LAB = Lab(NAME, "Do CuPy, PyTorch, JAX, Numba and cuda.core share one context, who holds it, can they exchange "
          "arrays safely, what do they do under another context, what does one teardown do to the others, and what "
          "survives fork?", LabOptions, CLAIMS, scenarios)
