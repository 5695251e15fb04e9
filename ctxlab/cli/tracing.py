"""``ctxlab trace``: run a Python program in this process under the tracer."""

from __future__ import annotations

import json
import sys

from ctxlab.program import shown_path, trace_program
from ctxlab.records.schema import TRACE_SCHEMA


def render(events: list[dict], fmt: str, program: str, only: str = "context", calls_mode: str = "context",
           stats: dict | None = None) -> str:
    """The trace as text: a tree per thread (``only`` filters it), the events as JSON, or Perfetto JSON."""
    from ctxlab.trace import calls, only_context, render_tree

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


def run_traced(code, module, argv, only, thread, fmt, output, echo, calls_mode: str = "context",
               err=None) -> int:
    """Run ``code``, ``module`` or the script in ``argv`` under the tracer, write the trace; return its exit status."""
    from ctxlab.output import write_output

    program = code or module or shown_path(argv[0])
    status, tracer, stats = trace_program(code, module, argv, calls_mode=calls_mode)
    events = tracer.events
    if thread:
        events = [e for e in events if e.get("thread") == thread]
    text = render(events, fmt, program, only=only, calls_mode=calls_mode, stats=stats)
    sys.stdout.flush()
    if output and output != "-":
        write_output(str(output), text)
    else:
        echo(text, nl=False)
    if err is not None:
        err(f"ctxlab trace: {stats['api_calls']} API calls, {stats['resource_events']} resource events "
            f"({stats['records']} records kept by ctxlab's C callback, {stats.get('stacks', 0)} with the user's "
            f"stack); the program ran {stats['program_seconds']:.3f} s, collecting the records took "
            f"{stats['finish_seconds']:.3f} s after it")
    return status
