"""The hang rule's predicate: a program that ended (by its own watchdog, a signal, a kill, or the audit's
--timeout or --stall) while threads were inside CUDA calls that had not returned, with what each waits for: its
stream's or context's queued host functions, GPU waits and kernels, an implicit device synchronisation, the
legacy default stream. Messages are built from the values observed."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, RunInfo, Stream, end_of, place_of
from ctxlab.audit.events import (
    CONTEXT_SYNC_PREFIXES,
    EVENT_SYNC_PREFIXES,
    GPU_WAIT_PREFIXES,
    HOST_CALLBACK_PREFIXES,
    STREAM_QUERY_PREFIXES,
    STREAM_SYNC_PREFIXES,
)
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules.endings import (
    CRASH_SIGNALS,
    crash_site,
    ended_without_returning,
    open_state_text,
    other_threads,
    self_end_note,
    stuck_calls,
    sync_covers,
    thread_named,
)
from ctxlab.audit.rules.failures import kernel_of
from ctxlab.audit.rules.rule import NO_CLAIM, Rule

# Calls that synchronise the device before they do their work (the runtime's and driver's documented implicit
# synchronisation: freeing memory or a host registration, unloading a module, destroying or resetting)
IMPLICIT_SYNCS = ("cuMemFree", "cudaFree", "cuMemHostUnregister", "cudaHostUnregister", "cuModuleUnload",
                  "cuCtxDestroy", "cudaDeviceReset", "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxRelease")


# Synchronous copies and sets: on the legacy default stream, which first waits for every blocking stream
LEGACY = ("cuMemcpy", "cudaMemcpy", "cuMemset", "cudaMemset")


LEGACY_HANDLE = 0x1  # CU_STREAM_LEGACY / cudaStreamLegacy


SYNCED = (*STREAM_SYNC_PREFIXES, *EVENT_SYNC_PREFIXES, *CONTEXT_SYNC_PREFIXES)


STREAM_WAITED = (*STREAM_SYNC_PREFIXES, *STREAM_QUERY_PREFIXES)  # a host call that waits on (or polls) a stream


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


def _why(run: RunInfo) -> str:
    """How the program ended, as the hang report's opening says it."""
    how, detail = run.ending.get("how"), run.ending.get("detail", "")
    stuck = "while threads were stuck inside CUDA calls"
    if how == "timeout":
        return f"ran past the audit's time limit ({detail})"
    if how == "stall":
        return f"made no CUDA progress ({detail})"
    note = self_end_note(run)
    by = ""
    if note is not None:
        frame = (note.get("stack") or [[None, None]])[0]
        where = f" at {frame[0]}:{frame[1]}" if frame[0] else ""
        thread = thread_named(run, note.get("tid"), str(note.get("thread", "?")))
        by = f" ({note['call']}({note.get('args', '')}) on thread {thread}{where})"
    if how == "exit":
        if note is not None and note.get("call") == "os._exit":
            return f"ended itself with os._exit {stuck}{by}"
        return (f"ended itself without returning {stuck} (no os._exit was seen: an exit from C, as "
                f"faulthandler.dump_traceback_later(..., exit=True) makes with _exit)")
    if how == "interrupted":
        return f"was interrupted twice (Ctrl-C) and killed {stuck}"
    signal = run.ending.get("signal") or "a signal"
    if note is not None and note.get("call") in ("os.kill", "signal.raise_signal", "os.abort"):
        source = f"sent by the program itself{by}"
    elif signal == "SIGALRM":
        source = "its default action: a signal.alarm or setitimer timer with no handler ended the process"
    elif signal in CRASH_SIGNALS:
        source = "a crash, reported apart"
    else:
        source = "from outside the program (a CI or job time limit, a supervisor) or a timer of its own"
    return f"was ended by {signal} ({source}) {stuck}"


def program_hung(s: Stream) -> list[Hit]:
    """The run was stopped (time limit, no progress), or ended without returning while threads were stuck inside
    CUDA calls: each such thread, with the call it was inside, for how long, and what it waits for."""
    run = s.run
    if run is None:
        return []
    how = run.ending.get("how")
    if how in ("timeout", "stall"):
        stuck = list(run.open_calls)
    else:
        if not ended_without_returning(run):
            return []
        stuck = stuck_calls(s, run)
        if how == "signal" and run.ending.get("signal") in CRASH_SIGNALS:
            crashed = crash_site(s, run)[0]
            stuck = [c for c in stuck if c.tid != crashed]  # the call it crashed inside is the crash's finding
        if not stuck:
            return []
    why = _why(run)
    m = model(s)
    hits = []
    for call in stuck:
        seconds = run.seconds_inside.get(call.tid)
        held = (" It held the GIL when it entered the call (CUDA calls do not release it), so no other Python "
                "thread can run until it returns." if call.held_gil else "")
        waits, pending = _waits_for(s, m, call)
        frames = call.stack or _frames_of(run, call.tid)
        event = {"tid": call.tid, "thread": call.thread, "stack": frames, "start": call.since,
                 "name": call.inner, "context": call.context, "domain": "driver"}
        inner = f" (in {call.inner} beneath it)" if call.inner != call.call else ""
        long = f" for {seconds:.1f} s" if seconds is not None else ""
        cause = pending[0] if pending else None  # host functions first, then the GPU's waits, then kernels
        hits.append(Hit(event, f"the program {why}: thread {call.thread} was inside {call.call}{inner}{long}"
                               f"{open_state_text(s, call)}, entered and never returned.{held}{waits}"
                               f"{other_threads(run, call.tid)}",
                        stack=tuple(frames), location_from="flight recorder",
                        related=tuple(("it waits for", e) for e in pending if e.get("stack"))[:3],
                        cause=cause, cause_what=(f"{cause['name']} on thread {cause.get('thread', '?')} queued work "
                                                 f"this call waits for, which never finished" if cause else ""),
                        cause_missing="" if cause else ("no unfinished work it waits for was recorded before it on "
                                                        "its stream or context")))
    if not hits and how in ("timeout", "stall"):
        main = next((t for t, n in run.threads.items() if n == "MainThread"), None)
        frames = _frames_of(run, main)
        hits.append(Hit({"tid": main, "thread": "MainThread", "stack": frames, "start": 0},
                        f"the program {why}, and no thread was inside a CUDA call: it waited in Python."
                        f"{other_threads(run, None)}", stack=tuple(frames), location_from="flight recorder"))
    return hits


PROGRAM_HUNG_RULE = Rule(
    "program-hung", "error", "The program hung inside a CUDA call",
    "A thread stayed inside one CUDA call: past the audit's --timeout, with no CUDA progress for --stall "
    "seconds, or until the program ended itself (its watchdog's os._exit, faulthandler's exit, a signal's "
    "default action, a kill). The finding names the call each stuck thread "
    "was inside and for how long, whether it held the GIL, its Python stack, and the work it waits for (host "
    "functions and kernels launched before it).",
    NO_CLAIM, program_hung,
    "A thread that waits in Python (a lock, a queue) is named with the others' positions, not as a finding "
    "of its own; whether a host function is still running is inferred from its launch and the stuck "
    "synchronisation.")


def _scope(s: Stream, call) -> tuple[str, int | None, str]:
    """What a blocked call waits for: ("stream", the stream, why), ("device", None, why) or ("", None, "")."""
    inner, outer = call.inner, call.call
    if inner.startswith(STREAM_WAITED) and call.inner_arg:
        return "stream", call.inner_arg, f"{inner} returns when the work queued on stream {call.inner_arg:#x} is done"
    if inner.startswith(EVENT_SYNC_PREFIXES) and call.inner_arg:
        record = next((e for e in reversed(s.calls) if e.get("name", "").startswith(("cuEventRecord", "cudaEventRec"))
                       and (e.get("args") or {}).get("event") == call.inner_arg and e.get("start", 0) < call.since),
                      None)
        if record is not None and (record.get("args") or {}).get("stream"):
            stream = record["args"]["stream"]
            return "stream", stream, (f"{inner} returns when the work queued on stream {stream:#x} before event "
                                      f"{call.inner_arg:#x} was recorded{place_of(record)} is done")
    for name in (outer, inner):
        if name.startswith(CONTEXT_SYNC_PREFIXES):
            return "device", None, f"{name} returns when all work queued in its context is done"
        if name.startswith(IMPLICIT_SYNCS) and "Async" not in name:
            return "device", None, (f"{name} synchronises the device implicitly before it frees or tears down: it "
                                    f"returns when all work queued in its context is done")
    for name in (outer, inner):
        if name.startswith(LEGACY) and "Async" not in name and "_ptds" not in name:
            return "device", None, (f"{name} is synchronous and runs on the legacy default stream, which first waits "
                                    f"for the work queued on every blocking stream of its context")
    if "Synchronize" in outer or "Memcpy" in outer or outer.startswith(("cuLaunch", "cudaLaunch")):
        return "device", None, ""
    return "", None, ""


def _waits_for(s: Stream, m, call) -> tuple[str, list[dict]]:
    """What a call stuck in a synchronisation waits for: the work queued before it on its stream or context that
    was never seen to finish (host functions first: they run on a CUDA thread and may wait themselves; then
    waits the GPU does on memory or events; then kernels), and why it waits for that."""
    kind, stream, why = _scope(s, call)
    if not kind:
        return "", []
    context = call.context
    syncs = [end_of(e) for e in s.calls if e.get("context") == context and e.get("status") in ("CUDA_SUCCESS",
             "cudaSuccess") and e.get("name", "").startswith(SYNCED) and end_of(e) <= call.since
             and sync_covers(e, stream)]
    since = max(syncs, default=0)

    def on_stream(e: dict) -> bool:
        """On the stream it waits for, or on the legacy default stream (0, or cudaStreamLegacy), which work on
        an ordinary (blocking) stream waits for."""
        return stream is None or (e.get("args") or {}).get("stream") in (stream, 0, LEGACY_HANDLE)

    def queued(e: dict, unkept: bool = False) -> bool:
        """Queued before the call since the last sync that covers it (``unkept``: a call whose stream the record
        does not keep counts as on any stream)."""
        here = on_stream(e) or (unkept and "stream" not in (e.get("args") or {}))
        return (since <= e.get("start", 0) < call.since and e.get("context") == context and here
                and not (e.get("domain") == "driver" and s.enclosing_runtime(e) is not None))

    hosts = [e for e in s.calls if e.get("name", "").startswith(HOST_CALLBACK_PREFIXES) and queued(e)]
    waits = [e for e in s.calls if e.get("name", "").startswith(GPU_WAIT_PREFIXES) and queued(e, unkept=True)]
    launches = [e for e in m.launches.get(context, []) if since <= e.get("start", 0) < call.since and on_stream(e)]
    parts = []
    for host in hosts[-2:]:
        legacy = (" on the legacy default stream" if stream is not None
                  and (host.get("args") or {}).get("stream") in (0, LEGACY_HANDLE) else "")
        parts.append(f"a host function launched with {host['name']}{legacy} on thread {host.get('thread', '?')}"
                     f"{place_of(host)} (it runs on a CUDA thread; if it waits for this thread, a lock it holds, or "
                     f"the GIL, neither can go on)")
    for wait in waits[-2:]:
        target = "memory to hold a value" if "Value" in wait["name"] or "Batch" in wait["name"] else "an event"
        parts.append(f"{wait['name']} on thread {wait.get('thread', '?')}{place_of(wait)} (the stream waits on the GPU "
                     f"for {target} that something else must set)")
    for launch in launches[-2:]:
        parts.append(kernel_of(s, launch))
    pending = [*hosts[-2:], *waits[-2:], *launches[-2:]]
    said = f" {why}." if why else ""
    if not parts:
        return said, []
    return f" It waits for work launched before it that never finished: {'; '.join(parts)}.{said}", pending
