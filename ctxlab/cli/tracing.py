"""``ctxlab trace``: run a Python program in a traced child and show its calls."""

from __future__ import annotations

import json
import sys

from ctxlab.records.schema import TRACE_SCHEMA
from ctxlab.tracing.program import shown_path


def render(events: list[dict], fmt: str, program: str, only: str = "context", calls_mode: str = "context",
           stats: dict | None = None) -> str:
    """The trace as text: a tree per thread (``only`` filters it), the events as JSON, or Perfetto JSON."""
    from ctxlab.tracing.calls import calls, only_context, render_tree

    if fmt == "json":
        return json.dumps({"schema": TRACE_SCHEMA, "program": program, "calls": calls_mode,
                           "stats": stats or {}, "events": events}, indent=1) + "\n"
    if fmt == "perfetto":
        from ctxlab.report.perfetto import to_perfetto

        return json.dumps(to_perfetto(events, program=program)) + "\n"
    tree = calls(events)
    if only == "context":
        tree = only_context(tree)
    return render_tree(tree)


def _full(stats: dict) -> str:
    """What a full recording dropped, for the summary line ("" when nothing was)."""
    dropped = [f"{stats[key]:,} {what}" for key, what in (("dropped_records", "calls"), ("dropped_stacks", "stacks"),
                                                         ("dropped_bytes", "bytes of names and arguments"))
               if stats.get(key)]
    if not dropped:
        return ""
    return (f"; the recording was full: {', '.join(dropped)} were not recorded (give --record-limit more room or "
            f"free disk where it lies)")


def _folded(stats: dict) -> str:
    """What a long recording showed as counts, for the summary line ("" when it showed every call)."""
    folded = stats.get("folded") or {}
    if not folded.get("calls"):
        return ""
    return (f"; a long recording: {folded['calls']:,} repeated calls are shown as counts, not calls (each kept "
            f"launch says how many it stands for; the last {folded.get('tail_kept', '?')} calls of each thread are "
            f"all shown)")


def run_traced(code, module, argv, only, thread, fmt, output, echo, calls_mode: str = "context",
               err=None, timeout: float | None = None, stall: float | None = None,
               record_limit: int | None = None) -> int:
    """Run ``code``, ``module`` or the script in ``argv`` in a traced child, write the trace; return its exit
    status (128 + N where it died by signal N)."""
    from ctxlab.output import write_output
    from ctxlab.tracing.supervise import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S, trace_supervised

    program = code or module or shown_path(argv[0])
    status, events, stats, ending = trace_supervised(
        code, module, list(argv), calls=calls_mode, timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout,
        stall=DEFAULT_STALL_S if stall is None else stall, record_limit=record_limit)
    if thread:
        events = [e for e in events if e.get("thread") == thread]
    text = render(events, fmt, program, only=only, calls_mode=calls_mode, stats=stats)
    sys.stdout.flush()
    if output and output != "-":
        write_output(str(output), text)
    else:
        echo(text, nl=False)
    if err is not None:
        end = "" if ending.how == "exit" else f"; the program {ending.detail}: the calls up to then are shown"
        err(f"ctxlab trace: {stats['api_calls']} API calls, {stats['resource_events']} resource events "
            f"({stats.get('records', 0)} records kept by ctxlab's C callback in its flight recorder, "
            f"{stats.get('stacks', 0)} stacks); the program ran {ending.seconds:.3f} s{end}{_full(stats)}"
            f"{_folded(stats)}")
    return status
