"""The flight recorder's writing side, in the traced process: where the C callback writes (a file mapped into
memory shared with the parent that audits this process) and what Python adds beside it.

The C side writes every record, stack, kept argument, code object name and kernel name into the mapped file
as it happens (``ctxlab_flight_open``); nothing waits for Python, so what was recorded survives ``os._exit``,
a segfault or SIGKILL. Python adds, in files of the same folder (``FlightFiles``):

- ``names.json``: the names of CUPTI's callback ids and of the statuses, written once at the start, so the
  parent names calls without loading CUPTI or the driver;
- ``notes.jsonl``: events made outside CUPTI (the audit's hand-over notes, uncaught exceptions), a line each,
  flushed as they come;
- ``maps.txt``: the shared objects loaded (``/proc/self/maps``), rewritten when it changes, so the parent can
  name the library whose native code made a failing call;
- ``fatal.txt`` and ``dump.txt``: Python's own stacks of every thread (``faulthandler``) at a fatal signal, and
  when the parent asks with SIGUSR2 (a hang);
- ``result.json``: written when the program ends by itself (its exit status, forks, counts).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import TextIO

RECORDS, NAMES, NOTES, MAPS, FATAL, DUMP, RESULT = ("records.bin", "names.json", "notes.jsonl", "maps.txt",
                                                    "fatal.txt", "dump.txt", "result.json")
# Capacities of the mapped file (sparse: only what is written takes memory or disk).
CAP_RECORDS = 1 << 24
CAP_STACKS = 1 << 21
CAP_BYTES = 1 << 31


@dataclass(frozen=True)
class FlightFiles:
    """The files of one flight recording, in one folder."""

    folder: str

    def path(self, name: str) -> str:
        """The path of one of the recording's files (RECORDS, NAMES, ...)."""
        return os.path.join(self.folder, name)


RECORD_BYTES, STACK_BYTES, SLOTS_BYTES = 104, 400, 1 << 17
# The bound a user set on the recording's size (``--record-limit``), in bytes, handed to the traced child.
RECORD_LIMIT_ENV = "CTXLAB_RECORD_LIMIT"
RECORD_LIMIT_LEAST = 1 << 20


def record_limit_env(limit: int | None) -> dict[str, str]:
    """The child's environment variable for a bound on the recording (none without one)."""
    return {RECORD_LIMIT_ENV: str(int(limit))} if limit else {}


def record_limit() -> int | None:
    """The bound this traced process was given, if any (a value that is not a size is no bound)."""
    text = os.environ.get(RECORD_LIMIT_ENV, "")
    return max(int(text), RECORD_LIMIT_LEAST) if text.isascii() and text.isdigit() else None


def capacities(folder: str, limit: int | None = None) -> tuple[int, int, int]:
    """How many records and stacks, and how many bytes of names and arguments, the recording may hold: at most
    CAP_*, at most half the room left where it lies, and at most ``limit`` bytes in all where one is given. The
    file is sparse and mapped: a page written where the file system has no room left would kill the program
    (SIGBUS) inside the driver, so what does not fit is counted as dropped instead."""
    try:
        free = shutil.disk_usage(folder).free // 2
    except OSError:
        free = 0
    if limit is not None:
        free = min(free, limit)
    whole = CAP_RECORDS * RECORD_BYTES + CAP_STACKS * STACK_BYTES + CAP_BYTES
    if free >= whole + SLOTS_BYTES:
        return CAP_RECORDS, CAP_STACKS, CAP_BYTES
    share = max(free - SLOTS_BYTES, 1 << 16) / whole  # every area shrinks alike
    return (max(int(CAP_RECORDS * share), 64), max(int(CAP_STACKS * share), 16), max(int(CAP_BYTES * share), 1 << 12))


def write_json(path: str, doc) -> None:
    """A JSON file written whole (a reader never sees half of it)."""
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w") as handle:
        json.dump(doc, handle)
    os.replace(temp, path)


class FlightSink:
    """What a Tracer in the traced process hands the flight recorder: opens the mapped file for the C side,
    names threads, stores the stack thread's snapshots, notes, the loaded objects."""

    def __init__(self, files: FlightFiles) -> None:
        self.files = files
        self._lib: ctypes.CDLL | None = None
        self._lock = threading.Lock()
        self._notes: TextIO | None = None
        self._named: dict[int, str] = {}
        self._maps = ""
        self.pid = os.getpid()  # a forked child's notes are not this process's
        self.frames_in_place = False  # the C side reads the stacks of calls in place (native.frames)

    def open(self, lib: ctypes.CDLL, cupti) -> None:
        """Map the records file for the C side and write the names of calls and statuses."""
        from ctxlab.tracing import native
        from ctxlab.tracing.native.locate import function_name_address

        self._lib = lib
        lib.ctxlab_set_names(*native.naming_api(), function_name_address())
        records, stacks, size = capacities(self.files.folder, record_limit())
        error = lib.ctxlab_flight_open(self.files.path(RECORDS).encode(), records, stacks, size)
        if error:
            raise OSError(error, f"cannot map the flight recorder's file: {os.strerror(error)}",
                          self.files.path(RECORDS))
        from ctxlab.tracing.native.frames import read_in_place

        self.frames_in_place = read_in_place(lib)
        write_json(self.files.path(NAMES), cached_names(cupti))
        self.open_notes()
        self.refresh_maps()
        self.clock()

    def open_notes(self) -> None:
        """notes.jsonl, opened for the lines noted from now on (a tracer stand-in needs only this)."""
        if self._notes is None:
            self._notes = open(self.files.path(NOTES), "a", buffering=1)

    def thread_named(self, tid: int, ident: int | None, name: str) -> None:
        """A Python thread's name, for the records of its OS thread id."""
        if self._lib is None or self._named.get(tid) == name:
            return
        self._named[tid] = name
        raw = name.encode("utf-8", "replace")
        self._lib.ctxlab_flight_thread(tid, ident or 0, raw, len(raw))

    def clock(self) -> None:
        """This moment on the records' clock and the wall clock, for the parent's durations."""
        if self._lib is not None:
            self._lib.ctxlab_flight_clock(time.time_ns())

    def thread_ended(self, tid: int) -> None:
        """A thread that made calls is gone."""
        if self._lib is not None:
            self._lib.ctxlab_flight_thread_end(tid)

    def served(self, stack_id: int, frames: list, library: str | None, asked_by: str | None) -> None:
        """The stack thread's snapshot for a stack, stored before the thread is let go."""
        if self._lib is None:
            return
        lines = [f"{library or ''}\t{asked_by or ''}"]
        lines += [f"{frame[0]}\t{frame[1]}\t{frame[2] if len(frame) > 2 else ''}" for frame in frames]
        raw = "\n".join(lines).encode("utf-8", "replace")
        self._lib.ctxlab_store_text(stack_id, 0, raw, len(raw))

    def note(self, kind: str, doc: dict) -> None:
        """One line of notes.jsonl (an audit event, an uncaught exception), flushed at once."""
        handle = self._notes
        if handle is None:
            return
        if os.getpid() != self.pid:
            return
        line = json.dumps({"kind": kind, **doc}, default=str)
        with self._lock:
            handle.write(line + "\n")

    def refresh_maps(self) -> None:
        """maps.txt anew when the process loaded or unloaded a shared object."""
        try:
            with open("/proc/self/maps") as handle:
                text = "".join(line for line in handle if "/" in line and " r-xp " in line)
        except OSError:
            return
        if text != self._maps:
            self._maps = text
            temp = self.files.path(MAPS) + ".tmp"
            with open(temp, "w") as handle:
                handle.write(text)
            os.replace(temp, self.files.path(MAPS))

    def close(self) -> None:
        """The C side back on its heap, the notes file closed, the loaded objects written once more."""
        if self._lib is not None:
            self._lib.ctxlab_flight_close()
        self.refresh_maps()
        with self._lock:
            if self._notes is not None:
                self._notes.close()
                self._notes = None


def cached_names(cupti) -> dict:
    """names_of(cupti), kept in ctxlab's cache folder per installed CUPTI and cuda-bindings (they are the same
    for every run there; building them costs each audit's start)."""
    from ctxlab.tracing.native import cache_dir

    try:
        import cuda.bindings.driver as driver

        stamp = [(m.__file__, os.stat(m.__file__).st_mtime_ns) for m in (cupti, driver) if m.__file__]
    except (ImportError, OSError, AttributeError):
        return names_of(cupti)
    key = hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]  # str hashes differ between processes
    path = os.path.join(cache_dir(), f"names-{key}.json")
    try:
        with open(path) as handle:
            cached = json.load(handle)
        if cached.get("stamp") == [list(s) for s in stamp]:
            return cached["names"]
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    names = names_of(cupti)
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        write_json(path, {"stamp": [list(s) for s in stamp], "names": names})
    except OSError:
        pass
    return names


def names_of(cupti) -> dict:
    """CUPTI's callback id names by domain and the statuses' names, as JSON (keys are the numbers)."""
    out: dict = {"driver": {}, "runtime": {}, "resource": {}, "driver_status": {}, "runtime_status": {}}
    for key, enum in (("driver", cupti.driver_api_trace_cbid), ("runtime", cupti.runtime_api_trace_cbid),
                      ("resource", cupti.CallbackIdResource)):
        for member in enum:
            out[key][str(int(member))] = member.name
    try:
        from cuda.bindings.driver import CUresult
        from cuda.bindings.runtime import cudaError_t

        out["driver_status"] = {str(int(m)): m.name for m in CUresult}
        out["runtime_status"] = {str(int(m)): m.name for m in cudaError_t}
    except Exception:  # the parent names statuses by number then
        pass
    return out
