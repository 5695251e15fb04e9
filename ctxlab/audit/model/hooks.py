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
(``state._read_arguments``, ``facts.Facts`` for green contexts), with the same ``foreign_note``.
"""

from __future__ import annotations

import threading

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
        self._lock = threading.Lock()
        self._inspected: set[tuple] = set()  # (function, context, argument bytes) inspected: once each
        self.stats = {"launch_callbacks": 0, "launches_inspected": 0, "foreign_arguments": 0,
                      "allocations_seen": 0, "green_contexts": 0}

    def summary(self) -> dict:
        """The counts, for the audit's stats."""
        return {**self.stats, "allocations_seen": self.allocations.count}

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
                    self.stats["green_contexts"] += 1
                    out.append(self._note(e, GREEN_CONTEXT, context=args["ctx"], green=args.get("green", 0)))
                else:
                    self.stats["launch_callbacks"] += 1
                    key = (args.get("function", 0), e.get("context"), e.get("arguments"))
                    if "arguments" in e and key not in self._inspected:
                        if len(self._inspected) >= INSPECTED_KEPT:
                            self._inspected.clear()  # memory stays bounded; a repeat is inspected again
                        self._inspected.add(key)
                        self.stats["launches_inspected"] += 1
                        out.extend(self._inspect(e))
        return out

    @staticmethod
    def _note(e: dict, name: str, **fields) -> dict:
        note = {"domain": "audit", "name": name, "tid": e["tid"], "start": e["start"], **fields}
        if "stack" in e:
            note["stack"] = e["stack"]
        elif "stack_missing" in e:
            note["stack_missing"] = e["stack_missing"]
        return note

    def _inspect(self, e: dict) -> list[dict]:
        context = int(e.get("context") or 0)
        out = []
        for index, offset, value, found in self.allocations.foreign(e["arguments"], context):
            self.stats["foreign_arguments"] += 1
            out.append(foreign_note(e, index, offset, value, found))
        return out


def foreign_note(e: dict, index: int, offset: int, value: int, found: Block) -> dict:
    """The note of a launch argument pointing into another context's memory (the rule reads it)."""
    note = AuditHooks._note(e, FOREIGN_POINTER, launch=e["name"], context=int(e.get("context") or 0),
                            context_uid=int(e.get("context_uid") or 0),
                            function=(e.get("args") or {}).get("function", 0), parameter=index, offset=offset,
                            pointer=value, base=found.base, size=found.size, owner=found.context,
                            allocation_correlation=found.made.get("correlation", 0))
    for key in ("thread", "seq"):  # the launch's, where the stream had named it (the one pass)
        if key in e:
            note[key] = e[key]
    return note
