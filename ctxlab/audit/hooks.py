"""What the audit reads inside the driver's calls, through the tracer's hooks (``Tracer(hooks=...)``).

Two rules need values that CUPTI's activity records and the tracer's events do not carry:

- ``pointer-from-another-context``: which context owns each allocation (``cuMemAlloc*`` at their exit:
  the pointer written to ``*dptr``, the size, the context current; ``cuMemFree*`` at their entry), and,
  at each kernel launch (``cuLaunchKernel``, ``cuLaunchKernelEx``, ``cuLaunchCooperativeKernel`` at
  their entry), which arguments hold an address inside an allocation of a context other than the
  launch's. Each argument's size comes from ``cuFuncGetParamInfo`` (once per CUfunction); every 8-byte
  aligned word of an argument is looked up, so a pointer inside a struct argument (CuPy passes each
  array as a struct whose first member is its data pointer) or offset into an allocation is found.
- ``green-context-on-two-threads``: which CUcontext handles are green contexts (``cuCtxFromGreenCtx``
  at its exit: the handle written to ``*pContext``).

What was found is added to the trace as events of domain ``audit`` (``Tracer.note``), with the user's
stack where a finding needs one; the rules read them (``Stream.observed``).

The structures read here are CUPTI's ``CUpti_CallbackData`` (``functionParams`` at offset 16, as
cupti-python's ``callback_data_dtype`` lays it out) and the ``<function>_params`` structs of CUPTI's
``generated_cuda_meta.h``, whose offsets are written below.

Cost: a launch in a program whose allocations all belong to the launch's context (one context: the
usual case) costs the callback and three attribute reads. Otherwise the arguments are read, and a launch
whose (function, context, argument bytes) was inspected before is not inspected again.
"""

from __future__ import annotations

import bisect
import ctypes
import struct
import threading
from collections.abc import Callable
from typing import Any

from ctxlab.stacks import user_stack

ENTER, EXIT = 0, 1
FUNCTION_PARAMS = 16  # offsetof(CUpti_CallbackData, functionParams)
_U64 = struct.Struct("<Q")
# Offsets of (f, kernelParams, extra) in each launch's params struct; None: the struct has no such member.
LAUNCHES: dict[str, tuple[int, int, int | None]] = {
    "cuLaunchKernel": (0, 48, 56), "cuLaunchKernel_ptsz": (0, 48, 56),  # f; 7 unsigned; hStream at 40
    "cuLaunchKernelEx": (8, 16, 24), "cuLaunchKernelEx_ptsz": (8, 16, 24),  # config; f; kernelParams; extra
    "cuLaunchCooperativeKernel": (0, 48, None), "cuLaunchCooperativeKernel_ptsz": (0, 48, None),
}
# Allocation functions: how the size is read from the params struct (dptr is the first member of each).
ALLOCATIONS: dict[str, str] = {
    "cuMemAlloc_v2": "bytesize", "cuMemAllocManaged": "bytesize", "cuMemAllocAsync": "bytesize",
    "cuMemAllocAsync_ptsz": "bytesize", "cuMemAllocFromPoolAsync": "bytesize",
    "cuMemAllocFromPoolAsync_ptsz": "bytesize", "cuMemAllocPitch_v2": "pitch",
}
FREES = ("cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz")  # dptr is the first member (a value)
GREEN = "cuCtxFromGreenCtx"  # (CUcontext *pContext, CUgreenCtx hCtx)
DESTROY = "cuCtxDestroy_v2"  # (CUcontext ctx)
# CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE (cuda.h)
_END, _BUFFER_POINTER, _BUFFER_SIZE = 0, 1, 2
MAX_PARAMS = 1024
MAX_SEEN = 100_000  # distinct launches remembered; then forgotten all at once (memory stays bounded)
MIN_ADDRESS = 1 << 16  # smaller words are counts, flags and sizes: no allocation lies there

FOREIGN_POINTER = "KERNEL_ARGUMENT_IN_ANOTHER_CONTEXT"
GREEN_CONTEXT = "GREEN_CONTEXT"


def _u64(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


def _status_ok(data: Any) -> bool:
    ret = int(data.function_return_value or 0)
    return bool(ret) and ctypes.c_int.from_address(ret).value == 0


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


def cuda_param_sizes(function: int) -> tuple[int, ...]:
    """The size of each parameter of a CUfunction, through cuFuncGetParamInfo (CUDA 12.4+); () if unknown."""
    from cuda.bindings import driver

    sizes = []
    handle = driver.CUfunction(function)
    for i in range(MAX_PARAMS):
        err, _offset, size = driver.cuFuncGetParamInfo(handle, i)
        if int(err):  # CUDA_ERROR_INVALID_VALUE past the last parameter
            break
        sizes.append(int(size))
    return tuple(sizes)


class AuditHooks:
    """The hooks the audit gives the tracer, and what they saw (``stats``)."""

    def __init__(self, param_sizes: Callable[[int], tuple[int, ...]] | None = None) -> None:
        self.allocations = Allocations()
        self._param_sizes = param_sizes or cuda_param_sizes
        self._layouts: dict[int, tuple[tuple[int, int], ...]] = {}  # CUfunction -> ((index, size >= 8), ...)
        self._seen: set = set()
        self._local = threading.local()
        self.stats = {"launch_callbacks": 0, "launches_inspected": 0, "foreign_arguments": 0,
                      "allocations_seen": 0, "green_contexts": 0}

    def tracer_hooks(self) -> dict[str, Callable]:
        """Driver function (cupti's callback id name) -> hook, for ``Tracer(hooks=...)``."""
        hooks: dict[str, Callable] = {}
        for name, offsets in LAUNCHES.items():
            hooks[name] = self._launch_hook(name, offsets)
        for name, how in ALLOCATIONS.items():
            hooks[name] = self._allocation_hook(how)
        for name in FREES:
            hooks[name] = self._free
        hooks[DESTROY] = self._destroy
        hooks[GREEN] = self._green
        return hooks

    def summary(self) -> dict:
        """The counts, for the audit's stats."""
        return {**self.stats, "allocations_seen": self.allocations.count}

    # ---- allocations
    def _allocation_hook(self, how: str) -> Callable:
        def hook(tracer, data) -> None:
            if data.callback_site != EXIT or not _status_ok(data):
                return
            params = _u64(data.ptr + FUNCTION_PARAMS)
            base = _u64(_u64(params))
            if how == "pitch":  # (dptr, size_t *pPitch, WidthInBytes, Height, ElementSizeBytes)
                size = _u64(_u64(params + 8)) * _u64(params + 24)
            else:  # (dptr, size_t bytesize, ...)
                size = _u64(params + 8)
            if base and data.context:
                self.allocations.add(base, size, int(data.context), int(data.correlation_id))
        return hook

    def _free(self, tracer, data) -> None:
        if data.callback_site == ENTER:
            self.allocations.free(_u64(_u64(data.ptr + FUNCTION_PARAMS)))

    def _destroy(self, tracer, data) -> None:
        if data.callback_site == EXIT and _status_ok(data):  # (CUcontext ctx): its memory is gone with it
            self.allocations.drop_context(_u64(_u64(data.ptr + FUNCTION_PARAMS)))

    # ---- green contexts
    def _green(self, tracer, data) -> None:
        if data.callback_site != EXIT or not _status_ok(data):
            return
        params = _u64(data.ptr + FUNCTION_PARAMS)
        handle, green = _u64(_u64(params)), _u64(params + 8)
        self.stats["green_contexts"] += 1
        tracer.note({"domain": "audit", "name": GREEN_CONTEXT, "context": handle, "green": green,
                     "tid": threading.get_native_id(), "start": tracer.timestamp(), "stack": user_stack(skip=1)})

    # ---- launches
    def _launch_hook(self, name: str, offsets: tuple[int, int, int | None]) -> Callable:
        at_f, at_params, at_extra = offsets

        def hook(tracer, data) -> None:
            if data.callback_site != ENTER:
                return
            self.stats["launch_callbacks"] += 1
            owners = self.allocations.owners
            context = int(data.context or 0)
            if not owners or (len(owners) == 1 and context in owners):
                return  # every allocation known belongs to this context: nothing to find
            local = self._local
            if getattr(local, "busy", False):
                return  # a launch made while this thread asks the driver about a function
            params = _u64(data.ptr + FUNCTION_PARAMS)
            function, kernel_params = _u64(params + at_f), _u64(params + at_params)
            words = self._arguments(function, kernel_params, _u64(params + at_extra) if at_extra is not None else 0)
            if not words:
                return
            key = (function, context, words)
            if key in self._seen:
                return
            if len(self._seen) >= MAX_SEEN:
                self._seen.clear()
            self._seen.add(key)
            self.stats["launches_inspected"] += 1
            self._inspect(tracer, data, name, function, context, words)
        return hook

    def _layout(self, function: int) -> tuple[tuple[int, int], ...]:
        layout = self._layouts.get(function)
        if layout is None:
            local = self._local
            local.busy = True
            try:
                sizes = self._param_sizes(function)
            except Exception:  # no cuFuncGetParamInfo (cuda-bindings before 12.4): arguments cannot be read
                sizes = ()
            finally:
                local.busy = False
            layout = self._layouts[function] = tuple((i, s) for i, s in enumerate(sizes) if s >= 8)
        return layout

    def _arguments(self, function: int, kernel_params: int, extra: int) -> tuple[tuple[int, bytes], ...]:
        """(parameter index, its bytes) of each argument of 8 bytes or more; index -1: the ``extra`` buffer."""
        if kernel_params:
            layout = self._layout(function)
            return tuple((i, ctypes.string_at(_u64(kernel_params + 8 * i), size)) for i, size in layout)
        if extra:  # CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE pairs, CU_LAUNCH_PARAM_END last
            buffer = size = 0
            for k in range(0, 64, 2):
                what = _u64(extra + 8 * k)
                if what == _END:
                    break
                if what == _BUFFER_POINTER:
                    buffer = _u64(extra + 8 * (k + 1))
                elif what == _BUFFER_SIZE:
                    size = _u64(_u64(extra + 8 * (k + 1)))
            if buffer and size:
                return ((-1, ctypes.string_at(buffer, size)),)
        return ()

    def _inspect(self, tracer, data, name: str, function: int, context: int, words) -> None:
        for index, raw in words:
            for offset in range(0, len(raw) - 7, 8):
                value = _U64.unpack_from(raw, offset)[0]
                if value < MIN_ADDRESS:
                    continue
                found = self.allocations.find(value)
                if found is None or found[2] == context:
                    continue
                base, end, owner, correlation = found
                self.stats["foreign_arguments"] += 1
                tracer.note({"domain": "audit", "name": FOREIGN_POINTER, "launch": name, "context": context,
                             "context_uid": int(data.context_uid or 0), "function": function, "parameter": index,
                             "offset": offset, "pointer": value, "base": base, "size": end - base, "owner": owner,
                             "allocation_correlation": correlation, "tid": threading.get_native_id(),
                             "start": tracer.timestamp(), "stack": user_stack(skip=1)})


def tracer_options(hooks: AuditHooks) -> dict:
    """The Tracer options of an audited run: the user's stacks, the callbacks the rules need, these hooks.
    cuFuncGetParamInfo, which the launch hook calls, gets no activity record: the program did not call it
    (and its CUDA_ERROR_INVALID_VALUE past the last parameter is no failure of the program's)."""
    from ctxlab.audit.rules import AUDIT_CALLBACKS

    return {"stacks": True, "extra_callbacks": AUDIT_CALLBACKS, "hooks": hooks.tracer_hooks(),
            "unrecorded": ("cuFuncGetParamInfo",)}
