"""The audit's engine: the recorded events as a stream the rules query, findings, and where each one is.

A rule's predicate gets a ``Stream`` (the tracer's events in time order, with the fork records and the
exceptions the program did not catch) and returns ``Hit`` objects naming the event that decides it;
the engine turns them into ``Finding`` objects with the user's file:line.

Where a finding's location comes from, best first (``Finding.location_from``):

- ``callback``: the C callback took the user's stack at the call (context functions, resource events,
  launches, failing calls and the other calls the audit adds);
- ``exception``: the program raised an exception naming the call's status on that thread and did not
  catch it: its innermost user frame;
- ``fork hook``: the child's first CUDA call, seen by the audit's fork hook;
- ``flight recorder``: where a crashing or stuck thread was (faulthandler's stack, the call it was inside);
- ``nearby``: the call carries no Python stack (one the C callback did not take, or could not: its thread
  released the GIL and the snapshot came too late): the user frame of the last call on that thread that had
  one, before it. Approximate, and the report says so;
- ``none``: nothing to go by.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from ctxlab.tracing.calls import call_name

OK_STATUSES = frozenset({None, "CUDA_SUCCESS", "cudaSuccess"})
# The one definition of a status that answers a question rather than reports a failure, and the calls whose
# documentation makes it an answer (name prefixes: _v2, _ptsz and _ptds forms included). The same status from
# any other call is a failure: NOT_READY from cuEventElapsedTime means the work it needed was not done.
ANSWERS: dict[str, tuple[str, ...]] = {
    # "Returns CUDA_SUCCESS if all operations ... have completed, or CUDA_ERROR_NOT_READY if not" (the queries)
    "CUDA_ERROR_NOT_READY": ("cuStreamQuery", "cuEventQuery"),
    "cudaErrorNotReady": ("cudaStreamQuery", "cudaEventQuery"),
    # "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: if direct access ... has already been enabled"
    "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED": ("cuCtxEnablePeerAccess",),
    "cudaErrorPeerAccessAlreadyEnabled": ("cudaDeviceEnablePeerAccess",),
    # "If no variable of that name exists, cuModuleGetGlobal() returns CUDA_ERROR_NOT_FOUND" (a lookup by name;
    # cuLibraryGetGlobal/GetManaged and cuGetProcAddress document the same answer)
    "CUDA_ERROR_NOT_FOUND": ("cuModuleGetGlobal", "cuLibraryGetGlobal", "cuLibraryGetManaged", "cuGetProcAddress"),
    "cudaErrorSymbolNotFound": ("cudaLibraryGetGlobal", "cudaLibraryGetManaged"),
}
SEVERITIES = ("error", "warning", "info")
# Events that are not calls: CUPTI's resource events, and what the audit's hooks observed inside calls
# (ctxlab.audit.model.hooks: a kernel argument pointing into another context's memory, a green context's handle).
NOT_CALLS = ("resource", "audit")


def succeeded(event: dict) -> bool:
    """The call returned success. A call with no status (still in flight when the program ended) has not."""
    return event.get("status") in ("CUDA_SUCCESS", "cudaSuccess")


def ok_or_pending(event: dict) -> bool:
    """The call returned success or has not returned (no status): nothing says it failed."""
    return event.get("status") in OK_STATUSES


def answered(event: dict) -> bool:
    """The call's status is an answer its documentation gives (``ANSWERS``): NOT_READY from a query, ..."""
    calls = ANSWERS.get(str(event.get("status")))
    return calls is not None and str(event.get("name", "")).startswith(calls)


def failed(event: dict) -> bool:
    """The call returned anything but success or an answer its documentation gives for that call (``ANSWERS``).
    The one definition of a failing call: the state model's ``failing`` is this function."""
    return event.get("domain") not in NOT_CALLS and event.get("status") not in OK_STATUSES and not answered(event)


def thread_of(event: dict) -> str:
    """The thread a finding's message names for an event."""
    return str(event.get("thread", "?"))


def place_of(event: dict) -> str:
    """" at file:line" of an event's innermost user frame, or "" where it has no stack."""
    frame = (event.get("stack") or [[None, None]])[0]
    return f" at {frame[0]}:{frame[1]}" if frame[0] else ""


def end_of(event: dict) -> int:
    """When an event ended (its start for an instant)."""
    return event.get("end", event.get("start", 0))


def call_text(event: dict) -> str:
    """A call as a report names it: function, status when not success, context handle, thread."""
    text = call_name(event, bracketed=NOT_CALLS)
    if event.get("context"):
        text += f" (ctx {event['context']:#x})"
    return f"{text} on {event.get('thread', '?')}"


@dataclass(frozen=True)
class Location:
    """A frame of the user's program."""

    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def as_dict(self) -> dict:
        """The JSON fields of this object."""
        return {"file": self.file, "line": self.line, "function": self.function}


def frames(stack: Any) -> tuple[Location, ...]:
    """A recorded stack (``[file, line, function]`` lists) as Locations; malformed frames left out."""
    out = []
    for frame in stack or ():
        try:
            out.append(Location(str(frame[0]), int(frame[1]), str(frame[2]) if len(frame) > 2 else ""))
        except (TypeError, ValueError, IndexError):
            continue
    return tuple(out)


def has_frames(stack: Any) -> bool:
    """Whether ``frames(stack)`` holds at least one frame, without building them (the usual well-formed first
    frame decides at once)."""
    if not stack:
        return False
    first = stack[0]
    if isinstance(first, (list, tuple)) and len(first) >= 2 and isinstance(first[1], int):
        return True
    return bool(frames(stack))


@dataclass(frozen=True)
class Hit:
    """What a rule's predicate found: the deciding event, a message built from what was observed,
    the calls involved, and other places worth naming (where the context was destroyed, ...)."""

    event: dict
    message: str
    calls: tuple[dict, ...] = ()
    related: tuple[tuple[str, dict], ...] = ()  # (what, event with a stack)
    stack: tuple = ()  # a stack found elsewhere (the fork hook)
    location_from: str = ""
    explains: tuple[dict, ...] = ()  # further calls this finding accounts for, not listed (its blast radius)
    # the event in the history that made it so (its "because"), and one line saying what it did; a hit with
    # no cause says why the record holds none in ``cause_missing``
    cause: dict | None = None
    cause_what: str = ""
    cause_missing: str = ""


NO_CAUSE = "cause not in the record"


@dataclass(frozen=True)
class Because:
    """Why a finding holds: the call in the program's history that caused it (what it did, on which thread,
    from which library, at which user line), or, where no recorded event explains it, a plain statement so."""

    what: str
    call: str = ""
    thread: str = ""
    location: Location | None = None
    library: str = ""
    in_record: bool = True

    def __str__(self) -> str:
        if not self.in_record:
            return f"because: {self.what}"
        where = f" at {self.location}" if self.location else ""
        by = f" ({self.library})" if self.library else ""
        return f"because: {self.what}{by}{where}"

    def as_dict(self) -> dict:
        """The JSON fields of this object."""
        return {"what": self.what, "call": self.call, "thread": self.thread,
                "location": self.location.as_dict() if self.location else None, "library": self.library,
                "in_record": self.in_record}


def because_of(hit: Hit, stream: Stream) -> Because:
    """A hit's because: its cause event located at the user's frame (a stack of its own, else the nearest on
    its thread), or the reason the record holds none."""
    cause = hit.cause
    if cause is None:
        return Because(hit.cause_missing or NO_CAUSE, in_record=False)
    found = frames(cause.get("stack")) or frames(stream.nearby_stack(cause))
    return Because(hit.cause_what or f"{call_text(cause)}", call=call_text(cause), thread=thread_of(cause),
                   location=found[0] if found else None, library=str(cause.get("library") or ""))


@dataclass(frozen=True)
class Finding:
    """One hazard found in the program: rule, severity, where, on which thread, what it involved."""

    rule: str
    severity: str
    message: str
    thread: str
    location: Location | None
    location_from: str
    stack: tuple[Location, ...]
    calls: tuple[str, ...]
    claim: str
    related: tuple[tuple[str, Location], ...] = ()
    location_missing: str = ""  # why there is no location, when there is none
    because: Because = Because(NO_CAUSE, in_record=False)

    def as_dict(self) -> dict:
        """The JSON fields of this object."""
        return {"rule": self.rule, "severity": self.severity, "message": self.message, "thread": self.thread,
                "location": self.location.as_dict() if self.location else None,
                "location_from": self.location_from, "stack": [f.as_dict() for f in self.stack],
                "calls": list(self.calls), "claim": self.claim,
                "related": [{"what": what, "location": loc.as_dict()} for what, loc in self.related],
                "because": self.because.as_dict(),
                **({"location_missing": self.location_missing} if self.location is None else {})}


@dataclass
class RunInfo:
    """How the run ended and what the parent saw of it (``ctxlab.tracing.supervise``), for the rules about
    crashes and hangs, and the kernels' names."""

    ending: dict = field(default_factory=dict)  # Ending.as_dict()
    open_calls: list = field(default_factory=list)  # ctxlab.tracing.flight.OpenCall: calls entered, not returned
    fatal: list = field(default_factory=list)  # StacksDump at a fatal signal
    dumps: list = field(default_factory=list)  # StacksDump the parent asked for (a hang)
    exits: list[dict] = field(default_factory=list)  # the program's os._exit / os.kill / os.abort, with stacks
    kernels: dict[int, str] = field(default_factory=dict)  # CUfunction -> kernel name
    idents: dict[int, int] = field(default_factory=dict)  # OS thread id -> threading ident
    threads: dict[int, str] = field(default_factory=dict)  # OS thread id -> name
    seconds_inside: dict[int, float] = field(default_factory=dict)  # OS thread id -> seconds inside its open call
    pinned: dict[int, dict] = field(default_factory=dict)  # context -> the faulting launch a serialised re-run named
    folded_by_thread: dict[int, int] = field(default_factory=dict)  # OS thread id -> its calls read as counts


@dataclass
class Stream:
    """The recorded events in time order, with per-thread views the rules need. ``explained`` holds the ids of
    the calls the findings so far account for (the rules run in order; later ones read it)."""

    events: list[dict]
    forks: list[dict] = field(default_factory=list)
    exceptions: list[dict] = field(default_factory=list)
    run: RunInfo | None = None
    explained: set[int] = field(default_factory=set)
    counts: dict = field(default_factory=dict)  # what judging it read (the one pass's counts), for the stats

    def __post_init__(self) -> None:
        self.events = sorted(self.events, key=lambda e: (e.get("start", 0), -end_of(e), e.get("seq", 0)))
        self.calls = [e for e in self.events if e.get("domain") not in NOT_CALLS]
        self.unsuccessful = [e for e in self.calls if e.get("status") not in OK_STATUSES]  # failed, answered
        self.resources = [e for e in self.events if e.get("domain") == "resource"]
        self.observed = [e for e in self.events if e.get("domain") == "audit"]
        self._call_index: dict[str, list[int]] = {}  # name -> its calls' positions in ``calls``
        for i, e in enumerate(self.calls):
            self._call_index.setdefault(e.get("name", ""), []).append(i)
        self._named: dict[tuple[str, ...], list[dict]] = {}
        self.by_tid: dict[Any, list[dict]] = {}
        for e in self.events:
            self.by_tid.setdefault(e.get("tid"), []).append(e)
        self._runtime: dict[Any, list[dict]] = {}
        for e in self.calls:
            if e.get("domain") == "runtime":
                self._runtime.setdefault(e.get("tid"), []).append(e)
        self._runtime_starts = {tid: [c.get("start", 0) for c in items] for tid, items in self._runtime.items()}
        self._starts: dict[Any, list[int]] = {}
        self._stacked: dict[Any, tuple[list[int], list[dict]]] = {}  # per thread, made when a finding asks

    def _with_stacks(self, tid: Any) -> tuple[list[int], list[dict]]:
        """A thread's events that carry a Python stack, and their start times (to bisect)."""
        known = self._stacked.get(tid)
        if known is None:
            with_stack = [e for e in self.by_tid.get(tid, ()) if has_frames(e.get("stack"))]
            known = self._stacked[tid] = ([e.get("start", 0) for e in with_stack], with_stack)
        return known

    def named(self, prefixes: tuple[str, ...]) -> list[dict]:
        """The calls whose names start with one of these prefixes, in time order: an index (each distinct name
        is tested once), so a rule about a few calls does not scan every call of the program."""
        known = self._named.get(prefixes)
        if known is None:
            picks = sorted(i for name, positions in self._call_index.items() if name.startswith(prefixes)
                           for i in positions)
            known = self._named[prefixes] = [self.calls[i] for i in picks]
        return known

    def starts_of(self, tid: Any) -> list[int]:
        """The start times of a thread's events, in order (to bisect ``by_tid[tid]``)."""
        known = self._starts.get(tid)
        if known is None:
            known = self._starts[tid] = [e.get("start", 0) for e in self.by_tid.get(tid, ())]
        return known

    def enclosing_runtime(self, event: dict) -> dict | None:
        """The runtime call on the same thread that made this driver call or resource event, if any."""
        start, end = event.get("start", 0), end_of(event)
        items = self._runtime.get(event.get("tid"), ())
        i = bisect.bisect_right(self._runtime_starts.get(event.get("tid"), ()), start)
        for call in reversed(items[max(0, i - 8):i]):  # the innermost runtime call that began before it
            if call is not event and call.get("start", 0) <= start and end <= end_of(call):
                return call
        return None

    def enclosing(self, event: dict, names: tuple[str, ...]) -> dict | None:
        """The call named with one of these prefixes, on the same thread, whose span holds this event."""
        start, end = event.get("start", 0), end_of(event)
        for call in self.by_tid.get(event.get("tid"), ()):
            if call is event or call.get("domain") in NOT_CALLS:
                continue
            if call.get("start", 0) > start:
                break
            if call.get("name", "").startswith(names) and call.get("start", 0) <= start and end <= end_of(call):
                return call
        return None

    def nearby_stack(self, event: dict) -> list:
        """The stack of the last event on the thread, at or before this one, that has one."""
        starts, items = self._with_stacks(event.get("tid"))
        i = bisect.bisect_right(starts, event.get("start", 0))
        return items[i - 1]["stack"] if i else []

    def exception_for(self, event: dict) -> dict | None:
        """An uncaught exception on the event's thread whose text names the event's status."""
        status = str(event.get("status") or "")
        for exc in self.exceptions:
            if exc.get("tid") == event.get("tid") and status and status in str(exc.get("message", "")):
                return exc
        for exc in self.exceptions:  # CuPy names runtime errors by their status too; the thread is what matters
            if exc.get("tid") == event.get("tid") and exc.get("cuda"):
                return exc
        return None


def locate(hit: Hit, stream: Stream) -> tuple[tuple[Location, ...], str]:
    """The user's stack for a hit, and where it came from (see the module docstring)."""
    if hit.stack:
        return frames(hit.stack), hit.location_from or "fork hook"
    found = frames(hit.event.get("stack"))
    if found:
        return found, "callback"
    exc = stream.exception_for(hit.event)
    if exc is not None and frames(exc.get("stack")):
        return frames(exc.get("stack")), "exception"
    near = frames(stream.nearby_stack(hit.event))
    if near:
        return near, "nearby"
    return (), "none"


def finding(rule, hit: Hit, stream: Stream) -> Finding:
    """The finding a rule's hit becomes: located at the user's frame, with the related calls."""
    stack, source = locate(hit, stream)
    related: list[tuple[str, Location]] = []
    for what, event in hit.related:
        found = frames(event.get("stack"))
        if found and (what, found[0]) not in related:
            related.append((what, found[0]))
    calls = tuple(call_text(e) for e in (hit.calls or (hit.event,)))
    missing = "" if stack else str(hit.event.get("stack_missing") or "no call on this thread carried a Python "
                                   "stack (a thread Python did not start, or one that made no traced call)")
    return Finding(rule=rule.id, severity=rule.severity, message=hit.message, thread=str(hit.event.get("thread", "?")),
                   location=stack[0] if stack else None, location_from=source, stack=stack, calls=calls,
                   claim=rule.claim, related=tuple(related), location_missing=missing,
                   because=because_of(hit, stream))
