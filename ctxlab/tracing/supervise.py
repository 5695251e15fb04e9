"""The program in a child, the judge in the parent: ``run_supervised`` starts the traced child
(``ctxlab.tracing.child``), waits for it under a time limit, and reads its flight recording however it ended.

How a run can end (``Ending.how``):

- ``exit``: the program ended by itself (its exit status; ``sys.exit`` and ``os._exit`` included);
- ``signal``: the process died by a signal (a segfault, an abort, a SIGKILL from outside);
- ``timeout``: it ran past ``timeout`` seconds; ``stall``: a thread stayed inside one CUDA call for ``stall``
  seconds while no CUDA call returned anywhere. Either way the parent first asks the child for every thread's
  Python stack (SIGUSR2, answered by faulthandler), reads which call each thread is inside (the flight
  recorder's slots), then kills the child's process group and writes the report.

The program's standard streams are the parent's; Ctrl-C is passed on to the program (a second one kills it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxlab.tracing.child import DUMP_SIGNAL, SPEC
from ctxlab.tracing.flight import HEADER, MAGIC, SLOT, Flight, FlightUnreadable, read_flight
from ctxlab.tracing.recorder import DUMP, FATAL, NOTES, RECORDS, RESULT, FlightFiles, record_limit_env
from ctxlab.tracing.stacks_dump import StacksDump, read_dumps

POLL_S = 0.05
DUMP_WAIT_S = 3.0
DEFAULT_TIMEOUT_S = 86400.0  # a day: a normal program never meets it (a hang meets --stall first); 0 for none
DEFAULT_STALL_S = 600.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A stand-in for the Tracer in the child ("module:Class"), for tests that replay a recorded stream; None: the Tracer.
TRACER: str | None = None


@dataclass
class Ending:
    """How the traced program ended."""

    how: str  # exit, signal, timeout, stall, interrupted (two Ctrl-C: the parent killed it)
    exit_status: int | None  # the program's exit status (exit), else None
    signal: str | None = None  # the signal's name (signal), or the one the parent sent (timeout, stall)
    seconds: float = 0.0  # how long it ran
    program_ended: bool = False  # the program itself had returned (result.json) before the process ended
    detail: str = ""

    def as_dict(self) -> dict:
        """The JSON fields of this object."""
        return {"how": self.how, "exit_status": self.exit_status, "signal": self.signal,
                "seconds": round(self.seconds, 3), "program_ended": self.program_ended, "detail": self.detail}

    @property
    def status(self) -> int:
        """The status a shell would see: the program's own, or 128 + the signal's number."""
        if self.exit_status is not None:
            return self.exit_status
        number = getattr(signal.Signals, self.signal or "", None)
        return 128 + int(number) if number is not None else 1


@dataclass
class Supervised:
    """A traced run as the parent saw it."""

    ending: Ending
    flight: Flight | None
    result: dict  # what the child wrote when the program ended by itself (result.json), else {}
    notes: list[dict]
    fatal: list[StacksDump] = field(default_factory=list)  # faulthandler at a fatal signal
    dumps: list[StacksDump] = field(default_factory=list)  # faulthandler when the parent asked (a hang)
    stopped_calls: list[dict] = field(default_factory=list)  # the calls in progress when the parent stopped it
    unreadable: str = ""  # why there is no flight recording
    folder: str = ""
    ended_at: float = 0.0  # when the parent saw it end, or stopped it (Unix time)
    os_threads: dict[int, str] = field(default_factory=dict)  # OS thread id -> its OS name (/proc), seen alive
    os_stacks: dict[int, tuple[int, int]] = field(default_factory=dict)  # OS thread id -> its stack mapping


def _peek(path: str) -> tuple[int, int, list[tuple[int, int, int]]] | None:
    """(records made, kept or dropped for lack of room; heartbeat; [(tid, depth, outermost start)] of threads
    inside a call), cheaply."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEADER.size)
            if len(head) < HEADER.size:
                return None
            fields = HEADER.unpack(head)
            if fields[0] != MAGIC:
                return None
            off_slots, nrecords, heartbeat, nslots = fields[11], fields[12] + fields[15], fields[18], fields[19]
            handle.seek(off_slots)
            raw = handle.read(SLOT.size * min(nslots, 1024))
    except OSError:
        return None
    inside = []
    for i in range(len(raw) // SLOT.size):
        slot = SLOT.unpack_from(raw, i * SLOT.size)
        if slot[1]:
            inside.append((slot[0], slot[1], slot[4]))
    return nrecords, heartbeat, inside


class OsThreads:
    """The OS names of the child's threads (``/proc/PID/task/TID/comm``), read while it runs: a thread Python did
    not start (a library's watchdog, CUDA's host-function thread) is named as its library named it, even after
    the process is gone. New threads are read at each poll, all of them again every ``RENAMED_POLLS`` (a library
    names its thread just after starting it).

    And each thread's stack mapping (the mapping of ``/proc/PID/maps`` that holds the stack pointer
    ``/proc/PID/task/TID/syscall`` shows): glibc keeps a thread's ``pthread_t``, which is faulthandler's and
    threading's thread id, inside its stack mapping, so a Python stack of a thread Python did not start can be
    tied to its OS thread (``thread_of``)."""

    RENAMED_POLLS = 10

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.names: dict[int, str] = {}
        self.stacks: dict[int, tuple[int, int]] = {}  # OS thread id -> its stack mapping [low, high)
        self._polls = 0

    def poll(self) -> None:
        """Read the names of the threads alive now, and the stack mappings of those not placed yet (nothing where
        /proc is not there)."""
        folder = f"/proc/{self.pid}/task"
        try:
            tids = [int(t) for t in os.listdir(folder) if t.isdigit()]
        except OSError:
            return
        again = self._polls % self.RENAMED_POLLS == 0
        self._polls += 1
        for tid in tids:
            if tid in self.names and not again:
                continue
            name = _read(f"{folder}/{tid}/comm")
            if name:
                self.names[tid] = name
        pointers = {}
        for tid in tids:
            if tid not in self.stacks:
                fields = (_read(f"{folder}/{tid}/syscall") or "").split()
                if len(fields) >= 3 and fields[-2].startswith("0x"):  # "... sp pc" (not "running")
                    pointers[tid] = int(fields[-2], 16)
        if pointers:
            ranges = _mappings(f"/proc/{self.pid}/maps")
            for tid, sp in pointers.items():
                found = next(((low, high) for low, high in ranges if low <= sp < high), None)
                if found is not None:  # glibc reuses an ended thread's stack for a new one: the new one holds it
                    for other in [t for t, r in self.stacks.items() if r == found]:
                        del self.stacks[other]
                    self.stacks[tid] = found

    def thread_of(self, ident: int) -> int | None:
        """The OS thread whose stack mapping holds this pthread_t (threading's and faulthandler's thread id)."""
        return next((tid for tid, (low, high) in self.stacks.items() if low <= ident < high), None)


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _mappings(path: str) -> list[tuple[int, int]]:
    out = []
    for line in _read(path).splitlines():
        low, _, high = line.partition(" ")[0].partition("-")
        try:
            out.append((int(low, 16), int(high, 16)))
        except ValueError:
            continue
    return out


def child_command(folder: str) -> list[str]:
    """The command that runs the traced child."""
    return [sys.executable, "-m", "ctxlab.tracing.child", folder]


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The program's environment, with ctxlab importable in the child."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def run_supervised(mode: str, code: str | None = None, module: str | None = None, argv: list[str] | None = None, *,
                   calls: str = "context", timeout: float = DEFAULT_TIMEOUT_S, stall: float = DEFAULT_STALL_S,
                   env: dict[str, str] | None = None, keep: str | None = None,
                   observer: str | None = None, prepare: Callable[[], None] | None = None,
                   fold: bool | str = False) -> Supervised:
    """Run the program in a child (mode ``trace``; ``observe``: under ``observer``, a "module:function" of a higher
    layer that runs it into the flight recorder, as the audit's does; ``run``: untraced); what its recording holds
    however it ended. Raises TraceUnavailable when the child's tracer could not start, FileNotFoundError for a
    missing script.

    ``timeout``/``stall`` 0: no limit. ``env``: variables set for the program (CUDA_LAUNCH_BLOCKING=1 to pin a
    sticky error). ``keep``: a folder to keep the recording in (else a temporary one, removed). ``prepare``: what
    the parent does while the child starts (importing what it judges with, so that its time hides behind the
    child's). ``fold``: repeated queries and runs of identical launches are read as counts (``read_flight``;
    ``"auto"``: only in a long recording)."""
    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    folder = keep or tempfile.mkdtemp(prefix="ctxlab-flight.")
    os.makedirs(folder, exist_ok=True)
    files = FlightFiles(folder)
    with open(files.path(SPEC), "w") as handle:
        json.dump({"mode": mode, "code": code, "module": module, "argv": list(argv or ()), "calls": calls,
                   "tracer": TRACER, "observer": observer}, handle)
    try:
        done = _supervise(files, timeout, stall, env, prepare, fold)
        if done.result.get("unavailable"):
            from ctxlab.tracing.tracer import TraceUnavailable

            raise TraceUnavailable(str(done.result["unavailable"]))
        return done
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def _supervise(files: FlightFiles, timeout: float, stall: float, env: dict[str, str] | None,
               prepare: Callable[[], None] | None = None, fold: bool | str = False) -> Supervised:
    started = time.monotonic()
    child = subprocess.Popen(child_command(files.folder), env=child_env(env), start_new_session=True)
    restore = _pass_on_termination(child)
    try:
        return _watch(child, files, started, timeout, stall, prepare, fold)
    finally:
        restore()
        if child.poll() is None:  # the parent leaves (an error, an interrupt outside the wait): so does the child
            _signal_group(child, signal.SIGKILL)
            child.wait()


def _pass_on_termination(child: subprocess.Popen) -> Callable[[], None]:
    """SIGTERM and SIGHUP to this process end the child's group first (it runs in a session of its own, where
    they would not reach it), then this process as they would have. Returns what puts the handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved: dict[int, Any] = {}

    def end(number, _frame) -> None:
        _signal_group(child, signal.SIGTERM)
        try:
            child.wait(timeout=2)
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGKILL)
        signal.signal(number, saved.get(number) or signal.SIG_DFL)
        os.kill(os.getpid(), number)

    for number in (signal.SIGTERM, signal.SIGHUP):
        saved[number] = signal.signal(number, end)

    def restore() -> None:
        for number, handler in saved.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)

    return restore


def _watch(child: subprocess.Popen, files: FlightFiles, started: float, timeout: float, stall: float,
           prepare: Callable[[], None] | None, fold: bool | str = False) -> Supervised:
    if prepare is not None:
        prepare()
    how, sent, stopped_calls = "exit", None, []
    last_progress, last_change = None, started
    first_seen: dict[tuple[int, int], float] = {}  # (thread, its call's start) -> when the parent first saw it
    interrupts = 0
    ended_at = 0.0
    names = OsThreads(child.pid)
    while True:
        names.poll()
        try:
            child.wait(timeout=POLL_S)
            ended_at = time.time()
            break
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:  # passed on to the program; a second one ends it
            interrupts += 1
            _signal_group(child, signal.SIGINT if interrupts == 1 else signal.SIGKILL)
            continue
        now = time.monotonic()
        peek = _peek(files.path(RECORDS))
        if peek is not None and peek[:2] != last_progress:
            last_progress, last_change = peek[:2], now
        inside = {(tid, since) for tid, _depth, since in (peek[2] if peek else ())}
        first_seen = {key: first_seen.get(key, now) for key in inside}
        stuck = [key for key, seen in first_seen.items() if now - seen > stall] if stall else []
        if timeout and now - started > timeout:
            how = "timeout"
        elif stuck and now - last_change > stall:  # one call open that long, and nothing returned meanwhile
            how = "stall"
        else:
            continue
        ended_at = time.time()
        stopped_calls = _stop(child, files, peek)
        sent = "SIGKILL"
        break
    seconds = time.monotonic() - started
    result = _json(files.path(RESULT))
    code = child.returncode
    if how == "exit" and interrupts >= 2:
        how, sent = "interrupted", "SIGKILL"
    elif how == "exit" and code is not None and code < 0:
        how = "signal"
        try:
            sent = signal.Signals(-code).name
        except ValueError:
            sent = f"signal {-code}"
    exit_status = code if how == "exit" else None
    ending = Ending(how=how, exit_status=exit_status, signal=sent, seconds=seconds,
                    program_ended=bool(result), detail=_detail(how, timeout, stall, sent, bool(result)))
    flight, unreadable = None, ""
    notes = _notes(files.path(NOTES))
    try:
        flight = read_flight(files, fold, breaks=_noted_times(notes) if fold else None)
    except FlightUnreadable as exc:
        unreadable = str(exc)
    return Supervised(ending=ending, flight=flight, result=result, notes=notes,
                      fatal=read_dumps(files.path(FATAL)), dumps=read_dumps(files.path(DUMP)),
                      stopped_calls=stopped_calls, unreadable=unreadable, folder=files.folder, ended_at=ended_at,
                      os_threads=names.names, os_stacks=names.stacks)


def _stop(child: subprocess.Popen, files: FlightFiles, peek) -> list[dict]:
    """A hung child: every thread's Python stack asked for, the calls in progress noted, then the group killed."""
    inside = [{"tid": tid, "depth": depth, "since": since} for tid, depth, since in (peek[2] if peek else [])]
    dump = files.path(DUMP)
    try:
        os.kill(child.pid, DUMP_SIGNAL)
    except OSError:
        pass
    deadline, size = time.monotonic() + DUMP_WAIT_S, -1
    while time.monotonic() < deadline:  # until faulthandler has written and stopped
        time.sleep(0.1)
        try:
            now_size = os.path.getsize(dump)
        except OSError:
            now_size = 0
        if now_size and now_size == size:
            break
        size = now_size
    _signal_group(child, signal.SIGKILL)
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return inside


def _signal_group(child: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(child.pid, sig)
    except OSError:
        try:
            child.send_signal(sig)
        except OSError:
            pass


def _detail(how: str, timeout: float, stall: float, sent: str | None, program_ended: bool) -> str:
    if how == "timeout":
        return f"ran past the time limit of {timeout:g} s; stopped with {sent}"
    if how == "stall":
        return f"a thread stayed inside one CUDA call for {stall:g} s while no CUDA call returned; stopped with {sent}"
    if how == "interrupted":
        return "was interrupted twice (Ctrl-C) and killed"
    if how == "signal":
        when = "during the interpreter's exit, after the program had ended" if program_ended else "while running"
        return f"died by {sent} {when}"
    return "ended by itself"


def _json(path: str) -> dict:
    try:
        with open(path) as handle:
            doc = json.load(handle)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _notes(path: str) -> list[dict]:
    out = []
    try:
        with open(path, errors="replace") as handle:
            for line in handle:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue  # the last line of a process that died while writing it
                if isinstance(doc, dict):
                    out.append(doc)
    except OSError:
        pass
    return out


def _noted_times(notes: list[dict]) -> list[int]:
    """When each event the child noted apart from the records happened (records' clock), in order."""
    times = []
    for n in notes:
        event = n.get("event") if n.get("kind") == "event" else None
        if isinstance(event, dict) and isinstance(event.get("start"), int):
            times.append(event["start"])
    return sorted(times)


def _readers() -> None:
    """What reading a recording needs, imported while the child starts."""
    import numpy  # noqa: F401

    from ctxlab.tracing import native

    native.__getattr__("RECORD_DTYPE")


def events_of(sup: Supervised) -> list[dict]:
    """The recorded events of a supervised run in time order, numbered and named by thread, with the child's
    noted events among them."""
    events = list(sup.flight.events) if sup.flight is not None else []
    events += [n["event"] for n in sup.notes if n.get("kind") == "event" and isinstance(n.get("event"), dict)]
    events.sort(key=lambda e: (e.get("start", 0), -e.get("end", e.get("start", 0))))
    names = sup.flight.threads if sup.flight is not None else {}
    for seq, e in enumerate(events):
        e["seq"] = seq
        e.setdefault("thread", names.get(int(e.get("tid") or 0)) or f"thread {e.get('tid')}")
    return events


def trace_supervised(code: str | None = None, module: str | None = None, argv: list[str] | None = None, *,
                     calls: str = "context", timeout: float = DEFAULT_TIMEOUT_S,
                     stall: float = DEFAULT_STALL_S,
                     record_limit: int | None = None) -> tuple[int, list[dict], dict, Ending]:
    """``ctxlab trace``: the program in a traced child; (its exit status, the events, counts, how it ended). The
    calls up to a crash or a hang are all there; in a recording of more than ``fold.AUTO_RECORDS`` records,
    repeated queries and runs of identical launches are counts (``stats["folded"]``), not events."""
    sup = run_supervised("trace", code, module, argv, calls=calls, timeout=timeout, stall=stall, prepare=_readers,
                         env=record_limit_env(record_limit) or None, fold="auto")
    events = events_of(sup)
    folded = sup.flight.folded if sup.flight is not None else {}
    stats = {**(sup.result.get("stats") or {}), **(sup.flight.counts if sup.flight is not None else {}),
             "api_calls": sum(e.get("domain") in ("driver", "runtime") for e in events) + folded.get("calls", 0),
             "resource_events": sum(e.get("domain") == "resource" for e in events),
             "ending": sup.ending.as_dict()}
    if sup.flight is not None:  # every record came from ctxlab's C callback
        stats["records"] = stats["callbacks"] = sup.flight.counts["records"]
    if folded:  # a long recording: repeated calls shown as counts
        stats["folded"] = folded
    stats.setdefault("program_seconds", sup.ending.seconds)
    stats.setdefault("finish_seconds", 0.0)
    return sup.ending.status, events, stats, sup.ending


def trace_events(code: str | None = None, module: str | None = None, argv: Sequence[str] = (), *,
                 calls: str = "context", timeout: float | None = None, stall: float | None = None
                 ) -> tuple[int, list[dict], dict]:
    """Run a Python program under the tracer, as ``ctxlab trace`` does: ``code`` (as ``-c``), ``module`` (as
    ``-m``) or a script ``argv[0]`` with its arguments, in a child process whose calls reach this one through the
    flight recorder (so a crash or a hang still gives every call up to it). Returns its exit status (128 + N for
    a signal), the recorded events (``ctxlab.trace.calls`` nests them) and the counts (``stats["ending"]``: how
    it ended). Raises ``TraceUnavailable`` where tracing cannot start and ``FileNotFoundError`` for a missing
    script. ``ctxlab.api.trace`` is this function."""
    if code is None and module is None and argv and not os.path.isfile(argv[0]):
        raise FileNotFoundError(2, "No such file", argv[0])
    status, events, stats, _ending = trace_supervised(
        code, module, list(argv), calls=calls, timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout,
        stall=DEFAULT_STALL_S if stall is None else stall)
    return status, events, stats
