"""What the audit reads of the driver's calls beyond their names and statuses, from the parameters the
tracer's C callback kept (``ctxlab.tracing.fields``; ``Tracer(launch_arguments=True, annotate=...)``).

Two rules need it:

- ``pointer-from-another-context``: which context owns each allocation (``cuMemAlloc*``: the pointer
  written to ``*dptr``, the size, the context current; ``cuMemFree*``), and, at each kernel launch
  (``cuLaunchKernel``, ``cuLaunchKernelEx``, ``cuLaunchCooperativeKernel``), which arguments hold an
  address inside an allocation of a context other than the launch's. The C callback keeps the arguments
  (each one's size from ``cuFuncGetParamInfo``, once per CUfunction) of each distinct (function, context,
  argument bytes) launch once (a repeat points at the same kept bytes, and is inspected once here); every
  8-byte aligned word of an argument is looked up, so a pointer inside a struct argument (CuPy passes each
  array as a struct whose first member is its data pointer) or offset into an allocation is found.
- ``green-context-on-two-threads``: which CUcontext handles are green contexts (``cuCtxFromGreenCtx``:
  the handle written to ``*pContext``).

The calls are replayed in time order after they were recorded (nothing runs inside the driver); what was
found is added as events of domain ``audit`` with the launch's stack; the rules read them
(``Stream.observed``).
"""

from __future__ import annotations

import struct
import threading

from ctxlab.audit.events import HOOKED_ALLOCATIONS, HOOKED_FREES, HOOKED_LAUNCHES
from ctxlab.audit.model.memory import MIN_ADDRESS, Memory, allocation_size, arguments

_U64 = struct.Struct("<Q")
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
        for index, raw in arguments(e["arguments"]):
            for offset in range(0, len(raw) - 7, 8):
                value = _U64.unpack_from(raw, offset)[0]
                if value < MIN_ADDRESS:
                    continue
                found = self.allocations.outer(value)
                if found is None or found.context == context:
                    continue
                base, end, owner, correlation = found.base, found.end, found.context, found.made.get("correlation", 0)
                self.stats["foreign_arguments"] += 1
                out.append(self._note(e, FOREIGN_POINTER, launch=e["name"], context=context,
                                      context_uid=int(e.get("context_uid") or 0),
                                      function=(e.get("args") or {}).get("function", 0), parameter=index,
                                      offset=offset, pointer=value, base=base, size=end - base, owner=owner,
                                      allocation_correlation=correlation))
        return out
