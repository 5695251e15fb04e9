"""The ordering model: what the recorded program ordered before what, across streams, events, the host and
memory (happens-before), and the ordering hazards that follow.

Read it top to bottom, as PyTorch's ``torch/cuda/_sanitizer.py``:

1. **Timelines and clocks.** Each stream is a timeline (the legacy default stream of a context, the per-thread
   default stream of a thread, each created stream by handle and generation). Each timeline has a vector clock
   (timeline -> tick). An operation enqueued on a stream ticks that stream and happens after everything the
   stream's clock holds. The host has one clock: a synchronisation that *returned* means the work it waited for
   has finished, a fact every host thread sees from then on (merged at the call's end time, not its start).
2. **What orders what** (the CUDA Programming Guide's stream semantics and the Driver API's Stream and Event
   Management):
   - stream order: operations on one stream run in issue order;
   - issue: an operation enqueued after the host saw work finish happens after that work (the host clock is
     merged into the stream's);
   - events: ``cuEventRecord`` snapshots the stream's clock; ``cuStreamWaitEvent`` merges the snapshot of the
     event's latest record into the waiting stream; a wait on an event never recorded orders nothing
     (``cudaStreamWaitEvent``: "if the event has not been recorded, the call has no effect");
   - host synchronisation: stream, event (and a query that returned success), context and device
     synchronisation merge what they waited for into the host clock; so do the calls that synchronise the
     device implicitly (``cudaFree``/``cuMemFree``, ``cudaHostUnregister``) and the synchronous copies;
   - the legacy default stream: an operation on it waits for every blocking stream of its context, and an
     operation on a blocking stream waits for it (streams made with ``CU_STREAM_NON_BLOCKING`` do neither); the
     per-thread default stream is a blocking stream;
   - graphs: operations on a capturing stream are recorded into the graph, not run; a graph launch runs them
     on the launch stream, with the memory they were captured with.
3. **Memory.** Driver allocations (``cuMemAlloc*``, ``cudaMalloc``, stream-ordered ones) and the blocks a
   library pool hands out inside them (CuPy's and PyTorch's, noted by the audit's allocator hooks). Each
   operation touches ranges: a copy its destination (written) and source (read), a memset its destination,
   a kernel every live allocation one of its 8-byte argument words points into (``cuFuncGetParamInfo``'s sizes;
   conservative: a use, and the first kernel to touch a fresh block is its writer).
4. **Hazards** (``Hazard``), each with the operation that found it and the earlier one that should have been
   ordered before it (its because):
   - ``freed``: memory freed (stream-ordered, or back to a pool on its allocation stream) while a use on another
     stream is not ordered before the free;
   - ``unordered``: an access after a write on another timeline that is not ordered before it, or a write while an
     earlier use on another timeline is not ordered before it;
   - ``wait-unrecorded``: a stream wait on an event never recorded;
   - ``graph-freed``: a graph launched after memory one of its captured operations touches was freed;
   - ``ipc-interior``: an IPC handle exported for a pointer that is not its allocation's base.

The model is fed one call at a time (``feed``), in time order, and holds only live objects: a freed
allocation's uses go with it; per range and timeline only the latest use is kept (a later use on the same
timeline is ordered after an earlier one, so the latest is the one to check).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ctxlab.audit import events as calls
from ctxlab.audit.events import LIBRARY_READY, LIBRARY_WAIT, POOL_ALLOC, POOL_FREE, RECORD_STREAM
from ctxlab.audit.model.memory import Block, Clock, Memory, Timeline, Use, allocation_size

LEGACY_HANDLES = (0, 1)  # NULL and CU_STREAM_LEGACY
PER_THREAD = 2  # CU_STREAM_PER_THREAD / cudaStreamPerThread
NON_BLOCKING = 1  # CU_STREAM_NON_BLOCKING / cudaStreamNonBlocking
OK = ("CUDA_SUCCESS", "cudaSuccess")
DEVICE_TO_HOST = 2  # cudaMemcpyDeviceToHost
TO_HOST_KEPT = 4096  # copies to the host remembered for a library's host read (the latest sources)
FREED, UNORDERED, WAIT_UNRECORDED, GRAPH_FREED, IPC_INTERIOR = (
    "freed", "unordered", "wait-unrecorded", "graph-freed", "ipc-interior")


def merge(into: Clock, other: Clock) -> None:
    """``into`` becomes the least clock after both."""
    for timeline, tick in other.items():
        if tick > into.get(timeline, 0):
            into[timeline] = tick


@dataclass(eq=False)
class Capture:
    """A graph being captured: the operations recorded into it, with the blocks they touch."""

    begin: dict
    uses: list[tuple[Block, bool, dict]] = field(default_factory=list)  # (block, written, operation)


@dataclass(eq=False)
class Stream:
    """A stream's timeline: its clock, whether it synchronises with the legacy stream, its context."""

    timeline: Timeline
    context: int
    blocking: bool = True
    clock: Clock = field(default_factory=dict)
    capture: Capture | None = None
    waiting: bool = False  # a wait on a value is queued: what follows runs when something writes it

    def tick(self) -> int:
        """One more operation on the stream: its tick."""
        self.clock[self.timeline] = self.clock.get(self.timeline, 0) + 1
        return self.clock[self.timeline]


@dataclass
class Event:
    """An event: the call that made it, and the clock of its latest record (None: never recorded)."""

    made: dict
    snapshot: Clock | None = None
    capture: Capture | None = None  # recorded on a capturing stream: a fork point of that capture


@dataclass(frozen=True)
class Hazard:
    """An ordering hazard: its kind, the operation that found it, the one that should have been ordered before
    it (its cause), and what the model saw (the memory, the streams)."""

    kind: str
    event: dict
    cause: dict
    detail: dict


def describe(timeline: Timeline) -> str:
    """A timeline as a report names it."""
    if timeline[0] == "legacy":
        return "the legacy default stream"
    if timeline[0] == "per-thread":
        return "the per-thread default stream"
    return f"stream {timeline[1]:#x}"


class Ordering:
    """The happens-before model, fed the recorded calls and the hooks' notes in time order (``feed``)."""

    def __init__(self, memory: Memory | None = None) -> None:
        self.host: Clock = {}
        self.streams: dict[Timeline, Stream] = {}
        self.generations: dict[int, int] = {}
        self.events: dict[int, Event] = {}
        self.memory = memory if memory is not None else Memory()  # the one pass shares the state model's
        self.graphs: dict[int, list[tuple[Block, bool, dict]]] = {}  # CUgraph and CUgraphExec -> captured uses
        self.hazards: list[Hazard] = []
        self._pending: list[tuple[int, int, Clock]] = []  # (end time, seq, clock): syncs not yet returned
        self._seq = 0
        self._reported: set[tuple] = set()
        self._runtime_end: dict[object, int] = {}  # thread -> end of its modelled runtime call in progress
        self._context_of: dict[object, int] = {}  # thread -> the context of its latest call (its current one)
        self._to_host: dict[int, tuple[int, Clock]] = {}  # device address -> (start, clock) of its latest copy out
        self.counts = {"operations": 0, "uses": 0, "syncs": 0}

    # ------------------------------------------------------------------ timelines and clocks

    def stream(self, e: dict, handle: int | None, owner: int = 0) -> Stream:
        """The stream an operation names (its handle, with the call's context and thread). A hook's note is
        made in Python, outside any call, and names no context: its thread's current one is the context of
        that thread's latest successful call (a pool's block on the legacy stream is on that context's legacy
        stream); on a thread with none yet (PyTorch's autograd thread freeing a tensor), a default stream is
        that of ``owner``, the context of the allocation the block lies in (a named stream's context is not
        guessed)."""
        value = int(handle or 0)
        context = int(e.get("context") or 0) or self._context_of.get(e.get("tid"), 0) or (
            owner if value == PER_THREAD or value in LEGACY_HANDLES else 0)
        if value == PER_THREAD or (value in LEGACY_HANDLES and calls.per_thread(e.get("name", ""))):
            key: Timeline = ("per-thread", context, e.get("tid"))
        elif value in LEGACY_HANDLES:
            key = ("legacy", context)
        else:
            key = ("stream", value, self.generations.get(value, 0))
        known = self.streams.get(key)
        if known is None:
            known = self.streams[key] = Stream(key, context)
        return known

    def next_clock(self, s: Stream) -> Clock:
        """The clock an operation enqueued on ``s`` now starts from: what the host saw finish, the stream's own
        order, and the legacy stream's implicit synchronisation with the blocking streams of its context."""
        clock = dict(s.clock)
        merge(clock, self.host)
        if s.timeline[0] == "legacy":
            for other in self.streams.values():
                if other.blocking and other.context == s.context and other is not s:
                    merge(clock, other.clock)
        elif s.blocking:
            legacy = self.streams.get(("legacy", s.context))
            if legacy is not None:
                merge(clock, legacy.clock)
        return clock

    def _issue(self, s: Stream) -> int:
        s.clock = self.next_clock(s)
        return s.tick()

    def _host_sees(self, e: dict, clock: Clock) -> None:
        """A synchronisation: what ``clock`` holds has finished once the call returns (every thread sees it)."""
        self._seq += 1
        self.counts["syncs"] += 1
        heapq.heappush(self._pending, (int(e.get("end", e.get("start", 0))), self._seq, dict(clock)))

    def _returned_by(self, t: int) -> None:
        while self._pending and self._pending[0][0] <= t:
            merge(self.host, heapq.heappop(self._pending)[2])

    # ------------------------------------------------------------------ hazards

    def _hazard(self, kind: str, e: dict, cause: dict, block: Block | None, **detail) -> None:
        key = (kind, id(block) if block is not None else id(cause), detail.get("first"), detail.get("second"))
        if key in self._reported:
            return
        self._reported.add(key)
        if block is not None:
            detail.update(base=block.base, size=block.end - block.base, made=block.made)
        self.hazards.append(Hazard(kind, e, cause, detail))

    def _touch(self, s: Stream, tick: int, e: dict, block: Block, write: bool, address: int | None) -> None:
        """An operation on ``s`` at ``tick`` uses ``block``: an access after another timeline's write that is
        not ordered before it, or a write after another timeline's use not ordered before it, is a hazard."""
        block.fresh = False
        self.counts["uses"] += 1
        use = Use(s.timeline, tick, e, write, gated=s.waiting, address=address)
        if use.gated:  # when it runs depends on a write to a value the model cannot tie to it: no judgement
            self._record(block, s, use)
            return
        last = block.writer
        if (last is not None and not last.gated and last.timeline != s.timeline and last.same_memory(block, address)
                and not last.ordered_before(s.clock)):
            self._hazard(UNORDERED, e, last.event, block, first=last.timeline, second=s.timeline, write=write,
                         after="write")
        elif write:
            for other in block.uses.values():
                if (not other.gated and other.timeline != s.timeline and other.same_memory(block, address)
                        and not other.ordered_before(s.clock)):
                    self._hazard(UNORDERED, e, other.event, block, first=other.timeline, second=s.timeline,
                                 write=True, after="use")
                    break
        self._record(block, s, use)

    def _record(self, block: Block, s: Stream, use: Use) -> None:
        block.uses[s.timeline] = use
        if use.write:
            block.writer = use

    def _free(self, block: Block, e: dict, at: Clock | None) -> None:
        """A block freed; with ``at``, the clock its memory may be reused from: a use not ordered before it is a
        hazard."""
        if at is not None:
            late = next((u for u in block.all_uses() if not u.gated and not u.ordered_before(at)), None)
            if late is not None:
                self._hazard(FREED, e, late.event, block, first=late.timeline,
                             second=block.stream or ("host",))
        self.memory.remove(block, e)

    # ------------------------------------------------------------------ the calls

    def feed(self, e: dict) -> None:
        """One recorded call (or a hook's note), in time order."""
        start = int(e.get("start", 0))
        self._returned_by(start)
        domain = e.get("domain")
        if domain == "audit":
            self._note(e)
            return
        if domain not in ("driver", "runtime") or e.get("status") not in OK:
            return
        if e.get("context"):
            self._context_of[e.get("tid")] = int(e["context"])
        name = calls.base_name(e.get("name", ""))
        if name not in calls.MODELLED:
            return
        tid = e.get("tid")
        # a runtime launch's driver launch has its arguments
        if domain == "runtime" and name not in calls.KERNEL_LAUNCHES:
            self._runtime_end[tid] = int(e.get("end", start))
        elif e.get("from") == "callback" and self._runtime_end.get(tid, -1) >= start:
            return  # the driver call beneath a runtime call the model already took
        self.counts["operations"] += 1
        self._call(e, name, e.get("args") or {})

    def _call(self, e: dict, name: str, args: dict) -> None:
        if name in calls.STREAM_WORK:
            self._work(e, name, args)
        elif name in calls.EVENT_RECORDS:
            s = self.stream(e, args.get("stream"))
            event = self.events.setdefault(int(args.get("event") or 0), Event(e))
            if s.capture is not None:
                event.snapshot, event.capture = {}, s.capture
            else:
                self._issue(s)
                event.snapshot, event.capture = dict(s.clock), None
        elif name in calls.EVENT_WAITS:
            self._wait(e, args)
        elif name in calls.SEES_STREAM_DONE:
            s = self.stream(e, args.get("stream"))
            self._host_sees(e, self.next_clock(s) if s.timeline[0] == "legacy" else s.clock)
            s.waiting = False  # it returned: whatever its waits waited for was written
        elif name in calls.SEES_EVENT_DONE:
            synced = self.events.get(int(args.get("event") or 0))
            if synced is not None and synced.snapshot is not None:
                self._host_sees(e, synced.snapshot)
        elif name in calls.SEES_CONTEXT_DONE:
            self._device_sync(e)
            block = self.memory.outer(int(args.get("ptr") or 0)) if name in calls.SYNC_FREES else None
            if block is not None:
                self.memory.remove(block, e)  # after the device finished: nothing still uses it
        elif name in calls.ALLOCS:
            self.memory.allocated(int(args.get("ptr") or 0), allocation_size(args), e)
        elif name in calls.ASYNC_ALLOCS:
            s = self.stream(e, args.get("stream"))
            self.memory.allocated(int(args.get("ptr") or 0), int(args.get("size") or 0), e, stream=s.timeline)
        elif name in calls.ASYNC_FREES:
            s = self.stream(e, args.get("stream"))
            self._issue(s)
            block = self.memory.outer(int(args.get("ptr") or 0))
            if block is not None:
                self._free(block, e, s.clock)
        elif name in calls.STREAM_CREATES:
            self._created(e, args)
        elif name in calls.EVENT_CREATES:
            if args.get("event"):
                self.events[int(args["event"])] = Event(e)
        elif name in calls.EVENT_DESTROYS:
            self.events.pop(int(args.get("event") or 0), None)
        else:
            self._graphs(e, name, args)

    def _created(self, e: dict, args: dict) -> None:
        handle = int(args.get("stream") or 0)
        if handle:  # a handle reused after a destroy is a new timeline
            self.generations[handle] = self.generations.get(handle, 0) + 1
            self.stream(e, handle).blocking = not int(args.get("flags") or 0) & NON_BLOCKING

    def _graphs(self, e: dict, name: str, args: dict) -> None:
        if name in calls.CAPTURE_BEGINS:
            self.stream(e, args.get("stream")).capture = Capture(e)
        elif name in calls.CAPTURE_ENDS:
            capture = self.stream(e, args.get("stream")).capture
            for s in self.streams.values():  # the streams it forked into end with it
                if s.capture is capture:
                    s.capture = None
            if capture is not None and args.get("graph"):
                self.graphs[int(args["graph"])] = capture.uses
        elif name in calls.INSTANTIATES:
            if args.get("exec") and args.get("graph") in self.graphs:
                self.graphs[int(args["exec"])] = self.graphs[args["graph"]]
        elif name in calls.IPC_EXPORTS:
            address = int(args.get("ptr") or 0)
            outer = self.memory.outer(address)
            if outer is not None and outer.base != address:
                self._hazard(IPC_INTERIOR, e, outer.made, outer, pointer=address, offset=address - outer.base)

    def _wait(self, e: dict, args: dict) -> None:
        s = self.stream(e, args.get("stream"))
        event = self.events.get(int(args.get("event") or 0))
        if event is None:
            return  # made before tracing began: what it holds is not known
        if event.snapshot is None:
            self._hazard(WAIT_UNRECORDED, e, event.made, None, event=int(args.get("event") or 0),
                         second=s.timeline)
        elif event.capture is not None:  # a fork of a capture: this stream captures into the same graph
            s.capture = event.capture
        else:
            self._issue(s)
            merge(s.clock, event.snapshot)

    def _device_sync(self, e: dict) -> None:
        clock: Clock = {}
        context = int(e.get("context") or 0)
        for s in self.streams.values():
            if s.context == context or not context:
                merge(clock, s.clock)
                s.waiting = False
        self._host_sees(e, clock)

    def _work(self, e: dict, name: str, args: dict) -> None:
        """Work enqueued on a stream: kernels, copies, memsets, host functions, graph launches."""
        synchronous = name in calls.SYNC_COPIES or name in calls.SYNC_SETS
        s = self.stream(e, None if synchronous else args.get("stream"))
        if name in calls.KERNEL_LAUNCHES:
            touched = self.memory.kernel_touches(e)
        elif name in calls.ASYNC_COPIES or name in calls.SYNC_COPIES:
            touched = self.memory.copy_touches(args)
        elif name in calls.ASYNC_SETS or name in calls.SYNC_SETS:
            block = self.memory.at(int(args.get("ptr") or 0))
            touched = [(block, True, int(args["ptr"]))] if block is not None else []
        elif name in calls.GRAPH_LAUNCHES:
            self._graph_launch(e, s, args)
            return
        else:  # a host function, a wait or write of a value: in stream order, touching what the model cannot see
            touched = []
        if s.capture is not None:
            s.capture.uses.extend((b, w, e) for b, w, _ in touched)
            return
        tick = self._issue(s)
        for block, write, address in touched:
            self._touch(s, tick, e, block, write, address)
        if name in calls.ASYNC_COPIES:
            self._copied_to_host(e, name, args, s)
        if name in calls.VALUE_WAITS:
            s.waiting = True
        if synchronous and self._returns_after_the_work(name, args):
            self._host_sees(e, s.clock)

    def _returns_after_the_work(self, name: str, args: dict) -> bool:
        """Whether a "synchronous" copy or memset returns only once the work before it is done: a copy to host
        memory does ("API synchronization behavior"); a memset of device memory, a device-to-device copy and a
        copy from pageable host memory may return before."""
        return name not in calls.SYNC_SETS and self._device_to_host(name, args)

    def _device_to_host(self, name: str, args: dict) -> bool:
        """Whether a copy goes from device memory to the host: by its name or its kind, else (a copy that says
        neither) by which of its ends lies in device memory the model knows."""
        if name in ("cuMemcpyDtoH", "cuMemcpyDtoHAsync") or args.get("kind") == DEVICE_TO_HOST:
            return True
        to_device = self.memory.at(int(args.get("ptr") or 0)) is not None
        from_device = self.memory.at(int(args.get("src") or 0)) is not None
        return from_device and not to_device and name not in ("cuMemcpyHtoD", "cuMemcpyDtoD", "cuMemcpyHtoDAsync",
                                                              "cuMemcpyDtoDAsync")

    def _graph_launch(self, e: dict, s: Stream, args: dict) -> None:
        tick = self._issue(s)
        for block, write, captured in self.graphs.get(int(args.get("exec") or 0), ()):
            if block.gone is not None:
                self._hazard(GRAPH_FREED, e, block.gone, block, captured=captured)
            else:
                self._touch(s, tick, e, block, write, None)

    def _note(self, e: dict) -> None:
        """What the audit's allocator and library hooks noted in Python."""
        name, ptr = e.get("name"), int(e.get("ptr") or 0)
        if name == POOL_ALLOC:
            outer = self.memory.outer(ptr)
            s = self.stream(e, int(e.get("stream") or 0), owner=outer.context if outer is not None else 0)
            self.memory.allocated(ptr, int(e.get("size") or 0), e, stream=s.timeline, pool=True)
            block = self.memory.at(ptr)
            if s.capture is not None and e.get("library") == "PyTorch" and block is not None and block.base == ptr:
                block.private = s.capture  # PyTorch serves a capture from the graph's private pool
        elif name == POOL_FREE:
            block = self.memory.at(ptr)
            if block is not None and block.base == ptr and block.stream is not None:
                self._free(block, e, self._reuse_clock(block))
        elif name == RECORD_STREAM:
            block = self.memory.at(ptr)
            if block is not None:
                block.waits_for.append(self.stream(e, int(e.get("stream") or 0)).timeline)
        elif name == LIBRARY_WAIT:
            made = e["made"] if isinstance(e.get("made"), dict) else e
            self._hazard(WAIT_UNRECORDED, e, made, None, event=0, library=str(e.get("library") or ""))
        elif name == LIBRARY_READY:
            self._library_ready(e)

    def _library_ready(self, e: dict) -> None:
        """A library's array read on the host: the copy to the host that the read queued (from the array's own
        pointer, after the read began) has finished, and with it what its stream's clock held when it was queued
        (the work that wrote the array, which the library made the copy wait for). Other uses of the memory are
        not waited for by the read, and a read queuing no copy orders nothing."""
        began, ptrs = e.get("began", e.get("start", 0)), e.get("ptrs")
        if not isinstance(began, int) or not isinstance(ptrs, list):
            return  # a recording edited by hand: nothing to go by
        for ptr in ptrs:
            copied = self._to_host.get(ptr) if isinstance(ptr, int) else None
            if copied is not None and began <= copied[0] <= int(e.get("start", 0)):
                self._host_sees(e, copied[1])

    def _copied_to_host(self, e: dict, name: str, args: dict, s: Stream) -> None:
        """An asynchronous copy from device memory to the host: its source and its stream's clock, for a library's
        host read that waits for it (``_library_ready``); the latest ``TO_HOST_KEPT`` sources are kept."""
        src = int(args.get("src") or 0)
        if not self._device_to_host(name, args) or self.memory.at(src) is None:
            return
        self._to_host.pop(src, None)
        self._to_host[src] = (int(e.get("start", 0)), dict(s.clock))
        if len(self._to_host) > TO_HOST_KEPT:
            del self._to_host[next(iter(self._to_host))]

    def _reuse_clock(self, block: Block) -> Clock:
        """The clock from which a pool may hand a freed block out again: the pool reuses it for work on its
        allocation stream (what an operation enqueued there now would be ordered after), and, after
        record_stream, once the recorded streams' work so far is done."""
        s = self.streams.get(block.stream) if block.stream else None
        at = self.next_clock(s) if s is not None else dict(self.host)
        for waited in block.waits_for:
            other = self.streams.get(waited)
            if other is not None:
                merge(at, other.clock)
        return at


def ordering_of(events: list[dict]) -> Ordering:
    """The model of a whole recorded run (its events, sorted by start here)."""
    model = Ordering()
    for e in sorted(events, key=lambda e: e.get("start", 0)):
        model.feed(e)
    return model
