"""A trace as Chrome/Perfetto trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

Process 1 holds a track per host thread: each API call a complete slice (``ph: X``)
with its status and context, driver calls nested inside the runtime call that
made them, resource events (context, stream, module created or destroyed) as
instants. Each context is a process of its own with a track per host thread that
had it current: a slice for each stretch of time it was current there.
"""

from __future__ import annotations

from typing import Any

from ctxlab.tracing.calls import current_spans

HOST_PID = 1
CONTEXT_PID0 = 100


def _us(ns: int, t0: int) -> float:
    return round((ns - t0) / 1000.0, 3)


def context_ids(events: list[dict]) -> dict[int, list[int]]:
    """The CUPTI context ids seen for each context handle (0, seen while a context is being made, left out)."""
    out: dict[int, list[int]] = {}
    for e in events:
        handle, uid = e.get("context"), e.get("context_uid")
        if handle and uid and uid not in out.setdefault(handle, []):
            out[handle].append(uid)
    return out


def to_perfetto(events: list[dict], program: str = "") -> dict:
    """Trace-event JSON (as a dict) from the tracer's events (those with start and end times)."""
    timed = [e for e in events if "start" in e and "site" not in e]
    ids = context_ids(timed)
    t0 = min((e["start"] for e in timed), default=0)
    out: list[dict] = [{"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": 0,
                        "args": {"name": f"host threads: {program}" if program else "host threads"}},
                       {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": 0, "args": {"sort_index": 0}}]
    tids: dict[str, int] = {}
    for e in sorted(timed, key=lambda e: e["start"]):
        thread = e.get("thread", "?")
        if thread not in tids:
            tids[thread] = int(e.get("tid") or 0) or (len(tids) + 1)
            out.append({"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tids[thread],
                        "args": {"name": thread}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": HOST_PID, "tid": tids[thread],
                        "args": {"sort_index": len(tids)}})
    for e in timed:
        tid = tids[e.get("thread", "?")]
        args: dict[str, Any] = {}
        if e.get("context"):
            args["context"] = f"{e['context']:#x}"
        if e.get("context"):
            uid = e.get("context_uid") or next(iter(ids.get(e["context"]) or []), None)
            if uid:
                args["context_id"] = uid
        if e["domain"] in ("resource", "audit"):  # instants: a resource event, what the audit noted
            out.append({"ph": "i", "s": "t", "name": e["name"], "cat": e["domain"], "pid": HOST_PID, "tid": tid,
                        "ts": _us(e["start"], t0), "args": args})
            continue
        args["status"] = e.get("status")
        args["correlation"] = e.get("correlation")
        if e.get("inferred"):
            args["context_from"] = "the thread's last context call"
        out.append({"ph": "X", "name": e["name"], "cat": e["domain"], "pid": HOST_PID, "tid": tid,
                    "ts": _us(e["start"], t0),
                    "dur": max(_us(e.get("end", e["start"]), t0) - _us(e["start"], t0), 0.001),
                    "args": args})
    contexts: dict[int, int] = {}
    ctx_tids: dict[tuple[int, str], int] = {}
    for span in current_spans(timed):
        handle = span["context"]
        if handle not in contexts:
            contexts[handle] = CONTEXT_PID0 + len(contexts)
            pid = contexts[handle]
            known = ids.get(handle, [])  # a handle made again after a destroy gets a new id
            name = f"context {', '.join(map(str, known))} ({handle:#x})" if known else f"context {handle:#x}"
            out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                        "args": {"sort_index": len(contexts)}})
        pid = contexts[handle]
        key = (handle, span["thread"])
        if key not in ctx_tids:
            ctx_tids[key] = pid * 10000 + sum(1 for k in ctx_tids if k[0] == handle) + 1
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": ctx_tids[key],
                        "args": {"name": f"current on {span['thread']}"}})
        out.append({"ph": "X", "name": f"current on {span['thread']}", "cat": "context", "pid": pid,
                    "tid": ctx_tids[key], "ts": _us(span["start"], t0),
                    "dur": max(_us(span["end"], t0) - _us(span["start"], t0), 0.001),
                    "args": {"context": f"{handle:#x}",
                             "context_id": span.get("context_uid") or next(iter(ids.get(handle) or []), None),
                             "thread": span["thread"]}})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"schema": "ctxlab-perfetto/1", "program": program, "clock": "CUPTI timestamp, from the "
                          "first event"}}
