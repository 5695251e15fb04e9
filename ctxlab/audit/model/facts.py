"""What the recorded calls establish about contexts, for the rules: which contexts are primary, created or
green, on which device, which context each stream, event and allocation belongs to, which contexts did
work, which were destroyed and by what. Built once per stream of events (``facts(stream)``).

Everything comes from the calls' kept parameters (``ctxlab.tracing.fields``: the handle ``cuStreamCreate``
wrote, the context ``cuCtxCreate`` made, ...) and CUPTI's resource events; nothing is guessed from names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.audit.engine import Stream, succeeded
from ctxlab.audit.events import CONTEXT_WORK_PREFIXES
from ctxlab.audit.model.hooks import GREEN_CONTEXT

CREATES = ("cuCtxCreate",)
# Calls that use a context: kernels, copies, memsets, graphs, and the program's allocations (not queries).


def primary_handles(events: list[dict] | Stream) -> set[int]:
    """Contexts created by a primary retain (directly or beneath a runtime call), and every handle a
    cuDevicePrimaryCtxRetain returned."""
    stream = events if isinstance(events, Stream) else Stream(list(events))
    out = set()
    for e in stream.resources:
        if e.get("name") == "CONTEXT_CREATED" and e.get("context"):
            maker = stream.enclosing(e, ("cuCtxCreate", "cuGreenCtxCreate", "cuDevicePrimaryCtxRetain"))
            if maker is None or maker.get("name", "").startswith("cuDevicePrimaryCtxRetain"):
                if maker is not None or stream.enclosing_runtime(e) is not None:
                    out.add(e["context"])
    for e in stream.calls:
        if e.get("name", "").startswith("cuDevicePrimaryCtxRetain") and succeeded(e):
            handle = (e.get("args") or {}).get("ctx") or e.get("context")
            if handle:
                out.add(handle)
    return out


def green_contexts(s: Stream) -> dict[int, dict]:
    """Every CUcontext handle that stands for a green context, with the event that made it known.

    CUPTI names the context current in a green context by a handle of its own: on the H200 (driver 580), a
    context created inside cuGreenCtxCreate besides the one cuCtxFromGreenCtx returns. Both count as green."""
    greens = {e["context"]: e for e in s.observed if e.get("name") == GREEN_CONTEXT and e.get("context")}
    for made in s.resources:
        if made.get("name") == "CONTEXT_CREATED" and made.get("context") and made["context"] not in greens:
            maker = s.enclosing(made, ("cuGreenCtxCreate",))
            if maker is not None:
                greens[made["context"]] = {**maker, "green_of": "cuGreenCtxCreate"}
    return greens


@dataclass
class Facts:
    """What the calls establish (see the module docstring); handles are ints, events are the calls."""

    primary: set[int] = field(default_factory=set)
    green: dict[int, dict] = field(default_factory=dict)
    created: dict[int, dict] = field(default_factory=dict)  # context -> the cuCtxCreate call that made it
    device: dict[int, int] = field(default_factory=dict)  # context -> device ordinal
    made: dict[int, dict] = field(default_factory=dict)  # context -> CONTEXT_CREATED event
    destroyed: dict[int, dict] = field(default_factory=dict)  # context -> the call that destroyed it
    worked: set[int] = field(default_factory=set)  # contexts in which a kernel, copy or memset ran
    streams: dict[int, list[tuple[int, int, dict]]] = field(default_factory=dict)  # handle -> (time, ctx, call)
    events: dict[int, list[tuple[int, int, dict]]] = field(default_factory=dict)

    def owner(self, table: dict[int, list[tuple[int, int, dict]]], handle: int, at: int) -> tuple[int, dict] | None:
        """The context a stream or event handle belonged to at this time (handles are reused after a destroy)."""
        found = None
        for made_at, ctx, call in table.get(handle, ()):
            if made_at <= at:
                found = (ctx, call)
        return found

    def is_created(self, ctx: int) -> bool:
        """A context made by cuCtxCreate (not primary, not green)."""
        return ctx in self.created and ctx not in self.primary and ctx not in self.green


# besides CONTEXT_WORK_PREFIXES and CREATES
FACT_CALLS = ("cuDevicePrimaryCtxRetain", "cuCtxDestroy", "cuStreamCreate", "cuEventCreate")


def facts(s: Stream) -> Facts:
    """The facts of this stream (computed once, kept on it)."""
    known = getattr(s, "_facts", None)
    if known is not None:
        return known
    f = Facts(primary=primary_handles(s), green=green_contexts(s))
    for e in s.resources:
        ctx = e.get("context") or 0
        if not ctx:
            continue
        if e.get("name") == "CONTEXT_CREATED":
            f.made.setdefault(ctx, e)
        elif e.get("name") == "CONTEXT_DESTROY_STARTING":
            f.destroyed[ctx] = s.enclosing(e, ("cuCtxDestroy", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
                                               "cudaDeviceReset")) or e
        elif e.get("name") == "STREAM_CREATED" and e.get("stream"):
            f.streams.setdefault(e["stream"], []).append((e.get("start", 0), ctx, e))
    for e in s.named(CONTEXT_WORK_PREFIXES + CREATES + FACT_CALLS):
        name, args, ctx = e.get("name", ""), e.get("args") or {}, e.get("context") or 0
        if name.startswith(CONTEXT_WORK_PREFIXES) and ctx and e.get("from") != "callback" and succeeded(e):
            f.worked.add(ctx)
        elif name.startswith(CONTEXT_WORK_PREFIXES) and ctx and name.startswith(("cuLaunch", "cuMemcpy", "cuMemset")):
            f.worked.add(ctx)  # a runtime's launch or copy beneath its own call: work in that context
        if not succeeded(e):
            continue
        if name.startswith(CREATES) and args.get("ctx"):
            f.created[args["ctx"]] = e
            if "device" in args:
                f.device[args["ctx"]] = args["device"]
        elif name.startswith("cuDevicePrimaryCtxRetain") and args.get("ctx") and "device" in args:
            f.device.setdefault(args["ctx"], args["device"])
        elif name.startswith("cuCtxDestroy") and args.get("ctx"):
            f.destroyed.setdefault(args["ctx"], e)
        elif name.startswith("cuStreamCreate") and args.get("stream"):
            f.streams.setdefault(args["stream"], []).append((e.get("end", e.get("start", 0)), ctx, e))
        elif name.startswith("cuEventCreate") and args.get("event"):
            f.events.setdefault(args["event"], []).append((e.get("end", e.get("start", 0)), ctx, e))
    for table in (f.streams, f.events):
        for entries in table.values():
            entries.sort(key=lambda entry: entry[0])
    s._facts = f  # type: ignore[attr-defined]
    return f

