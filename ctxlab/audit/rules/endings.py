"""Predicates about how the program ended: it died by a signal (a segfault, an abort, a SIGKILL), or it hung.

A hang is decided from evidence, however the run ended: a thread was still inside a CUDA call when the program
ended without returning (the audit's --timeout or --stall, the program's own ``os._exit``, an exit from C such
as ``faulthandler.dump_traceback_later(..., exit=True)``, a signal: SIGALRM's default action, SIGTERM, SIGKILL,
an abort from a watchdog), and it had been inside that call for ``STUCK_S`` seconds, or for ``NO_PROGRESS_S``
while another thread was inside a call too and no call returned elsewhere. A program that returned normally did
not hang, whatever its daemon threads were inside.

A crash is placed on the thread that received the signal, whichever it is: faulthandler's current thread,
the program's own ``os.abort``/``os.kill`` (noted with its thread), or, where faulthandler saw no Python thread
receive it, the thread without Python that made CUDA calls. A thread the program did not start (a library's
watchdog, CUDA's host-function thread) is named as the OS names it, with its last CUDA calls and the user's
line that started the work it was doing (the host function's launch, the last call with a Python stack).

They read what the parent saw (``Stream.run``): the flight recorder's slots (the call each thread was inside),
faulthandler's Python stacks of every thread, the OS names of the threads, and the program's own exits. The crash
rule's predicate is here with what both rules share; the hang rule's, with what a blocked call waits for, is
``hangs.py``'s.
"""

from __future__ import annotations

from ctxlab.audit.engine import Hit, RunInfo, Stream, end_of, place_of
from ctxlab.audit.events import (
    CONTEXT_SYNC_PREFIXES,
    HOST_CALLBACK_PREFIXES,
    STREAM_SYNC_PREFIXES,
)
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.rule import NO_CLAIM, Rule

STUCK_S = 2.0  # a call in progress this long when the program ended without returning counts as stuck
NO_PROGRESS_S = 1.0  # ... or this long while no call returned on any other thread since it began
OTHERS_SHOWN = 4
LAST_CALLS = 3
# Signals that a fault or an abort raises: a crash. Any other (SIGALRM, SIGTERM, SIGKILL, SIGINT) only ends it.
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGSYS", "SIGTRAP"})
SELF_ENDS = ("os._exit", "os.kill", "os.abort", "signal.raise_signal")


def _thread_of_ident(run: RunInfo, ident: int) -> tuple[int | None, str]:
    for tid, known in run.idents.items():
        if known == ident:
            return tid, run.threads.get(tid, f"thread {tid}")
    return None, f"thread {ident:#x}"


def _calls_of(s: Stream, tid) -> list[dict]:
    return [e for e in s.by_tid.get(tid, ()) if e.get("domain") in ("driver", "runtime")]


def other_threads(run: RunInfo, but: int | None) -> str:
    """Where the other threads were, from the latest dump."""
    dumps = [*run.fatal, *run.dumps]
    if not dumps:
        return ""
    parts = []
    for stack in dumps[-1].threads:
        tid, name = _thread_of_ident(run, stack.ident)
        if tid is None and stack.tid is not None:  # a thread Python did not start, tied to its OS thread
            tid, name = stack.tid, thread_named(run, stack.tid, f"thread {stack.tid}")
        if tid == but or name.startswith("ctxlab-"):  # ctxlab's own stack thread
            continue
        frames = stack.user_frames(1) or [[f[0], f[1], f[2]] for f in stack.frames[:1]]
        if frames:
            parts.append(f"{name} at {frames[0][0]}:{frames[0][1]} in {frames[0][2]}")
    if not parts:
        return ""
    more = f" and {len(parts) - OTHERS_SHOWN} more" if len(parts) > OTHERS_SHOWN else ""
    return f" Other threads: {'; '.join(parts[:OTHERS_SHOWN])}{more}."


def self_end_note(run: RunInfo, calls: tuple[str, ...] = SELF_ENDS) -> dict | None:
    """The program's own last way out (os._exit, os.kill, os.abort, signal.raise_signal), as noted."""
    return next((x for x in run.exits[::-1] if x.get("call") in calls), None)


def thread_named(run: RunInfo, tid, fallback: str = "?") -> str:
    """A thread by the name the recording gives it (Python's, else the OS's), else ``fallback``."""
    known = run.threads.get(tid) if tid is not None else None
    if known:
        return known
    return fallback if fallback and not fallback.startswith("Dummy-") else f"thread {tid}"


def ended_without_returning(run: RunInfo) -> bool:
    """The program did not return by itself: stopped (time limit, no progress, two Ctrl-C), ended with
    ``os._exit`` or by an exit from C (no result was written), or by a signal before it returned."""
    how = run.ending.get("how")
    if how in ("timeout", "stall", "interrupted"):
        return True
    if how == "signal":
        return not run.ending.get("program_ended")  # a crash in the interpreter's exit is no hang
    if how == "exit":
        return self_end_note(run, ("os._exit",)) is not None or run.ending.get("program_ended") is False
    return False


def _progressed(s: Stream, call) -> bool:
    """Whether any call on another thread returned after this call began."""
    return any(end_of(e) > call.since and e.get("tid") != call.tid and e.get("status") is not None
               for e in s.calls)


def stuck_calls(s: Stream, run: RunInfo) -> list:
    """The calls open at the end that were stuck, by evidence: inside for ``STUCK_S``, or for ``NO_PROGRESS_S``
    while another thread was inside a call too and no call returned on any other thread since (threads blocked on
    each other). A call whose time inside is not known is not judged stuck."""
    out = []
    for call in run.open_calls:
        seconds = run.seconds_inside.get(call.tid)
        if seconds is None:
            continue
        blocked = any(c.tid != call.tid for c in run.open_calls) and not _progressed(s, call)
        if seconds >= STUCK_S or (seconds >= NO_PROGRESS_S and blocked):
            out.append(call)
    return out


def crash_site(s: Stream, run: RunInfo) -> tuple[int | None, str, list, str]:
    """The thread that received the fatal signal: (OS id, name, its user frames, how it is known)."""
    current = next((d.current() for d in run.fatal[::-1] if d.current() is not None), None)
    note = self_end_note(run, ("os.kill", "os.abort", "signal.raise_signal"))
    if current is not None:
        tid, name = _thread_of_ident(run, current.ident)
        frames = current.user_frames()
        how = ""
        if tid is None and note is not None and note.get("tid") not in run.idents:
            tid, how = note.get("tid"), ""  # a thread Python did not start, which called os.abort/os.kill itself
        elif tid is None and current.tid is not None:
            tid, how = current.tid, " (its stack holds the thread id faulthandler gave)"
        elif tid is None:
            tid = _by_frames(s, run, frames)
            how = " (the thread whose CUDA calls came from the same code)" if tid is not None else ""
        if tid is None and run.idents:  # Python's threads are known, and this is none of them
            how = " (its thread id is none of the threads Python started)"
        if tid is not None:
            fallback = note.get("thread", "?") if note is not None and note.get("tid") == tid else "?"
            name = thread_named(run, tid, fallback)
        return tid, name, frames, how
    if note is not None:
        tid = note.get("tid")
        return tid, thread_named(run, tid, str(note.get("thread", "?"))), list(note.get("stack") or []), ""
    if run.fatal:  # faulthandler ran and no Python thread received the signal: a thread without Python did
        tid, how = _without_python(s, run)
        if tid is not None:
            return tid, thread_named(run, tid, f"thread {tid}"), [], how
    return None, "?", [], ""


def _by_frames(s: Stream, run: RunInfo, frames: list) -> int | None:
    """The one thread Python did not name whose recorded calls came from the function this stack entered by (its
    outermost user frame: a library's thread calling back into Python starts there; ``<module>`` is no clue)."""
    if not frames or frames[-1][2] == "<module>":
        return None
    entry = (frames[-1][0], frames[-1][2])
    found = {tid for tid, items in s.by_tid.items() if tid not in run.idents
             and any(e.get("stack") and (e["stack"][-1][0], e["stack"][-1][2]) == entry for e in items)}
    return found.pop() if len(found) == 1 else None


def _without_python(s: Stream, run: RunInfo) -> tuple[int | None, str]:
    """The thread without Python that made CUDA calls (the one whose last call came last, where several)."""
    python = {t.ident for d in run.fatal for t in d.threads}
    ended = {e.get("tid") for e in s.observed if e.get("name") == "THREAD_ENDED"}
    last: dict = {}
    for e in s.calls:
        tid = e.get("tid")
        if tid not in ended and (tid not in run.idents or run.idents[tid] not in python):
            last[tid] = max(last.get(tid, 0), end_of(e))
    for call in run.open_calls:
        if call.tid not in ended and (call.tid not in run.idents or run.idents[call.tid] not in python):
            last[call.tid] = max(last.get(call.tid, 0), call.since)
    if not last:
        return None, ""
    tid = max(last, key=lambda t: last[t])
    if len(last) == 1:
        return tid, " (no Python thread received it; this is the only thread without Python that made CUDA calls)"
    return tid, (f" (no Python thread received it; of the {len(last)} threads without Python that made CUDA calls, "
                 f"this one made the last)")


def _running_host_function(s: Stream, tid, before: int) -> dict | None:
    """The first host function queued (cuLaunchHostFunc, ...) that no later synchronisation saw finish: the one
    CUDA's host-function thread was running, where a thread that makes no CUDA calls of its own crashed."""
    if _calls_of(s, tid):
        return None
    hosts = [e for e in s.calls if e.get("name", "").startswith(HOST_CALLBACK_PREFIXES) and e.get("start", 0) <= before
             and not (e.get("domain") == "driver" and s.enclosing_runtime(e) is not None)]
    for host in hosts:
        stream = (host.get("args") or {}).get("stream")
        done = any(e.get("start", 0) > host.get("start", 0) and e.get("status") in ("CUDA_SUCCESS", "cudaSuccess")
                   and e.get("context") == host.get("context") and sync_covers(e, stream) for e in s.calls)
        if not done:
            return host
    return None


def sync_covers(sync: dict, stream) -> bool:
    """Whether a synchronisation waits for the work of this stream: a device sync, or a sync of that stream."""
    name = sync.get("name", "")
    return name.startswith(CONTEXT_SYNC_PREFIXES) or (name.startswith(STREAM_SYNC_PREFIXES)
                                             and (sync.get("args") or {}).get("stream") == stream)


def _work_origin(s: Stream, run: RunInfo, tid, calls: list[dict]) -> tuple[dict | None, str]:
    """For a thread the program did not start: the call with a Python stack that started its work, and a clause
    that says which it is (its own calls' stack, the Python thread that asked for them, or the last call with a
    stack on another thread before its first)."""
    with_stack = [e for e in calls if e.get("stack")]
    if with_stack:
        last = with_stack[-1]
        asked = f", asked for by thread {last['asked_by']}" if last.get("asked_by") else ""
        return last, f"its last call with a Python stack was {last['name']}{asked}{place_of(last)}"
    first = calls[0].get("start", 0) if calls else 1 << 62
    before = [e for e in s.calls if e.get("tid") != tid and e.get("stack") and e.get("start", 0) < first]
    if before:
        e = before[-1]
        return e, (f"the last call with a Python stack before its first was {e['name']} on thread "
                   f"{thread_named(run, e.get('tid'), str(e.get('thread', '?')))}{place_of(e)}")
    return None, ""


def program_crashed(s: Stream) -> list[Hit]:
    """The process died by a signal: where the thread that received it was (any thread: a library's or CUDA's
    own, by its OS name), the CUDA call it was inside or made last, and the user's line of its work."""
    run = s.run
    if run is None or run.ending.get("how") != "signal":
        return []
    signal = run.ending.get("signal") or "a signal"
    if (signal not in CRASH_SIGNALS and self_end_note(run, ("os.kill", "signal.raise_signal")) is None
            and ended_without_returning(run) and stuck_calls(s, run)):
        return []  # it only ended the program while threads were stuck: the hang is the report (program-hung)
    tid, name, frames, known = crash_site(s, run)
    inside = next((c for c in run.open_calls if c.tid == tid), None) if tid is not None else None
    calls = _calls_of(s, tid) if tid is not None else []
    last = calls[-1] if calls else None
    note = self_end_note(run, ("os.kill", "os.abort", "signal.raise_signal"))
    # Python names every thread it starts (its ident); a stack whose id is none of them is a library's thread
    foreign = tid not in run.idents if tid is not None else bool(known)
    related: list[tuple[str, dict]] = []
    if inside is not None:
        what = f"inside {inside.call}" + (f" (in {inside.inner} beneath it)" if inside.inner != inside.call else "")
        what += open_state_text(s, inside)
    elif note is not None and note.get("tid") == tid:
        what = f"in {note['call']}({note.get('args', '')}), which the program called itself"
    elif last is not None:
        what = f"after its last CUDA call, {last['name']} ({last.get('status')})"
    else:
        what = "with no CUDA call recorded on it"
    origin = None
    if foreign:
        what = f"a thread the program did not start{known}, {what}"
        earlier = [f"{e['name']} ({e.get('status')})" for e in calls[-LAST_CALLS - 1:-1]]
        if earlier:
            what += f", and before it {', '.join(earlier)}"
        host = _running_host_function(s, tid, 1 << 62)
        if host is not None:
            origin = host
            what += (f"; it was running the host function queued by {host['name']} on thread "
                     f"{thread_named(run, host.get('tid'), str(host.get('thread', '?')))}{place_of(host)}, the first "
                     f"queued that no synchronisation saw finish")
            related.append(("host function queued at", host))
        elif tid is not None:
            origin, how = _work_origin(s, run, tid, calls)
            if origin is not None:
                what += f"; {how}"
                related.append(("its work started at", origin))
    when = (" during the interpreter's exit, after the program had returned" if run.ending.get("program_ended")
            else "")
    sticky = model(s).sticky
    after = ""
    if sticky:
        first = min(sticky.values(), key=lambda e: e.get("start", 0))
        after = f" It came after a sticky error ({first.get('status')} from {first['name']}), reported apart."
    cause = ""
    if signal == "SIGKILL" and not frames and note is None:  # (two Ctrl-C end as "interrupted")
        cause = " SIGKILL comes from outside the program (a CI or job time limit, the kernel's out-of-memory killer)."
    if inside is not None:  # the call it died inside is the finding's call
        event = {"tid": tid, "thread": name, "stack": inside.stack or frames, "start": inside.since,
                 "name": inside.inner, "context": inside.context, "domain": "driver"}
    elif frames:
        event = {"tid": tid, "thread": name, "stack": frames, "start": 0}
    elif origin is not None:  # no Python frame on it: the user's line that started its work
        event = {"tid": tid, "thread": name, "stack": origin.get("stack") or s.nearby_stack(origin), "start": 0}
    else:
        event = {**last, "thread": name} if last is not None else {"tid": tid, "thread": name}
    message = (f"the program died by {signal}{when} on thread {name}, {what}: everything recorded up to then is "
               f"reported.{after}{cause}{other_threads(run, tid)}")
    host = origin if related and related[0][0] == "host function queued at" else None
    return [Hit(event, message, stack=tuple(event.get("stack") or ()), location_from="flight recorder",
                related=tuple(related), cause=host,
                cause_what=f"{host['name']} queued the host function that was running" if host else "")]


PROGRAM_CRASHED_RULE = Rule(
    "program-crashed", "error", "The program died by a signal",
    "A segfault, an abort or a SIGKILL ends the process without a Python traceback. The audit runs the "
    "program in a child whose CUDA calls go to shared memory as they happen, so everything up to the crash is "
    "reported, with where the crashing thread was (faulthandler's stacks) and the CUDA call it was inside.",
    NO_CLAIM, program_crashed,
    "A SIGKILL leaves no Python stack: the thread's last recorded call is named instead.")


def open_state_text(s: Stream, call) -> str:
    """What the model knows of the call a thread died or hung inside: its context destroyed, the handle it
    passed destroyed or of another context."""
    m = model(s)
    parts = []
    gone = m.facts.destroyed.get(call.context) if call.context else None
    if gone is not None and gone.get("start", 0) < call.since:
        parts.append(f"its context {call.context:#x} had been destroyed by {gone.get('name')} on thread "
                     f"{gone.get('thread', '?')}{place_of(gone)}")
    if call.inner_arg:
        for kind in ("stream", "event", "module"):
            known = m.handle(kind, call.inner_arg, call.since)
            if known is None:
                continue
            if known.gone is not None and known.gone.get("start", 0) < call.since:
                parts.append(f"its {kind} {call.inner_arg:#x} (made by {known.made['name']}{place_of(known.made)}) had "
                             f"been destroyed by {known.gone['name']} on thread {known.gone.get('thread', '?')}"
                             f"{place_of(known.gone)}: a destroyed handle was used")
            elif known.context and call.context and known.context != call.context:
                parts.append(f"its {kind} {call.inner_arg:#x} belongs to context {known.context:#x}, not the current "
                             f"{call.context:#x}")
            break
    return f" ({'; '.join(parts)})" if parts else ""
