"""The flight recorder's reading side, in the parent: the records a traced child wrote into shared memory
(``ctxlab.tracing.recorder``), read whether the child is still running (a hang), has ended by itself, or died
(os._exit, a signal, SIGKILL).

``read_flight(files)`` gives a ``Flight``: the events (the same dicts the Tracer makes in-process,
``ctxlab.tracing.decode``), the threads' names, the kernels' names, each thread's call in progress (its slot)
and the counts of what did not fit. Nothing here loads CUDA; the layout mirrors ``cupti_shim.c``.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
from dataclasses import dataclass, field

from ctxlab.tracing import native
from ctxlab.tracing.decode import Sources, events_of_rows
from ctxlab.tracing.fold import AUTO_RECORDS, fold
from ctxlab.tracing.frames import USER_FRAMES, is_user_file, shown
from ctxlab.tracing.names import api_name
from ctxlab.tracing.native import objects
from ctxlab.tracing.recorder import MAPS, NAMES, RECORDS, FlightFiles
from ctxlab.tracing.threads import library_of

MAGIC = 0x314C4654584C5443
HEADER = struct.Struct("<Q4I3Q4Q3Q3QQ2IQ2Q")
SLOT = struct.Struct("<2I2IQ2IQ2Q2IQQ")
STACK_HEAD = struct.Struct("<4I")
FRAME = struct.Struct("<2I")
ITEM = struct.Struct("<2I")
ITEM_CODE, ITEM_THREAD, ITEM_FUNCTION, ITEM_STACK_TEXT, ITEM_THREAD_END, ITEM_BLOB = 1, 2, 3, 4, 5, 6
_HEADER_FIELDS = ("magic", "abi", "record_size", "stack_size", "slot_size", "cap_records", "cap_stacks", "cap_bytes",
                  "off_records", "off_stacks", "off_bytes", "off_slots", "nrecords", "nstacks", "nbytes",
                  "dropped_records", "dropped_stacks", "dropped_bytes", "heartbeat", "nslots", "pid", "opened",
                  "clock_records", "clock_wall")


class FlightUnreadable(ValueError):
    """The records file is missing, not a flight recording, or of another ABI."""


@dataclass
class OpenCall:
    """A call a thread was inside when the recording was read (entered, not returned)."""

    tid: int
    thread: str
    call: str  # the outermost call
    inner: str  # the innermost call beneath it (the same when none)
    since: int  # the outermost call's start, on the records' clock
    inner_since: int
    context: int
    held_gil: bool  # the thread held the GIL when it entered the call (CUDA calls do not release it themselves)
    stack: list = field(default_factory=list)
    inner_arg: int = 0  # the innermost call's first kept parameter (a stream, an event, a function)

    def as_dict(self, seconds: float | None = None) -> dict:
        """The JSON fields of this object (``seconds``: how long it had been inside the call)."""
        out = {"tid": self.tid, "thread": self.thread, "call": self.call, "inner": self.inner,
               "context": self.context, "held_gil": self.held_gil, "stack": self.stack}
        if seconds is not None:
            out["seconds"] = round(seconds, 3)
        return out


@dataclass
class Flight:
    """What a flight recording holds."""

    events: list[dict]
    threads: dict[int, str]
    idents: dict[int, int]  # OS thread id -> threading ident (faulthandler's "Thread 0x...")
    ended: dict[int, int]  # OS thread id -> when its end was noticed (records' clock)
    kernels: dict[int, str]  # CUfunction handle -> kernel name
    open_calls: list[OpenCall]
    counts: dict[str, int]
    pid: int
    heartbeat: int  # the last record's end (records' clock)
    clock: tuple[int, int]  # one moment as (records' clock, wall clock ns)
    folded: dict = field(default_factory=dict)  # what was folded into counts (``ctxlab.tracing.fold``), if asked
    folded_by_thread: dict[int, int] = field(default_factory=dict)

    def wall(self, t: int) -> float:
        """A time on the records' clock as Unix time (s)."""
        records, wall = self.clock
        return (wall + (t - records)) / 1e9 if wall else 0.0


def header_of(data) -> dict:
    """The header of a mapped recording, by field name."""
    if len(data) < HEADER.size:
        raise FlightUnreadable("the flight recording is empty (the program ended before its tracer started)")
    head = dict(zip(_HEADER_FIELDS, HEADER.unpack_from(data, 0), strict=True))
    if head["magic"] != MAGIC:
        raise FlightUnreadable("not a flight recording (the program ended before its tracer started)")
    if head["abi"] != native.ABI_VERSION or head["record_size"] != native.__getattr__("RECORD_DTYPE").itemsize:
        raise FlightUnreadable(f"a flight recording of another ctxlab (ABI {head['abi']}, this is "
                               f"{native.ABI_VERSION})")
    return head


class _Items:
    """The byte area's items: code objects, threads, kernels, snapshots, thread ends."""

    def __init__(self, data, base: int, length: int) -> None:
        self.codes: dict[int, tuple[str, str]] = {}
        self.threads: dict[int, str] = {}
        self.idents: dict[int, int] = {}
        self.kernels: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        at = 0
        while at + ITEM.size <= length:
            kind, size = ITEM.unpack_from(data, base + at)
            body = base + at + ITEM.size
            if size > length - at - ITEM.size:
                break
            payload = bytes(data[body:body + size])
            if kind == ITEM_CODE and size >= 16:
                ident, flen, nlen, _pad = struct.unpack_from("<4I", payload)
                self.codes[ident] = (payload[16:16 + flen].decode("utf-8", "replace"),
                                     payload[16 + flen:16 + flen + nlen].decode("utf-8", "replace"))
            elif kind == ITEM_THREAD and size >= 16:
                tid, _pad, low, high = struct.unpack_from("<4I", payload)
                self.threads[tid] = payload[16:].decode("utf-8", "replace")
                self.idents[tid] = low | (high << 32)
            elif kind == ITEM_FUNCTION and size >= 8:
                self.kernels[struct.unpack_from("<Q", payload)[0]] = payload[8:].decode("utf-8", "replace")
            elif kind == ITEM_STACK_TEXT and size >= 8:
                self.texts[struct.unpack_from("<I", payload)[0]] = payload[8:].decode("utf-8", "replace")
            elif kind == ITEM_THREAD_END and size >= 16:
                tid, _pad, low, high = struct.unpack_from("<4I", payload)
                self.ended[tid] = low | (high << 32)
            at += (ITEM.size + size + 7) & ~7


class _Maps:
    """The shared objects the child had loaded (maps.txt): an address -> the object's path."""

    def __init__(self, path: str) -> None:
        self.ranges: list[tuple[int, int, str]] = []
        try:
            with open(path) as handle:
                for line in handle:
                    parts = line.split(maxsplit=5)
                    if len(parts) == 6 and "-" in parts[0]:
                        low, high = parts[0].split("-")
                        self.ranges.append((int(low, 16), int(high, 16), parts[5].strip()))
        except (OSError, ValueError):
            pass
        self.ranges.sort()
        self.starts = [r[0] for r in self.ranges]

    def object_of(self, address: int) -> str | None:
        i = bisect.bisect_right(self.starts, address) - 1
        if i >= 0 and self.ranges[i][0] <= address < self.ranges[i][1]:
            return self.ranges[i][2]
        return None

    def callers(self, kept: bytes) -> list[str]:
        seen: list[str] = []
        for address in objects.addresses(kept):
            path = self.object_of(address)
            if path and not objects.passing(path):
                name = objects.library_name(path)
                if name not in seen:
                    seen.append(name)
        return seen


_KINDS = {native.DOMAIN_DRIVER: "driver", native.DOMAIN_RUNTIME: "runtime"}


def _named(table: dict, kind: str, value: int, fallback: str) -> str:
    return str(table.get(kind, {}).get(str(value)) or fallback)


def read_flight(files: FlightFiles, fold_records: bool | str = False, breaks: list[int] | None = None) -> Flight:
    """Everything the recording holds now (the child may still be running: what it wrote so far). With
    ``fold_records``, repeated queries and runs of identical launches are folded into counts
    (``ctxlab.tracing.fold``): what judging needs, in memory bounded by what is kept (``"auto"``: only a
    recording of more than ``fold.AUTO_RECORDS`` records, as ``ctxlab trace`` reads one); ``breaks``, the sorted
    times of events noted apart from the records, end runs of launches."""
    try:
        with open(files.path(NAMES)) as handle:
            names = json.load(handle)
    except (OSError, ValueError):
        names = {}
    try:
        records = open(files.path(RECORDS), "rb")
    except OSError as exc:
        raise FlightUnreadable(f"no flight recording ({exc.strerror})") from None
    with records as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise FlightUnreadable("the flight recording is empty (the program ended before its tracer started)")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _read(data, names, files, fold_records, breaks)


def _read(data, names: dict, files: FlightFiles, fold_records: bool | str = False,
          breaks: list[int] | None = None) -> Flight:
    import numpy

    head = header_of(data)
    items = _Items(data, head["off_bytes"], min(head["nbytes"], head["cap_bytes"]))
    maps = _Maps(files.path(MAPS))
    stacks: dict[int, tuple[list | None, str | None, str | None, str | None]] = {}

    def stack(stack_id: int) -> tuple[list | None, str | None, str | None, str | None]:
        if stack_id not in stacks:
            stacks[stack_id] = _stack(data, head, items, stack_id)
        return stacks[stack_id]

    def blob(at: int, length: int) -> bytes:
        start = head["off_bytes"] + at - 1
        return bytes(data[start:start + length])

    sources = Sources(
        function=lambda kind, cbid: _named(names, kind, cbid, f"{kind} function #{cbid} (unknown to this CUPTI)"),
        resource=lambda cbid: _named(names, "resource", cbid, f"resource event #{cbid}"),
        status=lambda kind, value: "CUDA_SUCCESS" if kind == "driver" and value == 0 else (
            "cudaSuccess" if value == 0 else _named(names, f"{kind}_status", value, str(value))),
        stack=stack, blob=blob, callers=maps.callers)
    count = min(head["nrecords"], head["cap_records"])
    dtype = native.__getattr__("RECORD_DTYPE")
    rows = numpy.frombuffer(data, dtype=dtype, count=count, offset=head["off_records"])
    folded = None
    if fold_records == "auto":
        fold_records = count > AUTO_RECORDS
    if fold_records:
        def release(upto: int) -> None:  # the pages of records already read leave the parent's memory
            end = (head["off_records"] + upto * dtype.itemsize) // mmap.PAGESIZE * mmap.PAGESIZE
            if end > 0 and hasattr(data, "madvise"):
                data.madvise(mmap.MADV_DONTNEED, 0, end)

        folded = fold(rows, lambda domain, cbid: _named(names, _KINDS.get(domain, "resource"), cbid, ""),
                      blob, release, numpy.asarray(breaks or [], dtype=numpy.uint64))
        events = events_of_rows(_gather(rows, folded.kept, release), sources)
        for index, event in zip(folded.kept.tolist(), events, strict=True):
            if index in folded.repeats:
                event["repeats"] = folded.repeats[index]
    else:
        events = events_of_rows(rows.tolist(), sources)
    del rows
    threads = dict(items.threads)
    for e in events:
        e["thread"] = threads.get(e["tid"]) or f"thread {e['tid']}"
    open_calls = []
    for i in range(min(head["nslots"], 1024)):
        fields = SLOT.unpack_from(data, head["off_slots"] + i * SLOT.size)
        (tid, depth, outer_domain, outer_cbid, outer_start, inner_domain, inner_cbid, inner_start, context,
         inner_a, gil, stack_id, _last_end, _calls) = fields
        if depth == 0 or not tid:
            continue
        frames = stack(stack_id)[0] if stack_id else None
        open_calls.append(OpenCall(
            tid=tid, thread=threads.get(tid) or f"thread {tid}",
            call=_call_name(names, outer_domain, outer_cbid), inner=_call_name(names, inner_domain, inner_cbid),
            since=outer_start, inner_since=inner_start, context=context, held_gil=bool(gil), stack=frames or [],
            inner_arg=inner_a))
    counts = {"records": count, "stacks": min(head["nstacks"], head["cap_stacks"]),
              "dropped_records": head["dropped_records"], "dropped_stacks": head["dropped_stacks"],
              "dropped_bytes": head["dropped_bytes"], "kernels_named": len(items.kernels)}
    if folded is not None and folded.total:
        counts["folded"] = folded.total
    return Flight(events=events, threads=threads, idents=items.idents, ended=items.ended, kernels=items.kernels,
                  open_calls=open_calls, counts=counts, pid=head["pid"], heartbeat=head["heartbeat"],
                  clock=(head["clock_records"], head["clock_wall"]),
                  folded=folded.as_dict() if folded is not None else {},
                  folded_by_thread=dict(folded.by_thread) if folded is not None else {})


def _gather(rows, kept, release, chunk: int = 1 << 18) -> list[tuple]:
    """The kept rows as tuples of plain ints (faster to read than numpy scalars), a chunk of the recording
    at a time (indexing the whole mapped array at once reads every page of it)."""
    import numpy

    out: list[tuple] = []
    for lo in range(0, len(rows), chunk):
        at = kept[numpy.searchsorted(kept, lo):numpy.searchsorted(kept, lo + chunk)]
        if len(at):
            out.extend(rows[lo:lo + chunk][at - lo].tolist())
        release(min(len(rows), lo + chunk))
    return out


def _call_name(names: dict, domain: int, cbid: int) -> str:
    kind = {native.DOMAIN_DRIVER: "driver", native.DOMAIN_RUNTIME: "runtime"}.get(domain, "resource")
    return api_name(kind, _named(names, kind, cbid, f"{kind} function #{cbid}"))


def _stack(data, head: dict, items: _Items, stack_id: int) -> tuple[list | None, str | None, str | None, str | None]:
    """(user frames, why there are none, library of the innermost frame, the thread it was asked for)."""
    if not 0 < stack_id <= min(head["nstacks"], head["cap_stacks"]):
        return None, "its stack was not kept (the recording was full)", None, None
    at = head["off_stacks"] + (stack_id - 1) * head["stack_size"]
    state, _tid, nframes, _asked = STACK_HEAD.unpack_from(data, at)
    if state == native.STACK_NATIVE:
        out: list[list] = []
        library = None
        for i in range(min(nframes, native.MAX_FRAMES)):
            code, line = FRAME.unpack_from(data, at + STACK_HEAD.size + i * FRAME.size)
            file, function = items.codes.get(code, ("", ""))
            if i == 0 and file:
                library = library_of(file)
            if file and len(out) < USER_FRAMES and is_user_file(file):
                out.append([shown(file), int(line), function])
        return out, None, library, None
    if state == native.STACK_SERVED:
        text = items.texts.get(stack_id)
        if text is None:
            return None, "its snapshot was not written before the program ended", None, None
        first, *rest = text.split("\n")
        library, _, asked_by = first.partition("\t")
        frames = []
        for line in rest:
            parts = line.split("\t")
            if len(parts) >= 2 and parts[1].isdigit():
                frames.append([parts[0], int(parts[1]), parts[2] if len(parts) > 2 else ""])
        return frames, None, library or None, asked_by or None
    if state == native.STACK_PENDING:
        return None, "the program ended (or was stopped) before this stack was taken", None, None
    return None, native.STACK_REASONS.get(state, f"no stack (state {state})"), None, None
