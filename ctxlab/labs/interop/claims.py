"""interop's claims: the sources, the facts read from the scenarios' observations, the predicates and the evidence
templates, with those of areas 4 to 7 from their own modules. Pure: no CUDA."""

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
from ctxlab.labs.interop import blast_claims, memory_claims, under_claims
from ctxlab.labs.interop.names import CUDA_CORE, JAX_DOC, LIBRARIES, NUMBA_DOC, TITLES

NAME = "interop"

N = 1 << 24  # elements written by the producer: a 64 MiB int32 array
K = 64  # increments the producer launches on its own stream: every element ends at K
ROUNDS = 2  # handovers per thread kind and pair
# (producer, consumer, protocol): the pairs exchanged; Numba produces by an async copy (no kernel).
PAIRS = (("cupy", "torch", "dlpack"), ("torch", "cupy", "dlpack"), ("cupy", "jax", "dlpack"),
         ("torch", "jax", "dlpack"), ("cupy", "numba", "cai"), ("torch", "numba", "cai"),
         ("numba", "cupy", "cai"), ("numba", "torch", "cai"))
UNORDERED = ("exchange-cupy-torch", "exchange-torch-cupy")  # also hand over after leaving the producer's stream

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

    # current is cuCtxGetCurrent's handle (0 for none), primary the primary context's handle or None while it is
    # inactive (never 0): current == primary names the primary context itself. Together, the pointer's owner is
    # judged only where that run's primary context was current (together_primary), so a primary handle is there.
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
                "alone_primary": sum(1 for v in alone if v["current"] == v["primary"]),
                "alone_pointer": sum(1 for v in alone if v["pointer_context"] and v["pointer_context"] == v["primary"]),
                "alone_runs": len(alone), "pointer_context": hexed(a["pointer_context"]),
                "reported": f"; the library reports context {hexed(a['reported'])}" if a.get("reported") else "",
                "together": f"over {len(together)} run(s): " + spread(_together_run(t) for t in together),
                "together_runs": len(together), "together_loaded": len(loaded),
                "together_primary": sum(1 for t in loaded if t["current"] == t["primary"]),
                "together_pointer": sum(1 for t in loaded if t["pointer_context"] == t["primary"])}

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
                "same": sum(1 for v in found if v["producer_pointer"] == v["consumer_pointer"]),
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
        raise Inapplicable("fork: " + (found[0].get("torch_reason") or "PyTorch did not initialise CUDA in the parent"),
                           found[0].get("torch_skip"))
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
                 evidence, None if kind == "observation" else
                 _expect_current if lib == "cuda-core" else _expect_current_and_pointer)


def _expect_current(f: Facts) -> bool:
    """The primary context current alone and together (cuda.core's documentation promises only that)."""
    return f["alone_primary"] == f["alone_runs"] and f["together_primary"] == f["together_loaded"]


def _expect_current_and_pointer(f: Facts) -> bool:
    """The primary context current alone and together, and the allocations in it (the runtime promises that for
    its allocations)."""
    return (f["alone_primary"] == f["alone_runs"] and f["together_primary"] == f["together_loaded"]
            and f["alone_pointer"] == f["alone_runs"] and f["together_pointer"] == f["together_loaded"])


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
                 _expect_exchange if protocol == "cai" else _expect_dlpack, precondition=_every_stream_named,
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


def _expect_dlpack(f: Facts) -> bool:
    """Same memory, owned by the primary context, and the value the producer wrote: a DLPack handover always names
    the stream (the consumer passes its own), so every handover is ordered (the precondition always holds)."""
    if not f["same"] == f["in_primary"] == f["handovers"]:
        return False
    return f["correct"] == f["handovers"]  # correct: no wrong value


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
    *under_claims.CLAIMS,
    *blast_claims.CLAIMS,
    *memory_claims.CLAIMS,
)


# ---------------------------------------------------------------- the libraries, in children
