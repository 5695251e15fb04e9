"""Predicates over the state model (``ctxlab.audit.model.state``) for failing calls: a sticky error traced to the
launches that could have caused it, with every later failing call folded into it (its blast radius); and
every other failing call the rules before it did not explain, each with the state that explains it.

Messages are built from the values observed (calls, statuses, threads, handles)."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream, call_text, place_of, thread_of
from ctxlab.audit.model import causes
from ctxlab.audit.model.causes import Cause, missing
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.model.state import STICKY
from ctxlab.audit.rules.probes import is_probe, probe_of
from ctxlab.audit.rules.rule import NO_CLAIM, Rule
from ctxlab.audit.rules.settings import settings_cause

ORIGIN_SHOWN = 4
FOLDED_SHOWN = 6


def kernel_of(s: Stream, launch: dict) -> str:
    """A launch as a report names it: its kernel's name where the driver named it, its library, its stream."""
    args = launch.get("args") or {}
    kernels = s.run.kernels if s.run is not None else {}
    name = kernels.get(args.get("function", 0)) if args.get("function") else None
    if name is None:
        name = next((kernels[c["args"]["function"]] for c in s.by_tid.get(launch.get("tid"), ())
                     if c.get("from") == "callback" and (c.get("args") or {}).get("function") in kernels
                     and launch.get("start", 0) <= c.get("start", 0) <= launch.get("end", 0)), None)
    text = f"kernel {name}" if name else f"a kernel ({launch.get('name')})"
    library = launch.get("library")
    if library:
        text += f" from {library}"
    stream = args.get("stream")
    text += f" on stream {stream:#x}" if stream else " on the default stream"
    return text


def sticky_error(s: Stream) -> list[Hit]:
    """The first sticky (700-class) error of each context: the launches that can have caused it, and every
    later failing call into that context, or with a sticky status, folded into the one finding."""
    m = model(s)
    hits = []
    pinned = s.run.pinned if s.run is not None else {}
    for ctx, first in sorted(m.sticky.items(), key=lambda item: item[1].get("start", 0)):
        at = first.get("start", 0)
        origins = m.launches_before(ctx, at)
        exact = pinned.get(ctx)
        others = {id(e) for c, e in m.sticky.items() if c != ctx}  # another context's fault is its own finding
        later = [e for e in s.calls if e is not first and e.get("start", 0) >= at and id(e) in m.states
                 and id(e) not in others and (e.get("context") == ctx or (not e.get("context")
                                                                           and e.get("status") in STICKY))]
        libraries = sorted({m.states[id(e)].library or "the program" for e in later})
        shown = []
        for e in later:
            label = f"{e['name']} ({e.get('status')}) on thread {thread_of(e)}{place_of(e)}"
            if label not in shown:
                shown.append(label)
        if exact is not None:
            cause = (f"Re-run with launches serialised (CUDA_LAUNCH_BLOCKING=1), the fault is {exact['kernel']}, "
                     f"launched on thread {exact['thread']}{exact['place']}")
        elif origins:
            named = "; ".join(f"{kernel_of(s, o)} on thread {thread_of(o)}{place_of(o)}"
                              for o in origins[:ORIGIN_SHOWN])
            more = f" and {len(origins) - ORIGIN_SHOWN} more" if len(origins) > ORIGIN_SHOWN else ""
            cause = (f"Launched into it since its last synchronisation that succeeded, newest first: {named}{more}. "
                     f"The fault is in one of these (the newest is reported here); `ctxlab audit --pin` re-runs the "
                     f"program with launches serialised to name the one")
        else:
            cause = "No launch into this context was recorded before it (one made before tracing began?)"
        folded = ""
        if later:
            folded = (f" After it, {len(later)} failing call(s) of {', '.join(libraries)} returned errors of this "
                      f"context: {'; '.join(shown[:FOLDED_SHOWN])}{' ...' if len(shown) > FOLDED_SHOWN else ''}")
        message = (f"{first['name']} on thread {thread_of(first)} returned {first.get('status')}: a kernel faulted in "
                   f"context {ctx:#x} and the error is sticky (every later call into the context fails, whichever "
                   f"library makes it). {cause}.{folded}")
        if exact is not None and exact.get("event") is not None:
            deciding = exact["event"]
        else:
            deciding = next((o for o in origins if o.get("stack")), first)
        related = [("surfaced at", first)] + [("also launched before it", o) for o in origins[1:ORIGIN_SHOWN]]
        if exact is not None and exact.get("event") is not None:
            because = Cause(deciding, f"{exact['kernel']} faulted (named by a re-run with launches serialised)")
        elif origins:
            origin = deciding if deciding in origins else origins[0]
            newest = "the only launch" if len(origins) == 1 else (
                "the newest launch" if origin is origins[0] else "a launch")
            because = Cause(origin, f"{kernel_of(s, origin)} on thread {thread_of(origin)} was {newest} into context "
                                    f"{ctx:#x} before {first['name']} returned {first.get('status')}"
                                    + (" (one of several: --pin names the faulting one)" if len(origins) > 1 else ""))
        else:
            because = missing(f"no launch into context {ctx:#x} was recorded before the error surfaced")
        hits.append(Hit(deciding, message, calls=(first, *later[:FOLDED_SHOWN]), related=tuple(related),
                        explains=tuple(later), **because.hit_fields()))
    return hits


STICKY_ERROR_RULE = Rule(
    "sticky-error", "error", "A kernel faulted: the context is poisoned, every later call fails",
    "An illegal address, a misaligned access, a device-side assert, a launch failure or an illegal instruction "
    "in a kernel is sticky: the context cannot be used any more, and every later call into it, of every "
    "library, returns the error. Launches are asynchronous, so the error surfaces at a later synchronisation "
    "or copy, far from its cause. The finding names the launches made into the context since its last "
    "successful synchronisation (the newest first), folds every later failing call into one finding, and "
    "with --pin re-runs the program with launches serialised (CUDA_LAUNCH_BLOCKING=1) to name the launch.",
    NO_CLAIM, sticky_error,
    "Knows launches made while tracing through cuLaunchKernel*, cuLaunchCooperativeKernel, cudaLaunchKernel "
    "and graph launches; kernel names come from cuFuncGetName (CUDA 12.3+), so a runtime launch whose driver "
    "launch the runtime hides is named by its call. Without --pin the faulting launch is one of those named, "
    "not certainly the newest.")


def failed_call(s: Stream) -> list[Hit]:
    """Every failing call that no rule before it explained and that no library probed on purpose: what state
    the call met. One finding per thread, function, status and line (a loop that fails counts its calls)."""
    m = model(s)
    groups: dict[tuple, list[dict]] = {}
    for e in m.failed_calls():
        state = m.states.get(id(e))
        if state is None or id(e) in s.explained or is_probe(state) or state.same_as is not None:
            continue  # (a call repeating another failure is reported with it)
        frame = tuple((e.get("stack") or [[None, None]])[0][:2])
        groups.setdefault((e.get("tid"), e.get("name"), e.get("status"), frame), []).append(e)
    hits = []
    for (_tid, name, status, _frame), calls in groups.items():
        e = calls[0]
        state = m.states[id(e)]
        who = f"made by {state.library}" if state.library else "made by the program itself"
        times = f" ({len(calls)} times)" if len(calls) > 1 else ""
        beneath = [x for c in calls for x in m.failure_of(c) if x is not c]
        inner = next((x for x in beneath if x.get("domain") == "driver"), None)
        how = f" ({inner['name']} beneath it returned {inner.get('status')})" if inner is not None else ""
        because = causes.of_state(m, s, state)
        if because.event is None:
            because = settings_cause(s, e) or because
        hits.append(Hit(e, f"{name} on thread {thread_of(e)} returned {status}{times}{how}, {who}: "
                           f"{state.describe()}", calls=tuple(calls), explains=tuple(beneath), **because.hit_fields()))
    return hits


FAILED_CALL_RULE = Rule(
    "failed-call", "error", "A CUDA call failed",
    "Every call that returned anything but success and that no rule above explains and no library probed on "
    "purpose: the finding says what the call met (the thread's current context and who made it, the "
    "runtime's device, the contexts and lives of the handles and memory it passed, a sticky error, a capture "
    "in progress) and who made the call.",
    NO_CLAIM, failed_call,
    "A library's failing call that it handles itself is told apart only by evidence: a successful call "
    "around it, or the probe catalogue (ctxlab.audit.rules.probes), each entry backed by a clean program.")


def probes(s: Stream) -> list[dict]:
    """The failing calls libraries made on purpose and handled, grouped: (library, call, status, count, why)."""
    m = model(s)
    out: dict[tuple, dict] = {}
    for e in s.calls:
        state = m.states.get(id(e))
        if state is None or not is_probe(state):
            continue
        entry = probe_of(state)
        handled = state.handled_by
        if handled is not None and handled.get("start", 0) > e.get("start", 0):
            why = f"made again successfully: {call_text(handled)}"  # a pool that freed its cache and retried
        elif handled is not None:
            why = f"beneath {call_text(handled)}, which succeeded"
        else:
            why = entry.why if entry is not None else ""
        key = (state.library, e.get("name"), e.get("status"))
        row = out.setdefault(key, {"library": state.library, "call": e.get("name"), "status": e.get("status"),
                                   "count": 0, "why": why})
        row["count"] += 1
    return list(out.values())
