"""The ordering rules: the hazards the happens-before model (``ctxlab.audit.model.ordering``) finds, as findings whose
because is the operation that should have been ordered before the one found.

- ``freed-while-in-use``: memory freed (``cuMemFreeAsync``, or a library pool's block handed back) while an
  operation on another stream that uses it is not ordered before the free;
- ``unordered-access``: an access on one stream after a write on another (or a write after a use) with no
  event, stream wait or synchronisation between;
- ``wait-orders-nothing``: a stream wait on an event that was never recorded (the wait has no effect);
- ``graph-replays-freed``: a graph launched after memory its captured work touches was freed;
- ``ipc-interior-pointer``: an IPC handle made for a pointer inside an allocation (the handle names the
  allocation; the peer gets its base);
- ``library-not-watched``: a library hook the model needs could not be installed, so what goes through that
  library's pool or events is not judged (the report says so rather than reading clean).

Every message is built from the calls and values recorded: the two operations, their streams, the memory
(its address, size and the call that made it).
"""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream, thread_of
from ctxlab.audit.events import LIBRARY_NOT_WATCHED
from ctxlab.audit.model.one_pass import ordering
from ctxlab.audit.model.ordering import (
    FREED,
    GRAPH_FREED,
    IPC_INTERIOR,
    UNORDERED,
    WAIT_UNRECORDED,
    Hazard,
    describe,
)
from ctxlab.audit.rules.rule import NO_CLAIM, Rule

# What the ordering rules see, and so what they cannot.
ORDERING_SEES = ("Follows streams, events, copies, memsets, frees and graphs made while tracing, with the "
                 "blocks CuPy's and PyTorch's pools hand out (the audit's allocator hooks); a kernel's memory is "
                 "read from the arguments of driver launches (CuPy, Numba, cuda.bindings; PyTorch's kernels show "
                 "none), and a kernel is taken to write a block nothing touched before or its only block, else to "
                 "read it. Host synchronisation counts for every thread once it returned; order made by other means "
                 "(a spin on host memory, cuStreamWaitValue) is not seen.")


def op(e: dict) -> str:
    """An operation as a message names it: the call (or what a library hook saw) and its thread."""
    return f"{e.get('call') or e.get('name', '?')} on thread {thread_of(e)}"


def memory(h: Hazard) -> str:
    """``N bytes at 0x... (made by call on thread T)``."""
    d = h.detail
    made = d.get("made") or {}
    return f"{d.get('size', 0)} bytes at {d.get('base', 0):#x} (made by {op(made)})"


def _hits(s: Stream, kind: str) -> list[Hazard]:
    return [h for h in ordering(s).hazards if h.kind == kind]


def _hit(h: Hazard, message: str, cause_what: str) -> Hit:
    return Hit(h.event, message, calls=(h.event, h.cause), cause=h.cause, cause_what=cause_what)


def freed_while_in_use(s: Stream) -> list[Hit]:
    """Memory freed while a use on another stream is not ordered before the free."""
    out = []
    for h in _hits(s, FREED):
        on, where = describe(h.detail["first"]), h.detail.get("second")
        reuse = (f"the memory goes back for work on {describe(where)}" if where and where[0] != "host"
                 else "the memory may be handed out again at once")
        out.append(_hit(h, f"{op(h.event)} freed {memory(h)} while {op(h.cause)} on {on} still used it, and nothing "
                           f"ordered that use before the free: {reuse}, and the next owner's work can overwrite it "
                           f"while the use runs (silent wrong values). Order the use before the free: record an "
                           f"event after the use and wait for it on the freeing stream, tell the pool the other "
                           f"stream uses it (PyTorch: tensor.record_stream(stream)), keep a reference until the "
                           f"other stream is synchronised",
                        f"{op(h.cause)} used the memory on {on}, and nothing ordered it before the free"))
    return out


FREED_WHILE_IN_USE_RULE = Rule(
    "freed-while-in-use", "error", "Memory freed while another stream's work still uses it",
    "A stream-ordered free (cuMemFreeAsync) is ordered only on its own stream, and a pool (CuPy's, PyTorch's "
    "caching allocator) hands a freed block to the next allocation on the stream it was allocated on. Work "
    "on another stream that uses the memory and is not ordered before the free can read what the next owner "
    "writes, or overwrite it: silent wrong values, no error.",
    NO_CLAIM, freed_while_in_use, ORDERING_SEES)


def unordered_access(s: Stream) -> list[Hit]:
    """An access after another stream's write (or a write after its use) with nothing ordering the two."""
    out = []
    for h in _hits(s, UNORDERED):
        first, second = describe(h.detail["first"]), describe(h.detail["second"])
        did = "wrote" if h.detail.get("after") == "write" else "used"
        does = "writes" if h.detail.get("write") else "reads"
        out.append(_hit(h, f"{op(h.event)} {does} {memory(h)} on {second}, which {op(h.cause)} {did} on {first}, "
                           f"with no event wait or synchronisation between them: the GPU may run them in either "
                           f"order (silent wrong values). Record an event on {first} after the first and make "
                           f"{second} wait for it (cuStreamWaitEvent, Stream.wait_event), or synchronise {first} "
                           f"before the second is enqueued",
                        f"{op(h.cause)} {did} the memory on {first}, and nothing ordered it before"))
    return out


UNORDERED_ACCESS_RULE = Rule(
    "unordered-access", "error", "Two streams access the same memory with nothing ordering them",
    "Work on different streams runs in any order unless an event wait, a synchronisation or the legacy "
    "default stream's implicit synchronisation orders it. A read after another stream's write, or a write "
    "after another stream's use, with none of those between, races: the result depends on timing.",
    NO_CLAIM, unordered_access, ORDERING_SEES, superseded_by=("unordered-handover",))


def wait_orders_nothing(s: Stream) -> list[Hit]:
    """A stream wait on an event that was never recorded."""
    out = []
    for h in _hits(s, WAIT_UNRECORDED):
        library = h.detail.get("library")
        second = h.detail.get("second")
        waiter = f" made {describe(second)} wait" if second else " waited"
        how = (f"{library} makes no CUDA call for it (its event is created at its first record), so"
               if library else "cudaStreamWaitEvent: \"if the event has not been recorded, the call has no "
                               "effect\", so")
        out.append(_hit(h, f"{op(h.event)}{waiter} on an event that was never recorded: {how} the work enqueued "
                           f"after the wait is ordered after nothing. Record the event on the producing stream "
                           f"after the work it stands for (cuEventRecord, Stream.record(event), "
                           f"event.record(stream)) before any stream waits for it",
                        f"{op(h.cause)} made the event, and nothing recorded it before the wait"))
    return out


WAIT_ORDERS_NOTHING_RULE = Rule(
    "wait-orders-nothing", "warning", "A stream waits on an event that was never recorded",
    "cuStreamWaitEvent on an event with no record does nothing, and a library's event that was never "
    "recorded (PyTorch creates its CUDA event at the first record) makes no call at all: the work after the "
    "wait is ordered after nothing, though the code reads as if it waited.",
    NO_CLAIM, wait_orders_nothing,
    "Knows events created and recorded while tracing; an event made before tracing began is not judged. "
    "PyTorch's torch.cuda.Event.wait is seen through the audit's hook.")


def graph_replays_freed(s: Stream) -> list[Hit]:
    """A graph launched after memory its captured work touches was freed."""
    out = []
    for h in _hits(s, GRAPH_FREED):
        captured = h.detail.get("captured") or {}
        out.append(_hit(h, f"{op(h.event)} replayed a graph whose captured {op(captured)} touches {memory(h)}, "
                           f"freed by {op(h.cause)} before the launch: a replay works on the addresses it was "
                           f"captured with, which may now hold another array. Keep every captured input and "
                           f"output alive (and in place) for as long as the graph is launched",
                        f"{op(h.cause)} freed memory the graph was captured with"))
    return out


GRAPH_REPLAYS_FREED_RULE = Rule(
    "graph-replays-freed", "error", "A CUDA graph replayed after memory it was captured with was freed",
    "A graph's kernels and copies work on the addresses they were captured with. Freeing a captured input or "
    "output and launching the graph again makes the replay read or write memory that may now belong to "
    "another array.",
    NO_CLAIM, graph_replays_freed, ORDERING_SEES)


def ipc_interior_pointer(s: Stream) -> list[Hit]:
    """An IPC handle made for a pointer inside an allocation, not at its base."""
    out = []
    for h in _hits(s, IPC_INTERIOR):
        d = h.detail
        out.append(_hit(h, f"{op(h.event)} exported {d['pointer']:#x}, {d['offset']} bytes into the allocation of "
                           f"{memory(h)}: an IPC handle names the whole allocation, and the peer that opens it "
                           f"gets the allocation's base, not this pointer, and reads the wrong bytes. Send the "
                           f"offset beside the handle (PyTorch's storage sharing does), or export a pointer that "
                           f"is the base of its own allocation",
                        f"{op(h.cause)} made the allocation the exported pointer lies inside"))
    return out


IPC_INTERIOR_POINTER_RULE = Rule(
    "ipc-interior-pointer", "warning", "An IPC handle exported for a pointer inside an allocation",
    "cuIpcGetMemHandle names the whole allocation: the process that opens the handle maps the allocation's "
    "base. A pointer into a pool's block inside a larger allocation (CuPy's and PyTorch's pools) reaches the "
    "peer as the wrong address unless its offset is sent beside the handle.",
    NO_CLAIM, ipc_interior_pointer,
    "Knows allocations made while tracing; the offset the program may send beside the handle is not seen, "
    "so a program that does send it is reported too (the finding says the offset to send).")


POOL_NOT_JUDGED = ("its blocks handed out and back are not in the ordering model: memory freed while in use or "
                   "accessed unordered through them is not judged")
NOT_JUDGED = {"caching allocator": POOL_NOT_JUDGED, "memory pool": POOL_NOT_JUDGED,
              "Tensor.record_stream": "record_stream is not seen: a block it orders may be reported as freed "
                                      "while in use",
              "torch.cuda.Event": "a wait on an event never recorded (which makes no CUDA call) is not seen"}


def library_not_watched(s: Stream) -> list[Hit]:
    """A hook the ordering model needs that could not be installed: what it would have seen is not judged."""
    return [Hit(e, f"the audit could not watch {e.get('library', '?')}'s {e.get('part', '?')} "
                   f"({e.get('error', 'no reason recorded')}): "
                   f"{NOT_JUDGED.get(str(e.get('part')), 'what it does is not judged')}. "
                   f"The program ran as it would without the audit",
                cause_missing="the library's internals differ from those the audit knows (its version)")
            for e in s.observed if e.get("name") == LIBRARY_NOT_WATCHED]


LIBRARY_NOT_WATCHED_RULE = Rule(
    "library-not-watched", "info", "A library's pool or events the audit could not watch",
    "The ordering model learns CuPy's and PyTorch's pool blocks, record_stream and PyTorch's events through "
    "hooks installed as the library is imported. Where a version's internals differ, the hook is not "
    "installed and the library runs untouched; the hazards that need it are not judged, and this finding "
    "says which, with the error, so a clean report does not read as a judged one.",
    NO_CLAIM, library_not_watched,
    "Only the libraries the audit hooks (CuPy, PyTorch); another library's own pool is not watched and not "
    "reported here.")
