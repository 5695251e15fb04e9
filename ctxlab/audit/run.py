"""Run a program for the audit and judge what it did: the program runs in a traced child
(``ctxlab.audit.child.observe`` there, through ``ctxlab.tracing.supervise``), the parent reads its flight recording
however it ended (exit, exception, ``os._exit``, a signal, a hang stopped at the time limit), replays the
calls into the state model and runs the rules (``ctxlab.audit.rules.catalogue``). With ``pin``, a sticky error is
pinned to its launch by a second run with launches serialised (``CUDA_LAUNCH_BLOCKING=1``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxlab.audit.child.forks import read_log
from ctxlab.audit.child.observe import FORKS
from ctxlab.audit.engine import Finding, RunInfo, Stream, end_of
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.report import thread_rows
from ctxlab.audit.rules.catalogue import judge_stream
from ctxlab.audit.rules.failures import kernel_of, probes
from ctxlab.audit.rules.recording import recording_full_event
from ctxlab.tracing.program import shown_path
from ctxlab.tracing.recorder import record_limit_env
from ctxlab.tracing.supervise import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S, Supervised, events_of, run_supervised

EXIT_HAZARD = 3
PIN_ENV = {"CUDA_LAUNCH_BLOCKING": "1"}
OBSERVER = "ctxlab.audit.child.observe:observe_program"  # what the traced child runs the program with


@dataclass
class AuditResult:
    """What the audit found in one run of a program."""

    program: str
    exit_status: int  # the program's own (128 + N for a signal)
    findings: list[Finding]
    stats: dict = field(default_factory=dict)
    forks: list[dict] = field(default_factory=list)
    exceptions: list[dict] = field(default_factory=list)
    ending: dict = field(default_factory=dict)  # how the program ended (ctxlab.tracing.supervise.Ending)
    probes: list[dict] = field(default_factory=list)  # failing calls libraries made on purpose and handled
    threads: list[dict] = field(default_factory=list)  # each thread at the end: its last call, the one it was in

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


def _stream(sup: Supervised, forks: list[dict], pinned: dict | None = None) -> Stream:
    """The recorded calls and the child's notes as one stream, with how the run ended."""
    flight = sup.flight
    events = events_of(sup)
    exceptions = [n for n in sup.notes if n.get("kind") == "exception"]
    exits = [n for n in sup.notes if n.get("kind") == "exit"]
    last: dict = {}
    for e in events:
        last[e.get("tid")] = max(last.get(e.get("tid"), 0), e.get("end", e.get("start", 0)))
    if flight is not None:
        for tid in flight.ended:
            if tid in last and flight.threads.get(tid):
                events.append({"domain": "audit", "name": "THREAD_ENDED", "tid": tid, "start": last[tid] + 1})
    full = recording_full_event(flight.counts, max(events, key=end_of, default=None)) if flight is not None else None
    if full is not None:
        events.append(full)
    events.sort(key=lambda e: (e.get("start", 0), -e.get("end", e.get("start", 0))))
    names = dict(flight.threads) if flight is not None else {}
    named_by_child = {n["tid"] for n in sup.notes if n.get("kind") == "thread" and isinstance(n.get("tid"), int)}
    library_threads = {tid: f"{name} ({tid})" for tid, name in sup.os_threads.items()
                       if tid not in names and tid not in named_by_child}
    for seq, e in enumerate(events):
        e["seq"] = seq
        tid = int(e.get("tid") or 0)
        e.setdefault("thread", names.get(tid) or f"thread {e.get('tid')}")
        if e["thread"] == f"thread {e.get('tid')}" and tid in library_threads:  # a thread Python did not start
            e["thread"] = library_threads[tid]
    info = RunInfo(ending=sup.ending.as_dict(), exits=exits, fatal=sup.fatal, dumps=sup.dumps, pinned=pinned or {})
    for note in sup.notes:  # threads the child named itself (its main thread), where the recording has none
        if note.get("kind") == "thread" and isinstance(note.get("tid"), int):
            info.idents.setdefault(note["tid"], int(note.get("ident") or 0))
            info.threads.setdefault(note["tid"], str(note.get("name", "?")))
    if flight is not None:
        info.open_calls, info.kernels = flight.open_calls, flight.kernels
        info.folded_by_thread = flight.folded_by_thread
        info.idents.update(flight.idents)
        info.threads.update(flight.threads)
        for call in flight.open_calls:
            started = flight.wall(call.since)
            if started:
                info.seconds_inside[call.tid] = max(0.0, sup.ended_at - started)
            if call.tid in library_threads and call.thread == f"thread {call.tid}":  # a library's: its OS name
                call.thread = library_threads[call.tid]
    for tid, name in library_threads.items():  # threads Python did not start: not in ``idents``
        info.threads.setdefault(tid, name)
    known = set(info.idents.values())
    for dump in [*info.fatal, *info.dumps]:  # a Python stack of a thread Python did not start: its OS thread
        for stack in dump.threads:
            if stack.ident not in known and stack.tid is None:
                stack.tid = next((tid for tid, (low, high) in sup.os_stacks.items() if low <= stack.ident < high),
                                 None)
    return Stream(events, forks, exceptions, run=info)


def judge_run(program: str, sup: Supervised, forks: list[dict], pinned: dict | None = None) -> AuditResult:
    """The audit of one supervised run."""
    stream = _stream(sup, forks, pinned)
    findings = judge_stream(stream)
    flight = sup.flight
    launches = {"driver": 0, "runtime": 0}
    for e in stream.calls:
        if e["domain"] in launches and e["name"].startswith(("cuLaunch", "cudaLaunch")) and "from" not in e:
            launches[e["domain"]] += 1 + e.get("repeats", 0)
    folded = flight.folded if flight is not None else {}
    stats = {**(sup.result.get("stats") or {}), **stream.counts, "launch_records": launches,
             "api_calls": len(stream.calls) + folded.get("calls", 0), "forks": len(forks),
             "uncaught_exceptions": len(stream.exceptions),
             **(flight.counts if flight is not None else {"recording": sup.unreadable})}
    if folded:
        stats["folded"] = folded
    return AuditResult(program=program, exit_status=sup.ending.status, findings=findings, stats=stats, forks=forks,
                       exceptions=stream.exceptions, ending=sup.ending.as_dict(), probes=probes(stream),
                       threads=thread_rows(stream))


def pinned_launches(sup: Supervised, forks: list[dict]) -> list[dict]:
    """From a run with launches serialised: for each context's sticky error in time order, the launch that
    faulted (the failing launch itself, or the last launch that returned before the error surfaced)."""
    stream = _stream(sup, forks)
    m = model(stream)
    out = []
    for ctx, first in sorted(m.sticky.items(), key=lambda item: item[1].get("start", 0)):
        launch: dict | None = None
        if first.get("name", "").startswith(("cuLaunch", "cudaLaunch")):
            launch = first
        else:
            before = m.launches_before(ctx, first.get("start", 0), limit=1)
            launch = before[0] if before else None
        if launch is None:
            continue
        frame = (launch.get("stack") or [[None, None]])[0]
        out.append({"kernel": kernel_of(stream, launch), "thread": launch.get("thread", "?"),
                    "place": f" at {frame[0]}:{frame[1]}" if frame[0] else "", "event": launch})
    return out


def audit_program(code: str | None = None, module: str | None = None, argv: Sequence[str] = (), *,
                  timeout: float = DEFAULT_TIMEOUT_S, stall: float = DEFAULT_STALL_S, pin: bool = False,
                  keep: str | None = None, record_limit: int | None = None) -> AuditResult:
    """Run the program (``-c`` code, ``-m`` module, or a script and its arguments) in a traced child and judge it.

    ``timeout`` and ``stall`` (seconds, 0: none) bound a hang; ``pin`` re-runs a program that met a sticky error
    with launches serialised to name the faulting launch; ``keep`` keeps the flight recording in that folder;
    ``record_limit`` bounds the recording's size in bytes (what does not fit is counted, and reported)."""
    argv = list(argv)
    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    program = code or module or shown_path(argv[0])
    limit = record_limit_env(record_limit)
    sup, forks = _run(code, module, argv, timeout, stall, keep, limit or None)
    result = judge_run(program, sup, forks)
    if pin and any(f.rule == "sticky-error" for f in result.findings):
        again, again_forks = _run(code, module, argv, timeout, stall, None, {**PIN_ENV, **limit})
        exact = pinned_launches(again, again_forks)
        stream = _stream(sup, forks)
        contexts = [ctx for ctx, _e in sorted(model(stream).sticky.items(), key=lambda i: i[1].get("start", 0))]
        result = judge_run(program, sup, forks, dict(zip(contexts, exact, strict=False)))
        result.stats["pinned_launches"] = len(exact)
    return result


def _prepare() -> None:
    """What judging needs, loaded while the child starts the program: the recording's reader, the report."""
    import numpy  # noqa: F401

    import ctxlab.audit.report  # noqa: F401
    from ctxlab.tracing import native

    native.__getattr__("RECORD_DTYPE")


def _run(code, module, argv, timeout, stall, keep, env) -> tuple[Supervised, list[dict]]:
    """One supervised run of the audit's child, and the children it forked."""
    folder = keep or tempfile.mkdtemp(prefix="ctxlab-audit.")
    try:
        sup = run_supervised("observe", code, module, argv, timeout=timeout, stall=stall, env=env, keep=folder,
                             observer=OBSERVER, prepare=_prepare, fold=True)
        log = os.path.join(folder, FORKS)
        return sup, read_log(log) if os.path.exists(log) else []
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def audit_code(code: str | None = None, module: str | None = None, argv: Sequence[str] = (), **options) -> AuditResult:
    """Run a Python program in a traced child and judge it, as ``ctxlab audit`` does: ``code`` (as ``-c``),
    ``module`` (as ``-m``) or a script ``argv[0]`` with its arguments; ``options`` as ``audit_program``'s.
    ``ctxlab.api.audit`` is this function."""
    return audit_program(code=code, module=module, argv=list(argv), **options)

