"""Predicates of the rules about handles and the context they belong to: a stream or event of another
context, a runtime library working under a context it did not make, a hand-over between libraries with no
stream order."""

from __future__ import annotations

from ctxlab.audit.child.exchange import HANDOVER, pending_work
from ctxlab.audit.engine import Hit, Stream, thread_of
from ctxlab.audit.events import DRIVER_EVENT_RECORD_PREFIXES
from ctxlab.audit.model import causes
from ctxlab.audit.model.causes import Cause, missing, on
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.rule import Rule

STREAM_USERS = ("cuLaunch", "cuMemcpy", "cuMemset", "cuStreamWaitEvent", "cuStreamSynchronize", "cuStreamQuery",
                "cuMemAllocAsync", "cuMemFreeAsync")
# Runtime calls that only ask: they do not make a library work under the current context.
RUNTIME_QUERIES = ("cudaGetDevice", "cudaGetDeviceCount", "cudaGetLastError", "cudaPeekAtLastError",
                   "cudaDriverGetVersion", "cudaRuntimeGetVersion", "cudaDeviceGetAttribute",
                   "cudaGetDeviceProperties", "cudaPointerGetAttributes", "cudaGetErrorString", "cudaGetErrorName",
                   "cudaDeviceCanAccessPeer", "cudaGetDriverEntryPoint", "cudaSetDevice", "cudaFuncGetAttributes")
# Producers whose __dlpack__(stream=...) makes the consumer's stream wait for the array itself, whichever of
# the producer's streams made it (a JAX array carries its definition events), not just a current stream.
ORDERED_PRODUCERS = ("jax", "jaxlib")



def handle_from_another_context(s: Stream) -> list[Hit]:
    """An event recorded on a stream of another context, or a stream used while another context is current."""
    f = model(s).facts
    hits, seen = [], set()
    for e in s.named(DRIVER_EVENT_RECORD_PREFIXES + STREAM_USERS + ("cuEventElapsedTime",)):
        name, args = e.get("name", ""), e.get("args") or {}
        if e.get("domain") != "driver" or not name.startswith(
                (*DRIVER_EVENT_RECORD_PREFIXES, *STREAM_USERS, "cuEventElapsedTime")):
            continue
        at, current = e.get("start", 0), e.get("context") or 0
        stream = f.owner(f.streams, args["stream"], at) if args.get("stream") else None
        event = f.owner(f.events, args["event"], at) if args.get("event") else None
        problem = None
        if name.startswith(DRIVER_EVENT_RECORD_PREFIXES) and event is not None:
            other = stream[0] if stream is not None else current
            if other and event[0] != other:
                problem = (f"event {args['event']:#x} (made in context {event[0]:#x}) was recorded on "
                           f"{'stream ' + hex(args['stream']) if stream else 'the default stream'} of context "
                           f"{other:#x}: an event and the stream it is recorded on must belong to one context",
                           event[1])
        elif name.startswith("cuEventElapsedTime") and event is not None and args.get("end_event"):
            end = f.owner(f.events, args["end_event"], at)
            if end is not None and end[0] != event[0]:
                problem = (f"events {args['event']:#x} and {args['end_event']:#x} belong to contexts {event[0]:#x} "
                           f"and {end[0]:#x}: the time between events of two contexts cannot be measured", end[1])
        elif stream is not None and current and stream[0] != current and not name.startswith("cuStreamWaitEvent"):
            problem = (f"stream {args['stream']:#x} belongs to context {stream[0]:#x} but context {current:#x} was "
                       f"current: a stream is used with the context that made it current", stream[1])
        elif stream is not None and name.startswith("cuStreamWaitEvent") and current and stream[0] != current:
            problem = (f"stream {args['stream']:#x} belongs to context {stream[0]:#x} but context {current:#x} was "
                       f"current", stream[1])
        if problem is None or (e.get("tid"), name, problem[1].get("start")) in seen:
            continue
        seen.add((e.get("tid"), name, problem[1].get("start")))
        status = e.get("status")
        outcome = f"returned {status}" if status not in ("CUDA_SUCCESS", None) else "ran"
        hits.append(Hit(e, f"{name} on thread {thread_of(e)} {outcome}: {problem[0]}. Make the stream and the event "
                           f"under the context that uses them, or use one context per device",
                        calls=(problem[1], e), related=(("made at", problem[1]),),
                        **_handle_cause(s, e, problem[1]).hit_fields()))
    return hits


HANDLE_FROM_ANOTHER_CONTEXT_RULE = Rule(
    "handle-from-another-context", "error", "A stream or event used with another context",
    "Streams and events belong to the context current when they were made. cuEventRecord on a stream of "
    "another context, a launch or copy on a stream of a context that is not current, or the time between "
    "events of two contexts fail with CUDA_ERROR_INVALID_HANDLE (or silently run elsewhere).",
    "migrate.state-follows-context", handle_from_another_context,
    "Knows the streams and events made while tracing (cuStreamCreate*, cuEventCreate, CUPTI's stream "
    "events); handles made before tracing began, or by a runtime copy through paths CUPTI does not show, are "
    "not judged. cuStreamWaitEvent on an event of another context is allowed and not reported.")


def _handle_cause(s: Stream, e: dict, made: dict) -> Cause:
    """A handle of one context used with another: the change that made the thread's context current, where it
    came after the handle was made; else the call that made the handle in its context."""
    change = model(s).current_change(e.get("tid"), e.get("start", 0))
    if change is not None and change.at > made.get("start", 0) and change.context == (e.get("context") or 0):
        return causes.current_context(model(s), e, f"the handle was made by {on(made)}")
    return Cause(made, f"{on(made)} made the handle in context {made.get('context') or 0:#x}")


def non_primary_current(s: Stream) -> list[Hit]:
    """A runtime library (CuPy, PyTorch, the CUDA runtime itself) made to work, or Numba made to attach, while a
    context the program created with cuCtxCreate was current: they are built for the primary context."""
    f = model(s).facts
    hits: list[Hit] = []
    seen: set = set()
    if not f.created:
        return hits  # no created context: nothing ran under one
    for e in s.calls:
        ctx = e.get("context") or 0
        if not f.is_created(ctx) or (e.get("tid"), ctx) in seen:
            continue
        name = e.get("name", "")
        runtime_work = e.get("domain") == "runtime" and not name.startswith(RUNTIME_QUERIES)
        attach = (e.get("domain") == "driver" and e.get("from") != "callback" and bool(e.get("library"))
                  and name.startswith("cuDevicePrimaryCtxRetain"))  # a library's retain, not the program's
        if not (runtime_work or attach):
            continue
        seen.add((e.get("tid"), ctx))
        made = f.created[ctx]
        what = ("retained the primary context (what Numba does to attach, and then refuses: it works on the "
                "primary context only)" if attach else f"{name}, a runtime call, ran in it: runtime libraries "
                "(CuPy, PyTorch) keep caches per device, made for the primary context, and fail with invalid "
                "resource handle (error 400) or allocate where you do not expect")
        hits.append(Hit(e, f"context {ctx:#x}, created by {made['name']} on thread {thread_of(made)}, was current on "
                           f"thread {thread_of(e)} when {what}. Pop the created context first, or have that code use "
                           f"the primary context (cuDevicePrimaryCtxRetain) instead of cuCtxCreate",
                        calls=(made, e), related=(("created at", made),),
                        **causes.current_context(model(s), e, "a created context, not the primary one").hit_fields()))
    return hits


NON_PRIMARY_CURRENT_RULE = Rule(
    "non-primary-current", "warning", "A primary-context library working under a created context",
    "CuPy, PyTorch and the runtime's own caches are made for the primary context; Numba refuses any other. "
    "With a context from cuCtxCreate (pycuda.autoinit-style code) current, their calls run in it: cached "
    "kernels and streams fail with invalid resource handle (error 400), or memory lands where it should not.",
    "lifecycle.runtime-uses-created-context", non_primary_current,
    "Sees runtime calls that do work (not queries) and primary-context retains made by a library while a "
    "context created with cuCtxCreate is current; a library that uses the driver API alone and never asks "
    "for the primary context is not judged. Reported once per thread and context.",
    superseded_by=("cross-context-handle",))


def unordered_handover(s: Stream) -> list[Hit]:
    """An array handed between libraries (DLPack, ``__cuda_array_interface__``: the audit's hand-over notes)
    while launches on another stream were not ordered before it."""
    hits = []
    for e in s.observed:
        if e.get("name") != HANDOVER:
            continue
        if e.get("producer") in ORDERED_PRODUCERS and e.get("protocol", "").startswith("DLPack (__dlpack__"):
            continue  # its __dlpack__ waits for the array's own readiness, on whatever streams made it
        pending = pending_work(s.calls, e.get("start", 0), e.get("end"))
        if not pending:
            continue
        last = [c for c in s.calls if c.get("domain") == "driver" and c.get("start", 0) < e.get("start", 0)
                and (c.get("args") or {}).get("stream") in pending and c.get("name", "").startswith(
                    ("cuLaunch", "cuMemcpy", "cuMemset"))]
        because = (Cause(last[-1], f"{on(last[-1])} queued work on stream {(last[-1].get('args') or {})['stream']:#x} "
                                   f"that nothing ordered before the hand-over") if last else
                   missing("the pending work was not matched to a recorded call"))
        streams = ", ".join(f"{n} on stream {stream:#x}" for stream, n in sorted(pending.items()))
        hits.append(Hit(e, f"{e.get('consumer', '?')} on thread {thread_of(e)} took an array from "
                           f"{e.get('producer') or 'another library'} through {e.get('protocol', '?')} "
                           f"({e.get('why', '')}) while work on other streams was not ordered before it ({streams}: "
                           f"no synchronisation, no event waited for): the consumer can read the data before it is "
                           f"written, and gets wrong values without an error. Synchronise the producer's stream "
                           f"first, or make the producer's stream current while handing over so that the protocol "
                           f"orders it (DLPack with the consumer's stream, CAI v3 with its stream)",
                        **because.hit_fields()))
    return hits


UNORDERED_HANDOVER_RULE = Rule(
    "unordered-handover", "warning", "An array handed between libraries with no stream order",
    "An array handed over through DLPack or __cuda_array_interface__ without the consumer's stream (a "
    "legacy capsule, CAI v2 with no stream) while the producer's work on another stream was not ordered "
    "before it can be read before it is written: silent wrong values.",
    "interop.exchange.torch-to-numba", unordered_handover,
    "Needs the audit's hand-over records of the consumers it knows (cupy.asarray/from_dlpack, torch.from_dlpack/"
    "as_tensor, numba.cuda.as_cuda_array, jax.dlpack.from_dlpack); launches made before the hand-over on other "
    "streams, with no synchronisation or event between by the consumer's return, count as pending. A JAX array "
    "handed over through __dlpack__ is ordered by JAX itself (its array waits for its own events) and is not "
    "judged; the consumer's stream is not known, so work it already waits for by other means may be counted.")
