"""Predicates about how the program ended: it died by a signal (a segfault, an abort, a SIGKILL), or it hung (it
ran past the audit's time limit, a thread stayed inside one CUDA call while nothing else progressed, or the
program ended itself with ``os._exit`` while a thread had been stuck in a CUDA call for seconds).

They read what the parent saw (``Stream.run``): the flight recorder's slots (the call each thread was inside),
faulthandler's Python stacks of every thread, and the program's own exits (``os._exit``, ``os.kill``).
"""

from __future__ import annotations

from ctxlab.audit.engine import Hit, RunInfo, Stream, place_of
from ctxlab.audit.failures import kernel_of
from ctxlab.audit.state import model

STUCK_S = 2.0  # a call in progress this long when the program ended itself counts as stuck
OTHERS_SHOWN = 4


def _thread_of_ident(run: RunInfo, ident: int) -> tuple[int | None, str]:
    for tid, known in run.idents.items():
        if known == ident:
            return tid, run.threads.get(tid, f"thread {tid}")
    return None, f"thread {ident:#x}"


def _frames_of(run: RunInfo, tid: int | None) -> list:
    """A thread's user frames from the latest faulthandler dump (fatal first)."""
    if tid is None:
        return []
    ident = run.idents.get(tid)
    for dump in [*run.fatal, *run.dumps][::-1]:
        for stack in dump.threads:
            if stack.ident == ident:
                return stack.user_frames()
    return []


def _last_call(s: Stream, tid) -> dict | None:
    items = [e for e in s.by_tid.get(tid, ()) if e.get("domain") in ("driver", "runtime")]
    return items[-1] if items else None


def _others(run: RunInfo, but: int | None) -> str:
    """Where the other threads were, from the latest dump."""
    dumps = [*run.fatal, *run.dumps]
    if not dumps:
        return ""
    parts = []
    for stack in dumps[-1].threads:
        tid, name = _thread_of_ident(run, stack.ident)
        if tid == but or name.startswith("ctxlab-"):  # ctxlab's own stack thread
            continue
        frames = stack.user_frames(1) or [[f[0], f[1], f[2]] for f in stack.frames[:1]]
        if frames:
            parts.append(f"{name} at {frames[0][0]}:{frames[0][1]} in {frames[0][2]}")
    if not parts:
        return ""
    more = f" and {len(parts) - OTHERS_SHOWN} more" if len(parts) > OTHERS_SHOWN else ""
    return f" Other threads: {'; '.join(parts[:OTHERS_SHOWN])}{more}."


def program_crashed(s: Stream) -> list[Hit]:
    """The process died by a signal: where the thread that received it was, and the CUDA call it was inside
    or made last."""
    run = s.run
    if run is None or run.ending.get("how") != "signal":
        return []
    signal = run.ending.get("signal") or "a signal"
    current = next((d.current() for d in run.fatal[::-1] if d.current() is not None), None)
    exit_note = next((x for x in run.exits[::-1] if x.get("call") in ("os.kill", "os.abort", "signal.raise_signal")),
                     None)
    tid, name, frames = None, "?", []
    if current is not None:
        tid, name = _thread_of_ident(run, current.ident)
        frames = current.user_frames()
    elif exit_note is not None:
        tid, name, frames = exit_note.get("tid"), exit_note.get("thread", "?"), exit_note.get("stack") or []
    inside = next((c for c in run.open_calls if c.tid == tid), None) if tid is not None else None
    last = _last_call(s, tid) if tid is not None else None
    if inside is not None:
        what = f"inside {inside.call}" + (f" (in {inside.inner} beneath it)" if inside.inner != inside.call else "")
        what += _open_state(s, inside)
    elif exit_note is not None and exit_note.get("tid") == tid:
        what = f"in {exit_note['call']}({exit_note.get('args', '')}), which the program called itself"
    elif last is not None:
        what = f"after its last CUDA call, {last['name']} ({last.get('status')})"
    else:
        what = "with no CUDA call recorded on it"
    when = (" during the interpreter's exit, after the program had returned" if run.ending.get("program_ended")
            else "")
    sticky = model(s).sticky
    after = ""
    if sticky:
        first = min(sticky.values(), key=lambda e: e.get("start", 0))
        after = f" It came after a sticky error ({first.get('status')} from {first['name']}), reported apart."
    if signal == "SIGKILL" and current is None and exit_note is None:  # (two Ctrl-C end as "interrupted")
        cause = " SIGKILL comes from outside the program (a CI or job time limit, the kernel's out-of-memory killer)."
    else:
        cause = ""
    if inside is not None:  # the call it died inside is the finding's call
        event = {"tid": tid, "thread": name, "stack": inside.stack or frames, "start": inside.since,
                 "name": inside.inner, "context": inside.context, "domain": "driver"}
    elif frames:
        event = {"tid": tid, "thread": name, "stack": frames, "start": 0}
    else:
        event = last or {"tid": tid, "thread": name}
    message = (f"the program died by {signal}{when} on thread {name}, {what}: everything recorded up to then is "
               f"reported.{after}{cause}{_others(run, tid)}")
    return [Hit(event, message, stack=tuple(event.get("stack") or ()), location_from="flight recorder")]


def _open_state(s: Stream, call) -> str:
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



def program_hung(s: Stream) -> list[Hit]:
    """The run was stopped (time limit, no progress) or ended itself while threads were stuck inside CUDA calls:
    each such thread, with the call it was inside, for how long, and what it waits for."""
    run = s.run
    if run is None:
        return []
    how = run.ending.get("how")
    stuck = list(run.open_calls)
    if how not in ("timeout", "stall"):  # it ended (os._exit, SIGKILL) while threads were stuck in calls
        if how == "exit" and not any(x.get("call") == "os._exit" for x in run.exits):
            return []
        if how == "signal" and run.ending.get("signal") != "SIGKILL":
            return []  # a crash: another thread's long call is not what ended it (the crash is reported)
        if how not in ("exit", "signal"):
            return []
        stuck = [c for c in stuck if run.seconds_inside.get(c.tid, 0.0) >= STUCK_S]
        if not stuck:
            return []
    why = {"timeout": f"ran past the audit's time limit ({run.ending.get('detail', '')})",
           "stall": f"made no CUDA progress ({run.ending.get('detail', '')})",
           "exit": "ended itself with os._exit while threads were stuck inside CUDA calls",
           "signal": f"{run.ending.get('detail', 'died by a signal')} while threads were stuck inside CUDA calls"
           }.get(str(how), "ended")
    m = model(s)
    hits = []
    for call in stuck:
        seconds = run.seconds_inside.get(call.tid)
        held = (" It held the GIL when it entered the call (CUDA calls do not release it), so no other Python "
                "thread can run until it returns." if call.held_gil else "")
        waits = _waits_for(s, m, call)
        frames = call.stack or _frames_of(run, call.tid)
        event = {"tid": call.tid, "thread": call.thread, "stack": frames, "start": call.since,
                 "name": call.inner, "context": call.context, "domain": "driver"}
        inner = f" (in {call.inner} beneath it)" if call.inner != call.call else ""
        long = f" for {seconds:.1f} s" if seconds is not None else ""
        hits.append(Hit(event, f"the program {why}: thread {call.thread} was inside {call.call}{inner}{long}"
                               f"{_open_state(s, call)}, entered and never returned.{held}{waits}"
                               f"{_others(run, call.tid)}",
                        stack=tuple(frames), location_from="flight recorder"))
    if not hits and how in ("timeout", "stall"):
        main = next((t for t, n in run.threads.items() if n == "MainThread"), None)
        frames = _frames_of(run, main)
        hits.append(Hit({"tid": main, "thread": "MainThread", "stack": frames, "start": 0},
                        f"the program {why}, and no thread was inside a CUDA call: it waited in Python."
                        f"{_others(run, None)}", stack=tuple(frames), location_from="flight recorder"))
    return hits


def _waits_for(s: Stream, m, call) -> str:
    """What a call stuck in a synchronisation waits for: the work launched before it on its stream or context
    that was never seen to finish, host functions first (they run on a CUDA thread and may wait themselves)."""
    name = call.inner if call.inner.startswith(("cuStreamSynchronize", "cudaStreamSynchronize", "cuCtxSynchronize",
                                                "cudaDeviceSynchronize", "cuEventSynchronize",
                                                "cudaEventSynchronize")) else call.call
    if "Synchronize" not in name and "Memcpy" not in name:
        return ""
    context = call.context
    launches = m.launches.get(context, [])
    synced = m.synced.get(context, [])
    since = synced[-1] if synced else 0
    pending = [e for e in launches if e.get("start", 0) >= since and e.get("start", 0) < call.since]
    hosts = [e for e in s.calls if e.get("name", "").startswith(("cuLaunchHostFunc", "cudaLaunchHostFunc",
                                                                   "cudaStreamAddCallback", "cuStreamAddCallback"))
             and e.get("start", 0) >= since and e.get("start", 0) < call.since and (e.get("context") == context)
             and not (e.get("domain") == "driver" and s.enclosing_runtime(e) is not None)]  # one a launch
    parts = []
    for host in hosts[-2:]:
        frame = (host.get("stack") or [[None, None]])[0]
        where = f" at {frame[0]}:{frame[1]}" if frame[0] else ""
        parts.append(f"a host function launched with {host['name']} on thread {host.get('thread', '?')}{where} "
                     f"(it runs on a CUDA thread; if it waits for this thread, a lock it holds, or the GIL, neither "
                     f"can go on)")
    for launch in pending[-2:]:
        parts.append(kernel_of(s, launch))
    if not parts:
        return ""
    return f" It waits for work launched before it that never finished: {'; '.join(parts)}."
