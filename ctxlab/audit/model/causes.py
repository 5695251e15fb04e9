"""Why a finding holds: the event in the program's history that made it so, read from the state model
(``ctxlab.audit.model.state``), with one sentence saying what that event did, built from observed values.

Each helper returns a ``Cause``: the causing event (``None`` where the record holds none) and either what it did
or why the record holds no cause. The rules hand it to their ``Hit`` (``Cause.hit_fields``); nothing here
guesses beyond the calls recorded: where the record does not explain a state, it says so.

A thread's current context is explained by the change that left it so (``Model.current_change``): the push,
pop or set, or the runtime call that bound it. Two activations of the same code on one thread (asyncio tasks,
generators) interleave when one pushes over the other's push before that one was popped: the second push is
the cause, and the ``await`` in the source between the first push and the failing call is named where the
program's file can be read.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass

from ctxlab.audit.engine import NO_CAUSE, Stream, thread_of
from ctxlab.audit.model.state import CallState, Change, Handle, Model

AWAIT = re.compile(r"(^|[^\w.])(await|async\s+with|async\s+for)\b")


@dataclass(frozen=True)
class Cause:
    """The causing event and what it did, or why there is none."""

    event: dict | None
    what: str = ""
    missing: str = ""

    def hit_fields(self) -> dict:
        """The ``Hit`` keyword arguments for this cause."""
        if self.event is None:
            return {"cause": None, "cause_missing": self.missing or NO_CAUSE}
        return {"cause": self.event, "cause_what": self.what}


def missing(why: str) -> Cause:
    """No recorded event explains it: say why, plainly."""
    return Cause(None, missing=f"{NO_CAUSE}: {why}")


def on(event: dict) -> str:
    """``name on thread T``."""
    return f"{event.get('name', '?')} on thread {thread_of(event)}"


def frame(event: dict | None) -> tuple[str, int, str] | None:
    """An event's innermost user frame (file, line, function), or None."""
    for f in (event or {}).get("stack") or ():
        try:
            return str(f[0]), int(f[1]), str(f[2]) if len(f) > 2 else ""
        except (TypeError, ValueError, IndexError):
            continue
    return None


def awaits_between(file: str, first: int, last: int) -> int | None:
    """The first line strictly between two lines of a program's file that awaits (``await``, ``async with``,
    ``async for``), or None (none there, or the file cannot be read)."""
    for line in range(first + 1, last):
        text = linecache.getline(file, line).split("#", 1)[0]
        if AWAIT.search(text):
            return line
    return None


@dataclass(frozen=True)
class Interleave:
    """Another activation of the same code pushed over this one's push on the same thread."""

    mine: dict  # the push this activation made (the context it meant)
    theirs: dict  # the other activation's push, current at the failing call
    awaited: int  # the line awaiting between this activation's push and the failing call


def interleave(m: Model, e: dict, change: Change | None) -> Interleave | None:
    """Whether the push that left ``e``'s context current came from another activation of the code that made
    the push beneath it and that makes ``e``: the same function pushed at the same line twice, with no pop
    between, and ``e`` is at a later line of that function (a task resumed after its ``await``)."""
    if change is None or change.how != "push" or change.other is None or change.other[1] is None:
        return None
    mine, theirs, here = change.other[1], change.event, frame(e)
    a, b = frame(mine), frame(theirs)
    if a is None or b is None or here is None or a != b or here[0] != a[0] or here[2] != a[2] or here[1] <= a[1]:
        return None
    outer = lambda ev: [tuple(f[:3]) for f in (ev.get("stack") or ())[1:]]  # noqa: E731
    if outer(mine) != outer(e):
        return None
    awaited = awaits_between(a[0], a[1], here[1])  # without an await between, one activation may push twice
    return Interleave(mine, theirs, awaited) if awaited is not None else None


def interleave_text(il: Interleave) -> str:
    """What the other activation's push did, in one sentence."""
    f = frame(il.mine)
    function = f[2] if f else "?"
    awaited = f" while this one waited at line {il.awaited} (await), before it popped"
    return (f"{il.theirs.get('name', '?')} by another activation of {function} (an asyncio task or generator "
            f"sharing thread {thread_of(il.theirs)}) pushed context {(il.theirs.get('args') or {}).get('ctx', 0):#x} "
            f"over this activation's push of context {(il.mine.get('args') or {}).get('ctx', 0):#x} at line "
            f"{f[1] if f else '?'}{awaited}")


def current_context(m: Model, e: dict, what: str = "") -> Cause:
    """What left ``e``'s thread with its current context (or with none) at ``e``."""
    change = m.current_change(e.get("tid"), e.get("start", 0))
    ctx = e.get("context") or 0
    if change is None:
        if not ctx:
            return missing(f"no call on thread {thread_of(e)} made a context current before it")
        return missing(f"context {ctx:#x} was made current on thread {thread_of(e)} by no call recorded "
                       f"(before tracing began, or by a runtime inside a call CUPTI showed no change for)")
    if change.context != ctx and ctx:
        return missing(f"the thread's recorded context changes leave {change.context:#x} current, not {ctx:#x}")
    il = interleave(m, e, change)
    if il is not None:
        return Cause(il.theirs, interleave_text(il) + (f"; {what}" if what else ""))
    if change.how == "pop":
        covered = change.other[0] if change.other else 0
        left = f"left context {ctx:#x} current" if ctx else "left no context current"
        text = f"{on(change.event)} popped context {covered:#x} and {left}"
    elif change.how == "destroy":
        text = f"{on(change.event)} destroyed the current context and left {ctx:#x} current" if ctx else (
            f"{on(change.event)} destroyed the thread's current context and left no context current")
    else:
        verb = {"push": "pushed", "create": "created and pushed", "set": "made current"}[change.how]
        under = (f" over context {change.other[0]:#x}" if change.how == "push" and change.other else "")
        text = f"{on(change.event)} {verb} context {ctx:#x}{under}" if ctx else f"{on(change.event)} set no context"
    return Cause(change.event, text + (f"; {what}" if what else ""))


def handle_gone(known: Handle, role: str, value: int) -> Cause:
    """The destroy or unload that ended a handle's life."""
    gone = known.gone or {}
    if known.kind == "function" and gone.get("name", "").startswith("cuModuleUnload"):
        return Cause(gone, f"{on(gone)} unloaded module {known.parent:#x}, which function {value:#x} came from")
    return Cause(gone, f"{on(gone)} destroyed {known.kind} {value:#x} (this call's {role})")


def of_state(m: Model, s: Stream, state: CallState) -> Cause:
    """The cause of what a failing call met (``CallState``), the most specific first: a handle destroyed or a
    function whose module was unloaded, memory freed, its context destroyed, a sticky error, a capture in
    progress, a handle or memory of another context, no context current."""
    e, at = state.event, state.event.get("start", 0)
    for role, value, known in state.handles:
        if known is not None and known.gone is not None and known.gone.get("start", 0) < at:
            return handle_gone(known, role, value)
    for role, address, block in state.blocks:
        if block is not None and block.freed is not None and block.freed.get("start", 0) < at:
            return Cause(block.freed, f"{on(block.freed)} freed the {block.size}-byte allocation at {block.base:#x} "
                                      f"that this call's {role} {address:#x} points into")
    if state.context_gone is not None:
        return Cause(state.context_gone, f"{on(state.context_gone)} destroyed context {state.context:#x}, still "
                                         f"current on thread {thread_of(e)}")
    if state.sticky is not None and state.sticky is not e:
        return Cause(state.sticky, f"{on(state.sticky)} returned {state.sticky.get('status')}, a sticky error of "
                                   f"context {state.context:#x}")
    for capture in state.captures:
        if capture.begin is not e:
            return Cause(capture.begin, f"{on(capture.begin)} began capturing stream {capture.stream:#x}")
    for role, value, known in state.handles:
        if known is not None and known.context and state.context and known.context != state.context:
            return current_context(m, e, f"its {role} {value:#x} was made in context {known.context:#x} by "
                                         f"{on(known.made)}") if _changed_after(m, e, known.made) else Cause(
                known.made, f"{on(known.made)} made {known.kind} {value:#x} in context {known.context:#x}, not "
                            f"the one current at this call ({state.context:#x})")
    for role, address, block in state.blocks:
        if block is not None and block.context and state.context and block.context != state.context:
            return Cause(block.made, f"{on(block.made)} allocated the memory at {address:#x} ({role}) in context "
                                     f"{block.context:#x}")
    if state.context_kind == "none" and e.get("domain") == "driver":
        return current_context(m, e)
    return missing("no recorded call before it explains this status")


def _changed_after(m: Model, e: dict, made: dict) -> bool:
    """Whether the thread's current context changed after a handle was made (the change is then the cause)."""
    change = m.current_change(e.get("tid"), e.get("start", 0))
    return change is not None and change.at > made.get("start", 0)
