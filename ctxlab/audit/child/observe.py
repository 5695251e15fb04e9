"""The audit's side in the traced child: run the program under the tracer, as ``ctxlab trace`` runs it
(``ctxlab.tracing.program``), with what the audit adds: the user's Python stack of the calls the rules judge
(``AUDIT_CALLBACKS``) and of every failing call, the launches' arguments, the hand-overs between libraries
(``exchange``), the children it forks (``forks``) and the exceptions it does not catch (main thread and
other threads). Everything goes to the flight recorder as it happens; the parent judges
(``ctxlab.audit.run``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from ctxlab.audit.child.allocators import AllocatorHooks
from ctxlab.audit.child.exchange import ExchangeHook
from ctxlab.audit.child.forks import ForkWatch, read_log
from ctxlab.audit.events import ORDERING_CALLBACKS, SETTINGS_CALLBACKS
from ctxlab.tracing.frames import traceback_stack, user_stack
from ctxlab.tracing.program import trace_program
from ctxlab.tracing.recorder import FlightSink
from ctxlab.tracing.tracer import renew_locks_after_fork

FORKS = "forks.jsonl"

# Functions whose calls carry the user's stack in an audit besides the tracer's context functions and every
# failing call (and the first call of each function per thread and context).
# Launches carry one so that a sticky error can be traced to the launch that caused it (a loop launching from
# one line reuses the stack the C side walked last), and the calls that can end or pin a capture; then the
# calls the ordering and settings findings name.
AUDIT_CALLBACKS = ("cuMemAlloc_v2", "cuMemAlloc", "cuCtxSynchronize", "cudaDeviceReset", "cuStreamCreate",
                   "cuStreamCreateWithPriority", "cuEventCreate", "cuEventRecord", "cuEventRecordWithFlags",
                   "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                   "cuLaunchCooperativeKernel", "cuLaunchHostFunc", "cuGraphLaunch", "cudaLaunchKernel",
                   "cudaLaunchKernelExC", "cudaGraphLaunch", "cuStreamBeginCapture_v2", "cudaStreamBeginCapture",
                   "cuStreamDestroy_v2", "cuEventDestroy_v2", "cuModuleUnload", "cuMemFree_v2", "cudaFree",
                   "cudaMalloc", "cudaStreamSynchronize", "cudaDeviceSynchronize", "cuStreamSynchronize",
                   *ORDERING_CALLBACKS, *SETTINGS_CALLBACKS)



def describe_exception(exc: BaseException, tid: int | None, thread: str) -> dict:
    """An uncaught exception of the program as the engine reads it: text, CUDA status name, user frame."""
    text = f"{type(exc).__name__}: {exc}"
    module = type(exc).__module__ or ""
    return {"tid": tid, "thread": thread, "type": type(exc).__name__, "message": text[:4000],
            "stack": traceback_stack(exc.__traceback__),
            "cuda": any(word in module for word in ("cupy", "cuda", "torch")) or "CUDA" in text or "cuda" in text}


def tracer_options(hooks=None) -> dict:
    """The Tracer options of an audited run: the user's stacks, the calls the rules judge with a stack, the
    launches' arguments; with ``hooks`` (an AuditHooks: a tracer that collects in its own process, the pytest
    guard's) their replay of each batch of calls."""
    options = {"stacks": True, "extra_callbacks": AUDIT_CALLBACKS, "launch_arguments": True}
    return {**options, "annotate": hooks.annotate} if hooks is not None else options


def _initialised(tracer) -> bool:
    """Whether the traced process has initialised CUDA: CU_INIT_FINISHED seen, or any call recorded."""
    return tracer is not None and bool(tracer.cuda_initialised or tracer.stats.get("callbacks"))


FATAL_SIGNALS = {signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGTERM, signal.SIGQUIT}


class ExitWatch:
    """The program's own ways out that leave no traceback: ``os._exit``, ``os.abort`` and a fatal signal it sends
    itself (``os.kill``, ``signal.raise_signal``), each noted with the thread and user stack before it happens,
    and the flight recorder's names brought up to date."""

    def __init__(self, sink: FlightSink) -> None:
        self.sink = sink
        self._saved: dict[str, object] = {}

    def _note(self, call: str, args: str) -> None:
        self.sink.note("exit", {"call": call, "args": args, "tid": threading.get_native_id(),
                                "thread": threading.current_thread().name, "stack": user_stack(skip=1)})
        self.sink.clock()
        self.sink.refresh_maps()

    def install(self) -> None:
        """Wrap os._exit and os.abort; an audit hook for os.kill and signal.raise_signal (hooks stay: the child
        ends with the program)."""
        for name in ("_exit", "abort"):
            original = getattr(os, name)
            self._saved[name] = original
            setattr(os, name, self._wrap(f"os.{name}", original))
        own = os.getpid()

        def hook(event: str, args: tuple) -> None:
            if event == "os.kill" and len(args) == 2 and args[0] in (own, 0) and args[1] in FATAL_SIGNALS:
                self._note("os.kill", f"{args[0]}, {signal.Signals(args[1]).name}")
            elif event == "signal.raise_signal" and args and args[0] in FATAL_SIGNALS:
                self._note("signal.raise_signal", signal.Signals(args[0]).name)

        sys.addaudithook(hook)

    def _wrap(self, call: str, original):
        def wrapped(*args):
            if os.getpid() == self.sink.pid:
                self._note(call, ", ".join(repr(a) for a in args))
            return original(*args)

        wrapped.__name__ = getattr(original, "__name__", call)
        wrapped.__doc__ = getattr(original, "__doc__", None)
        return wrapped

    def close(self) -> None:
        """The originals back (the program has returned)."""
        for name, original in self._saved.items():
            setattr(os, name, original)


def observe_program(code: str | None, module: str | None, argv: list[str], sink: FlightSink,
                    tracer_class=None) -> tuple[int, dict]:
    """Run the program under the tracer into the flight recorder ``sink``: its exit status, and the forks and
    counts for the parent (``tracer_class``: a stand-in for the Tracer)."""
    log = sink.files.path(FORKS)
    holder: dict = {}
    watch = ForkWatch(log, lambda: _initialised(holder.get("tracer")),
                      on_child=lambda: renew_locks_after_fork(holder.get("tracer")))
    saved_hook = threading.excepthook

    def thread_hook(args) -> None:
        if args.exc_value is not None and args.exc_type is not SystemExit:
            thread = args.thread
            sink.note("exception", describe_exception(args.exc_value, getattr(thread, "native_id", None),
                                                      getattr(thread, "name", "?")))
        saved_hook(args)

    def main_hook(exc: BaseException) -> None:
        sink.note("exception", describe_exception(exc, threading.get_native_id(), threading.current_thread().name))

    def started(tracer) -> None:
        holder["tracer"] = tracer
        holder["exchange"] = exchange = ExchangeHook(tracer.note, tracer.timestamp)
        exchange.install()
        holder["allocators"] = allocators = AllocatorHooks(tracer.note, tracer.timestamp)
        allocators.install()

    threading.excepthook = thread_hook
    watch.install()
    exits = ExitWatch(sink)
    exits.install()
    try:
        status, _tracer, stats = trace_program(code, module, argv, on_exception=main_hook, on_start=started,
                                               flight=sink, tracer_class=tracer_class, **tracer_options())
    finally:
        if "exchange" in holder:
            holder["exchange"].close()
        if "allocators" in holder:
            holder["allocators"].close()
        watch.close()
        exits.close()
        threading.excepthook = saved_hook
    forks = read_log(log) if os.path.exists(log) else []
    stats = {**stats, "handovers": holder["exchange"].count if "exchange" in holder else 0,
             "allocator_notes": holder["allocators"].notes.count if "allocators" in holder else 0}
    return status, {"forks": forks, "stats": stats}
