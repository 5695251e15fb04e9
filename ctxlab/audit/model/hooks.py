"""The pytest guard's reading of the driver's calls beyond their names and statuses, as the calls stream from the
tracer (``Tracer(launch_arguments=True, annotate=AuditHooks().annotate)``), with state kept across a session's
tests: an allocation made in one test and passed to a kernel in another is still known.

What it notes, as events of domain ``audit`` with the launch's stack (the rules read them, ``Stream.observed``):

- ``pointer-from-another-context``: which context owns each live allocation (``cuMemAlloc*``, ``cuMemFree*``,
  a destroyed context's memory gone with it: ``memory.Memory``, live blocks only) and, at each kernel launch
  (``cuLaunchKernel``, ``cuLaunchKernelEx``, ``cuLaunchCooperativeKernel``), which arguments hold an address
  inside an allocation of a context other than the launch's (``Memory.foreign``: every 8-byte aligned word
  of each argument, so a pointer inside a struct argument, as CuPy passes arrays, is found). The C callback
  keeps the arguments of each distinct (function, context, argument bytes) launch once; each is read once.
- ``green-context-on-two-threads``: which CUcontext handles are green contexts (``cuCtxFromGreenCtx``).

``ctxlab audit`` needs no such replay: its one pass reads the same launches against its one allocation map
(``state._read_arguments``, ``facts.Facts`` for green contexts), with the same ``LaunchReader``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ctxlab.audit.events import HOOKED_ALLOCATIONS, HOOKED_FREES, HOOKED_LAUNCHES
from ctxlab.audit.model.memory import Block, Memory, allocation_size

GREEN = "cuCtxFromGreenCtx"  # (CUcontext *pContext, CUgreenCtx hCtx)
DESTROY = "cuCtxDestroy_v2"  # (CUcontext ctx)
INSPECTED_KEPT = 1 << 16  # distinct launches remembered as inspected

FOREIGN_POINTER = "KERNEL_ARGUMENT_IN_ANOTHER_CONTEXT"
GREEN_CONTEXT = "GREEN_CONTEXT"


class AuditHooks:
    """Replays the calls' kept parameters: the allocation map, launches' foreign pointers, green handles."""

    def __init__(self) -> None:
        self.allocations = Memory(history=False)  # the live allocations, each with its context (memory.py)
        self.launches = LaunchReader()
        self._lock = threading.Lock()
        self._greens = 0

    @property
    def stats(self) -> dict:
        """The counts: launches read, foreign arguments, allocations, green contexts."""
        return {**self.launches.counts, "allocations_seen": self.allocations.count, "green_contexts": self._greens}

    def annotate(self, events: list[dict]) -> list[dict]:
        """The audit events the calls in ``events`` (one batch, in any order) give; state carries over."""
        steps = []
        for e in events:
            name, args = e.get("name", ""), e.get("args") or {}
            if e.get("domain") != "driver":
                continue
            ok = e.get("status") == "CUDA_SUCCESS"
            if name in HOOKED_ALLOCATIONS and ok:
                steps.append((e.get("end", e["start"]), 1, e))
            elif name in HOOKED_FREES:
                steps.append((e["start"], 0, e))
            elif name == DESTROY and ok:
                steps.append((e.get("end", e["start"]), 2, e))
            elif name == GREEN and ok and args.get("ctx"):
                steps.append((e.get("end", e["start"]), 3, e))
            elif name in HOOKED_LAUNCHES and ok and e.get("context"):
                # a launch that failed (no context current, a bad handle) ran no kernel: nothing was read
                steps.append((e["start"], 4, e))
        out: list[dict] = []
        with self._lock:
            for _time, kind, e in sorted(steps, key=lambda step: (step[0], step[1])):
                args = e.get("args") or {}
                if kind == 1:
                    if args.get("ptr") and e.get("context"):
                        self.allocations.allocated(args["ptr"], allocation_size(args), e)
                elif kind == 0:
                    freed = self.allocations.outer(args.get("ptr", 0))
                    if freed is not None and freed.base == args.get("ptr"):
                        self.allocations.remove(freed, e)
                elif kind == 2:
                    self.allocations.drop_context(args.get("ctx", 0))
                elif kind == 3:
                    self._greens += 1
                    out.append(note_of(e, GREEN_CONTEXT, context=args["ctx"], green=args.get("green", 0)))
                else:
                    out.extend(self.launches.read(e, self.allocations))
        return out


class LaunchReader:
    """Each distinct launch's kept arguments (function, context, argument bytes) read once against a map of the
    allocations, with the counts: the guard's hooks read the launches as they stream, the audit's one pass as it
    replays them (``state.Model``), each against its own map."""

    def __init__(self) -> None:
        self._inspected: set[tuple] = set()
        self.counts = {"launch_callbacks": 0, "launches_inspected": 0, "foreign_arguments": 0}

    def read(self, e: dict, memory: Memory, gone: Callable[[Block], bool] = lambda block: False) -> list[dict]:
        """The notes of a successful launch's arguments that point into another context's memory (``gone``:
        memory the reader knows to have gone with its context)."""
        self.counts["launch_callbacks"] += 1
        key = ((e.get("args") or {}).get("function", 0), e.get("context"), e.get("arguments"))
        if not isinstance(e.get("arguments"), bytes) or key in self._inspected:
            return []
        if len(self._inspected) >= INSPECTED_KEPT:
            self._inspected.clear()  # memory stays bounded; a repeat is read again
        self._inspected.add(key)
        self.counts["launches_inspected"] += 1
        out = []
        for index, offset, word, block in memory.foreign(e["arguments"], int(e.get("context") or 0)):
            if not gone(block):
                self.counts["foreign_arguments"] += 1
                out.append(foreign_note(e, index, offset, word, block))
        return out


def note_of(e: dict, name: str, **fields) -> dict:
    """An audit note made from call ``e``: its thread, time and user stack, and ``fields``."""
    note = {"domain": "audit", "name": name, "tid": e["tid"], "start": e["start"], **fields}
    if "stack" in e:
        note["stack"] = e["stack"]
    elif "stack_missing" in e:
        note["stack_missing"] = e["stack_missing"]
    return note


def foreign_note(e: dict, index: int, offset: int, value: int, found: Block) -> dict:
    """The note of a launch argument pointing into another context's memory (the rule reads it)."""
    note = note_of(e, FOREIGN_POINTER, launch=e["name"], context=int(e.get("context") or 0),
                   context_uid=int(e.get("context_uid") or 0), function=(e.get("args") or {}).get("function", 0),
                   parameter=index, offset=offset, pointer=value, base=found.base, size=found.size,
                   owner=found.context, allocation_correlation=found.made.get("correlation", 0))
    for key in ("thread", "seq"):  # the launch's, where the stream had named it (the one pass)
        if key in e:
            note[key] = e[key]
    return note
