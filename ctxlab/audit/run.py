"""Run a program under the tracer for the audit and judge what it did.

The program runs in this process, as ``ctxlab trace`` runs it (``ctxlab.program``), with three
additions: the tracer takes the user's Python stack in its callbacks (``stacks=True``) and gives a
callback to a few more functions the rules judge (``AUDIT_CALLBACKS``); exceptions the program does
not catch (main thread and other threads) are kept with their stacks; children it forks are watched
(``ctxlab.audit.forks``).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxlab.audit.engine import Finding
from ctxlab.audit.exchange import ExchangeHook
from ctxlab.audit.forks import ForkWatch, read_log
from ctxlab.audit.hooks import AuditHooks
from ctxlab.audit.rules import AUDIT_CALLBACKS, judge
from ctxlab.program import shown_path, trace_program
from ctxlab.stacks import traceback_stack
from ctxlab.tracer import renew_locks_after_fork

EXIT_HAZARD = 3


@dataclass
class AuditResult:
    """What the audit found in one run of a program."""

    program: str
    exit_status: int  # the program's own
    findings: list[Finding]
    stats: dict = field(default_factory=dict)
    forks: list[dict] = field(default_factory=list)
    exceptions: list[dict] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        """The findings of severity error (they make the audit exit 3)."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def exit_code(self) -> int:
        """3 when a hazard of severity error was found, else 0 (the program's status is reported apart)."""
        return EXIT_HAZARD if self.errors else 0

    def counts(self) -> dict[str, int]:
        """How many findings of each severity."""
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] = out.get(f.severity, 0) + 1
        return out


def describe_exception(exc: BaseException, tid: int | None, thread: str) -> dict:
    """An uncaught exception of the program as the engine reads it: text, CUDA status name, user frame."""
    text = f"{type(exc).__name__}: {exc}"
    module = type(exc).__module__ or ""
    return {"tid": tid, "thread": thread, "type": type(exc).__name__, "message": text[:4000],
            "stack": traceback_stack(exc.__traceback__),
            "cuda": any(word in module for word in ("cupy", "cuda", "torch")) or "CUDA" in text or "cuda" in text}


def _initialised(tracer) -> bool:
    """Whether the traced process has initialised CUDA: CU_INIT_FINISHED seen, or any call a callback saw."""
    if tracer is None:
        return False
    return bool(tracer.cuda_initialised or tracer.stats.get("callbacks"))


def _renew_locks(tracer) -> None:
    """In a forked child: the tracer's locks as new."""
    renew_locks_after_fork(tracer)


def tracer_options(hooks: AuditHooks) -> dict:
    """The Tracer options of an audited run: the user's stacks, the calls the rules judge with a stack, the
    launches' arguments, and these hooks' replay of each batch of calls."""
    return {"stacks": True, "extra_callbacks": AUDIT_CALLBACKS, "launch_arguments": True,
            "annotate": hooks.annotate}


def audit_program(code: str | None = None, module: str | None = None, argv: list[str] | tuple = (),
                  calls_mode: str = "context") -> AuditResult:
    """Run the program (``-c`` code, ``-m`` module, or a script and its arguments) under the tracer, judge it."""
    argv = list(argv)
    program = code or module or shown_path(argv[0])
    exceptions: list[dict] = []
    fd, log = tempfile.mkstemp(prefix="ctxlab-audit-forks.", suffix=".jsonl")
    os.close(fd)
    holder: dict = {}
    watch = ForkWatch(log, lambda: _initialised(holder.get("tracer")),
                      on_child=lambda: _renew_locks(holder.get("tracer")))
    saved_hook = threading.excepthook
    hooks = AuditHooks()

    def thread_hook(args) -> None:
        if args.exc_value is not None and args.exc_type is not SystemExit:
            thread = args.thread
            exceptions.append(describe_exception(args.exc_value, getattr(thread, "native_id", None),
                                                 getattr(thread, "name", "?")))
        saved_hook(args)

    def main_hook(exc: BaseException) -> None:
        exceptions.append(describe_exception(exc, threading.get_native_id(), threading.current_thread().name))

    def started(tracer) -> None:
        holder["tracer"] = tracer
        holder["exchange"] = exchange = ExchangeHook(tracer.note, tracer.timestamp)
        exchange.install()

    threading.excepthook = thread_hook
    watch.install()
    try:
        status, tracer, stats = trace_program(code, module, argv, calls_mode=calls_mode, on_exception=main_hook,
                                              on_start=started, **tracer_options(hooks))
        forks = read_log(log)
    finally:
        if "exchange" in holder:
            holder["exchange"].close()
        watch.close()
        threading.excepthook = saved_hook
        try:
            os.unlink(log)
        except OSError:
            pass
    findings = judge(tracer.events, forks=forks, exceptions=exceptions)
    # the launches CUPTI recorded, against the launch hook's callbacks (stats): more callbacks than driver
    # records means the runtime's launches reach cuLaunchKernel beneath them, where the hook reads them
    launches = {"driver": 0, "runtime": 0}
    for e in tracer.events:
        if e["domain"] in launches and e["name"].startswith(("cuLaunch", "cudaLaunch")) and "from" not in e:
            launches[e["domain"]] += 1
    stats = {**stats, "forks": len(forks), "uncaught_exceptions": len(exceptions), **hooks.summary(),
             "handovers": holder["exchange"].count if "exchange" in holder else 0,
             "launch_records": launches}
    return AuditResult(program=program, exit_status=status, findings=findings, stats=stats, forks=forks,
                       exceptions=exceptions)


def audit_code(code: str | None = None, module: str | None = None, argv: Sequence[str] = ()) -> AuditResult:
    """Run a Python program in this process under the tracer and judge it, as ``ctxlab audit`` does: ``code``
    (as ``-c``), ``module`` (as ``-m``) or a script ``argv[0]`` with its arguments. ``ctxlab.audit(...)`` and
    ``ctxlab.api.audit`` are this function."""
    return audit_program(code=code, module=module, argv=list(argv))
