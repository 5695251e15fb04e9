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

import bisect
import struct
import threading

from ctxlab.audit.events import HOOKED_ALLOCATIONS, HOOKED_FREES, HOOKED_LAUNCHES

_U64 = struct.Struct("<Q")
GREEN = "cuCtxFromGreenCtx"  # (CUcontext *pContext, CUgreenCtx hCtx)
DESTROY = "cuCtxDestroy_v2"  # (CUcontext ctx)
MIN_ADDRESS = 1 << 16  # smaller words are counts, flags and sizes: no allocation lies there
INSPECTED_KEPT = 1 << 16  # distinct launches remembered as inspected

FOREIGN_POINTER = "KERNEL_ARGUMENT_IN_ANOTHER_CONTEXT"
GREEN_CONTEXT = "GREEN_CONTEXT"


class Allocations:
    """Address ranges of the live allocations seen, each with its owner context, in address order."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, int, int]] = []  # (base, end, context, correlation id)
        self._lock = threading.Lock()
        self.owners: dict[int, int] = {}  # context -> live allocations
        self.count = 0  # allocations seen

    def add(self, base: int, size: int, context: int, correlation: int = 0) -> None:
        """A new allocation; any entry overlapping it is gone (its memory was freed, maybe with its context)."""
        end = base + max(size, 1)
        with self._lock:
            items = self._items
            i = bisect.bisect_left(items, (base,))
            while i > 0 and items[i - 1][1] > base:
                i -= 1
            while i < len(items) and items[i][0] < end:
                self._forget(items.pop(i))
            bisect.insort(items, (base, end, context, correlation))
            self.owners[context] = self.owners.get(context, 0) + 1
            self.count += 1

    def free(self, base: int) -> None:
        """The allocation starting at ``base`` was freed."""
        with self._lock:
            i = bisect.bisect_left(self._items, (base,))
            if i < len(self._items) and self._items[i][0] == base:
                self._forget(self._items.pop(i))

    def _forget(self, item: tuple[int, int, int, int]) -> None:
        left = self.owners.get(item[2], 0) - 1
        if left > 0:
            self.owners[item[2]] = left
        else:
            self.owners.pop(item[2], None)

    def find(self, address: int) -> tuple[int, int, int, int] | None:
        """The allocation holding ``address``, or None."""
        with self._lock:  # another thread may be adding or freeing
            items = self._items
            i = bisect.bisect_right(items, (address, 1 << 64))
            if i:
                item = items[i - 1]
                if item[0] <= address < item[1]:
                    return item
        return None

    def drop_context(self, context: int) -> None:
        """Every allocation of ``context``: it was destroyed, and its memory with it."""
        with self._lock:
            kept = [item for item in self._items if item[2] != context]
            if len(kept) != len(self._items):
                self._items = kept
                self.owners.pop(context, None)


class AuditHooks:
    """Replays the calls' kept parameters: the allocation map, launches' foreign pointers, green handles."""

    def __init__(self) -> None:
        self.allocations = Allocations()
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
                        self.allocations.add(args["ptr"], allocation_size(args), e["context"], e.get("correlation", 0))
                elif kind == 0:
                    self.allocations.free(args.get("ptr", 0))
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
                found = self.allocations.find(value)
                if found is None or found[2] == context:
                    continue
                base, end, owner, correlation = found
                self.stats["foreign_arguments"] += 1
                out.append(self._note(e, FOREIGN_POINTER, launch=e["name"], context=context,
                                      context_uid=int(e.get("context_uid") or 0),
                                      function=(e.get("args") or {}).get("function", 0), parameter=index,
                                      offset=offset, pointer=value, base=base, size=end - base, owner=owner,
                                      allocation_correlation=correlation))
        return out


def allocation_size(args: dict) -> int:
    """An allocation's size from its call's kept parameters (cuMemAllocPitch: pitch times height)."""
    return args.get("pitch", 0) * args.get("height", 0) if "pitch" in args else args.get("size", 0)


def arguments(blob: bytes) -> list[tuple[int, bytes]]:
    """A launch's kept arguments: (parameter index, its bytes); index -1 is the packed ``extra`` buffer."""
    out, at = [], 0
    while at + 8 <= len(blob):
        index, size = struct.unpack_from("<II", blob, at)
        raw = blob[at + 8:at + 8 + size]
        out.append((-1 if index == 0xFFFFFFFF else index, raw))
        at += 8 + size
    return out
