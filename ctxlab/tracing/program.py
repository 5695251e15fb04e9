"""The program runner that ``ctxlab trace`` and ``ctxlab audit`` share: a Python program (``-c`` code, ``-m``
module or a script) run in this process, as ``python`` runs it, under the tracer, exit included. The commands
run it in a child (``ctxlab.tracing.child``), which the parent supervises (``ctxlab.tracing.supervise``)."""

from __future__ import annotations

import atexit
import gc
import os
import runpy
import sys
import threading
import time
import traceback

from ctxlab.tracing.tracer import Tracer


def shown_path(path: str) -> str:
    """A script's path as the trace records it: relative to the working directory when it lies below it."""
    full = os.path.abspath(path)
    return os.path.relpath(full) if full.startswith(os.getcwd() + os.sep) else path


def run_program(code, module, argv, on_exception=None, keep: list | None = None) -> int:
    """Run the program as ``python`` would; return its exit status. ``keep`` receives the program's
    globals (its ``__main__`` namespace), which teardown() lets go of while still tracing.

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
            namespace = {"__name__": "__main__"}
            if keep is not None:
                keep.append(namespace)
            exec(compile(code, "<string>", "exec"), namespace)
        elif module is not None:
            sys.argv = [module, *argv]
            namespace = runpy.run_module(module, run_name="__main__", alter_sys=True)
            if keep is not None:
                keep.append(namespace)
        else:
            script = argv[0]
            if not os.path.isfile(script):
                raise FileNotFoundError(2, "No such file", script)
            sys.argv = list(argv)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            namespace = runpy.run_path(script, run_name="__main__")
            if keep is not None:
                keep.append(namespace)
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
                  tracer_class=None, **tracer_options):
    """Run the program in this process under a Tracer: (its exit status, the tracer, timing stats).

    ``on_start(tracer)`` is called once the tracer records, before the program starts. ``tracer_class``: a
    stand-in for Tracer with its interface (the CPU tests' recorded streams)."""
    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    t0 = time.perf_counter()
    with (tracer_class or Tracer)(calls=calls_mode, **tracer_options) as tracer:
        if on_start is not None:
            on_start(tracer)
        t1 = time.perf_counter()
        namespaces: list = []
        status = run_program(code, module, argv, on_exception=on_exception, keep=namespaces)
        t2 = time.perf_counter()
        teardown(namespaces)
    t3 = time.perf_counter()
    stats = {**tracer.stats, "program_seconds": round(t2 - t1, 6), "start_seconds": round(t1 - t0, 6),
             "finish_seconds": round(t3 - t2, 6),
             "api_calls": sum(e["domain"] in ("driver", "runtime") for e in tracer.events),
             "resource_events": sum(e["domain"] == "resource" for e in tracer.events)}
    return status, tracer, stats


def teardown(namespaces: list) -> None:
    """What the interpreter does at exit, while the tracer still records: wait for the threads that are not
    daemons, let go of the program's globals (their destructors run), run the atexit handlers. Calls made
    there (a library's teardown after the program released its context) are part of the trace."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon and thread.is_alive():
            thread.join()
    namespaces.clear()
    gc.collect()
    try:
        atexit._run_exitfuncs()  # runs each handler once and forgets it: the real exit runs none again
    except Exception:  # a handler's error is printed by atexit itself
        pass


