"""The traced child: ``python -m ctxlab.tracing.child FOLDER`` runs the program that FOLDER's spec.json names
under a Tracer that writes into the flight recorder (``ctxlab.tracing.recorder``), as ``ctxlab trace`` asked,
or under the observer a higher layer names (``ctxlab audit``'s: ``ctxlab.audit.child.observe``), started by
``ctxlab.tracing.supervise``. It prints nothing of its own: the program's
output and exit status are the program's. Judging happens in the parent, from the recording.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading

from ctxlab.tracing.recorder import DUMP, FATAL, RESULT, FlightFiles, FlightSink, write_json

SPEC = "spec.json"
DUMP_SIGNAL = signal.SIGUSR2  # the parent's request for every thread's Python stack (a hang)
UNAVAILABLE = 70  # the exit status when the tracer could not start (result.json says why)


def _class(path: str):
    """A class named ``module:Name`` (a Tracer stand-in the parent asked for)."""
    import importlib

    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _stacks_on_signals(files: FlightFiles) -> list:
    """faulthandler writes every thread's stack at a fatal signal (fatal.txt) and at SIGUSR2 (dump.txt)."""
    fatal = open(files.path(FATAL), "w")
    dump = open(files.path(DUMP), "w")
    faulthandler.enable(file=fatal, all_threads=True)
    faulthandler.register(DUMP_SIGNAL, file=dump, all_threads=True, chain=False)
    return [fatal, dump]  # kept open for the life of the process


def _die_with_parent() -> None:
    """Linux: the child is killed when the audit or trace that started it dies (it runs in a session of its own,
    so no terminal signal reaches it)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run(folder: str) -> int:
    """Run the program of FOLDER's spec; its exit status."""
    files = FlightFiles(folder)
    with open(files.path(SPEC)) as handle:
        spec = json.load(handle)
    _die_with_parent()
    keep = _stacks_on_signals(files)
    sink = FlightSink(files)
    sink.open_notes()  # the main thread's name and ident, for faulthandler's stacks even with no recording
    main = threading.main_thread()
    sink.note("thread", {"tid": threading.get_native_id(), "ident": main.ident, "name": main.name})
    code, module, argv = spec.get("code"), spec.get("module"), list(spec.get("argv") or ())
    tracer_class = _class(spec["tracer"]) if spec.get("tracer") else None
    try:
        if spec["mode"] == "observe":  # a higher layer's observer ("module:function"), e.g. the audit's
            observe = _class(spec["observer"])
            status, extra = observe(code, module, argv, sink, tracer_class=tracer_class)
        elif spec["mode"] == "trace":
            from ctxlab.tracing.program import trace_program

            status, _tracer, stats = trace_program(code, module, argv, calls_mode=spec.get("calls", "context"),
                                                   flight=sink, tracer_class=tracer_class)
            extra = {"stats": stats}
        else:  # "run": the program alone, as the parent supervises it (a plain run to compare with)
            from ctxlab.tracing.program import run_program

            status, extra = run_program(code, module, argv), {}
    except KeyboardInterrupt:  # Ctrl-C while ctxlab started or stopped the tracer (the program's own is its)
        sys.stderr.flush()
        return 128 + signal.SIGINT
    except Exception as exc:  # the tracer could not start (no CUPTI, no GPU, another profiler): say why
        from ctxlab.tracing.tracer import TraceUnavailable

        if not isinstance(exc, TraceUnavailable):
            raise
        write_json(files.path(RESULT), {"unavailable": str(exc)})
        return UNAVAILABLE
    write_json(files.path(RESULT), {"status": status, **extra})
    sys.stdout.flush()
    sys.stderr.flush()
    del keep
    return status


def main() -> None:
    """The child's entry point: exit with the program's own status."""
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.stderr.write("usage: python -m ctxlab.tracing.child FOLDER (started by ctxlab trace and audit)\n")
        raise SystemExit(2)
    # The interpreter's own exit follows, as after ``python program.py``: a crash there is the program's too
    # (result.json, written before, tells the parent that the program itself had ended).
    raise SystemExit(run(sys.argv[1]))


if __name__ == "__main__":
    main()
