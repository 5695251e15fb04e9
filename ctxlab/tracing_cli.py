"""``ctxlab trace``: run a Python program in this process under the tracer."""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback

TRACE_FORMATS = ("table", "json", "perfetto")


def _shown_path(path: str) -> str:
    """A script's path as the trace records it: relative to the working directory when it lies below it."""
    import os

    full = os.path.abspath(path)
    return os.path.relpath(full) if full.startswith(os.getcwd() + os.sep) else path


def _run_program(code, module, argv, on_exception=None) -> int:
    """Run the program as ``python`` would; return its exit status.

    ``on_exception(exc)`` is told of an exception the program did not catch (before its traceback is
    printed). A child the program forked with ``os.fork`` that runs on past the program's end (it
    returned instead of calling ``os._exit``) leaves here with ``os._exit``: it must not go on to
    write the parent's report."""
    saved = sys.argv[:]
    parent = os.getpid()
    status = 1
    try:
        if code is not None:
            sys.argv = ["-c", *argv]
            exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
        elif module is not None:
            sys.argv = [module, *argv]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            script = argv[0]
            if not os.path.isfile(script):
                raise FileNotFoundError(2, "No such file", script)
            sys.argv = list(argv)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as exc:
        code_ = exc.code
        status = code_ if isinstance(code_, int) else (0 if code_ is None else 1)
    except FileNotFoundError:
        if os.getpid() == parent:
            raise
        status = 1
    except BaseException as exc:
        if on_exception is not None and os.getpid() == parent:
            try:
                on_exception(exc)
            except Exception:
                pass
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved
        if os.getpid() != parent:  # a forked child that ran to the program's end
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status)
    return status


def trace_program(code, module, argv, calls_mode: str = "context", on_exception=None, on_start=None,
                  **tracer_options):
    """Run the program in this process under a Tracer: (its exit status, the tracer, timing stats).

    ``on_start(tracer)`` is called once the tracer records, before the program starts."""
    from ctxlab.trace import Tracer

    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    t0 = time.perf_counter()
    with Tracer(calls=calls_mode, **tracer_options) as tracer:
        if on_start is not None:
            on_start(tracer)
        t1 = time.perf_counter()
        status = _run_program(code, module, argv, on_exception=on_exception)
        t2 = time.perf_counter()
    t3 = time.perf_counter()
    stats = {**tracer.stats, "program_seconds": round(t2 - t1, 6), "start_seconds": round(t1 - t0, 6),
             "finish_seconds": round(t3 - t2, 6),
             "api_calls": sum(e["domain"] in ("driver", "runtime") for e in tracer.events),
             "resource_events": sum(e["domain"] == "resource" for e in tracer.events)}
    return status, tracer, stats


def render(events: list[dict], fmt: str, program: str, only: str = "context", calls_mode: str = "context",
           stats: dict | None = None) -> str:
    """The trace as text: a tree per thread (``only`` filters it), the events as JSON, or Perfetto JSON."""
    from ctxlab.trace import calls, only_context, render_tree

    if fmt == "json":
        return json.dumps({"schema": "ctxlab-trace/2", "program": program, "calls": calls_mode,
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
    from ctxlab.record import atomic_write

    program = code or module or _shown_path(argv[0])
    status, tracer, stats = trace_program(code, module, argv, calls_mode=calls_mode)
    events = tracer.events
    if thread:
        events = [e for e in events if e.get("thread") == thread]
    text = render(events, fmt, program, only=only, calls_mode=calls_mode, stats=stats)
    sys.stdout.flush()
    if output and output != "-":
        atomic_write(output, text)
    else:
        echo(text, nl=False)
    if err is not None:
        err(f"ctxlab trace: {stats['api_calls']} API calls ({stats['callbacks']} through Python callbacks), "
            f"{stats['resource_events']} resource events; the program ran {stats['program_seconds']:.3f} s, "
            f"collecting the records took {stats['finish_seconds']:.3f} s after it")
    return status
