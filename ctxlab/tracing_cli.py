"""``ctxlab trace``: run a Python program in this process under the tracer."""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def _run_program(code, module, argv) -> int:
    """Run the program as ``python`` would; return its exit status."""
    saved = sys.argv[:]
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
        return 0
    except SystemExit as exc:
        code_ = exc.code
        return code_ if isinstance(code_, int) else (0 if code_ is None else 1)
    except FileNotFoundError:
        raise
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.argv = saved


def run_traced(code, module, argv, only, thread, fmt, output, echo) -> int:
    from ctxlab.record import atomic_write
    from ctxlab.trace import Tracer, calls, only_context, render_tree

    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    with Tracer() as tracer:
        status = _run_program(code, module, argv)
    events = tracer.events
    if thread:
        events = [e for e in events if e.get("thread") == thread]
    if fmt == "json":
        text = json.dumps({"schema": "ctxlab-trace/1", "program": code or module or argv[0], "events": events},
                          indent=1) + "\n"
    else:
        tree = calls(events)
        if only == "context":
            tree = only_context(tree)
        text = render_tree(tree)
    if output:
        atomic_write(output, text)
    else:
        sys.stdout.flush()
        echo(text, nl=False)
    return status
