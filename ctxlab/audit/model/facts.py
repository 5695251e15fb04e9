"""What the recorded calls establish about contexts, for the rules: which contexts are primary, created or
green, on which device, which context each stream, event and allocation belongs to, which contexts did
work, which were destroyed and by what. Fed in the one pass with the two models (``one_pass.Models``); the rules
read them as ``model(stream).facts``.

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


@dataclass
class Facts:
    """What the calls establish (see the module docstring); handles are ints, events are the calls. Fed each
    event of a stream once, in time order (``take``; the one pass does), then ``finish``: a question about a
    past time looks at what was made before it (``owner``), one about the whole run at the finished facts."""

    primary: set[int] = field(default_factory=set)
    green: dict[int, dict] = field(default_factory=dict)
    created: dict[int, dict] = field(default_factory=dict)  # context -> the cuCtxCreate call that made it
    device: dict[int, int] = field(default_factory=dict)  # context -> device ordinal
    made: dict[int, dict] = field(default_factory=dict)  # context -> CONTEXT_CREATED event
    destroyed: dict[int, dict] = field(default_factory=dict)  # context -> the call that destroyed it
    worked: set[int] = field(default_factory=set)  # contexts in which a kernel, copy or memset ran
    streams: dict[int, list[tuple[int, int, dict]]] = field(default_factory=dict)  # handle -> (time, ctx, call)
    events: dict[int, list[tuple[int, int, dict]]] = field(default_factory=dict)
    _by_resource: set[int] = field(default_factory=set)  # contexts a CONTEXT_DESTROY_STARTING named

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

    def take(self, e: dict, s: Stream) -> None:
        """One event of stream ``s``, in time order."""
        domain = e.get("domain")
        if domain == "resource":
            self._resource(e, s)
        elif domain == "audit":
            if e.get("name") == GREEN_CONTEXT and e.get("context"):
                self.green[e["context"]] = e  # the handle cuCtxFromGreenCtx wrote (the last note wins)
        elif _fact_call(e.get("name", "")):
            self._call(e)

    def _resource(self, e: dict, s: Stream) -> None:
        ctx = e.get("context") or 0
        if not ctx:
            return
        name = e.get("name")
        if name == "CONTEXT_CREATED":
            self.made.setdefault(ctx, e)
            maker = s.enclosing(e, ("cuCtxCreate", "cuGreenCtxCreate", "cuDevicePrimaryCtxRetain"))
            if maker is None or maker.get("name", "").startswith("cuDevicePrimaryCtxRetain"):
                if maker is not None or s.enclosing_runtime(e) is not None:
                    self.primary.add(ctx)  # a primary retain's, directly or beneath a runtime call
            elif maker.get("name", "").startswith("cuGreenCtxCreate"):
                # CUPTI names the context current in a green context by a handle of its own: on the H200
                # (driver 580), a context created inside cuGreenCtxCreate besides the one cuCtxFromGreenCtx
                # returns. Both count as green (a note for the handle, when one comes, is kept instead).
                self.green.setdefault(ctx, {**maker, "green_of": "cuGreenCtxCreate"})
        elif name == "CONTEXT_DESTROY_STARTING":
            self.destroyed[ctx] = s.enclosing(e, ("cuCtxDestroy", "cuDevicePrimaryCtxRelease",
                                                   "cuDevicePrimaryCtxReset", "cudaDeviceReset")) or e
            self._by_resource.add(ctx)
        elif name == "STREAM_CREATED" and e.get("stream"):
            self.streams.setdefault(e["stream"], []).append((e.get("start", 0), ctx, e))

    def _call(self, e: dict) -> None:
        name, args, ctx = e.get("name", ""), e.get("args") or {}, e.get("context") or 0
        if name.startswith(CONTEXT_WORK_PREFIXES) and ctx and e.get("from") != "callback" and succeeded(e):
            self.worked.add(ctx)
        elif name.startswith(CONTEXT_WORK_PREFIXES) and ctx and name.startswith(("cuLaunch", "cuMemcpy", "cuMemset")):
            self.worked.add(ctx)  # a runtime's launch or copy beneath its own call: work in that context
        if not succeeded(e):
            return
        if name.startswith(CREATES) and args.get("ctx"):
            self.created[args["ctx"]] = e
            if "device" in args:
                self.device[args["ctx"]] = args["device"]
        elif name.startswith("cuDevicePrimaryCtxRetain"):
            handle = args.get("ctx") or ctx
            if handle:
                self.primary.add(handle)  # every handle a retain returned
            if args.get("ctx") and "device" in args:
                self.device.setdefault(args["ctx"], args["device"])
        elif name.startswith("cuCtxDestroy") and args.get("ctx"):
            if args["ctx"] not in self._by_resource:  # the resource event names the destroy better
                self.destroyed.setdefault(args["ctx"], e)
        elif name.startswith("cuCtxFromGreenCtx") and args.get("ctx"):
            self.green[args["ctx"]] = e  # the handle it wrote (a hook's note for it, when one comes, is kept)
        elif name.startswith("cuStreamCreate") and args.get("stream"):
            self.streams.setdefault(args["stream"], []).append((e.get("end", e.get("start", 0)), ctx, e))
        elif name.startswith("cuEventCreate") and args.get("event"):
            self.events.setdefault(args["event"], []).append((e.get("end", e.get("start", 0)), ctx, e))

    def finish(self) -> None:
        """After the last event: each handle's owners in time order (a resource event before a call at one
        time)."""
        for table in (self.streams, self.events):
            for entries in table.values():
                entries.sort(key=lambda entry: (entry[0], entry[2].get("domain") != "resource"))


# besides CONTEXT_WORK_PREFIXES and CREATES
FACT_CALLS = ("cuDevicePrimaryCtxRetain", "cuCtxDestroy", "cuStreamCreate", "cuEventCreate", "cuCtxFromGreenCtx")
_FACT_NAMES: dict[str, bool] = {}


def _fact_call(name: str) -> bool:
    """Whether a call of this name can establish a fact (kept per distinct name)."""
    known = _FACT_NAMES.get(name)
    if known is None:
        known = _FACT_NAMES[name] = name.startswith(CONTEXT_WORK_PREFIXES + CREATES + FACT_CALLS)
    return known


def primary_handles(events: list[dict]) -> set[int]:
    """Contexts created by a primary retain (directly or beneath a runtime call), and every handle a
    cuDevicePrimaryCtxRetain returned, among these events (the pytest guard's, one test's)."""
    stream = Stream(list(events))
    f = Facts()
    for e in stream.events:
        f.take(e, stream)
    return f.primary
