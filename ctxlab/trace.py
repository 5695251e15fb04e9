"""CUPTI -> ordered API calls: which driver calls the runtime makes, which
resources (contexts, modules, streams) appear, on which thread, with which
context current.

Built on NVIDIA's cupti-python; no symbol interposition (since CUDA 11.3 the
runtime reaches the driver through cuGetProcAddress, which LD_PRELOAD cannot
see). Every driver and runtime call is recorded by CUPTI's Activity API
(``ActivityKind.DRIVER``/``RUNTIME``): CUPTI writes fixed-size records into
buffers and hands them to Python when a buffer is full or at a flush, so a call
costs no Python code while the program runs. A record has the function, host
thread, start and end time, correlation id and return status, but not the
context. Python callbacks are subscribed only where that is missing: the
resource events (context, stream, module created or destroyed) and the
functions whose context handle matters (``CALLBACK_PREFIXES``), each enabled by
its callback id, never a whole domain. Every other call gets the context its
thread had current, followed from those callbacks. ``calls='all'`` subscribes
a callback to every driver and runtime function instead: exact handles for all
calls, at the old cost.

The functions on events below are pure, so recorded traces can be checked on CPU.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

from ctxlab.stacks import user_stack

CONTEXT_PREFIXES = ("cuCtx", "cuDevicePrimaryCtx", "cuModule", "cuLibrary", "cuKernel", "cuGreenCtx")

# Driver functions that get a callback in the default selection: those that make, bind, unbind,
# destroy or load into a context, or hand out a handle tied to one. Queries (cuCtxGetCurrent,
# cuCtxGetDevice, ...) are left to the activity records: libraries call them on every launch.
CALLBACK_PREFIXES = ("cuCtxCreate", "cuCtxDestroy", "cuCtxPushCurrent", "cuCtxPopCurrent", "cuCtxSetCurrent",
                     "cuCtxAttach", "cuCtxDetach", "cuCtxFromGreenCtx", "cuCtxEnablePeerAccess",
                     "cuCtxDisablePeerAccess", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease",
                     "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxSetFlags", "cuGreenCtxCreate",
                     "cuGreenCtxDestroy", "cuModuleLoad", "cuModuleUnload", "cuModuleGetFunction",
                     "cuModuleGetGlobal", "cuLibraryLoad", "cuLibraryUnload", "cuLibraryGetKernel",
                     "cuLibraryGetModule", "cuLibraryGetGlobal", "cuKernelGetFunction")

RESOURCE_EVENTS = ("CU_INIT_FINISHED", "CONTEXT_CREATED", "CONTEXT_DESTROY_STARTING", "STREAM_CREATED",
                   "STREAM_DESTROY_STARTING", "MODULE_LOADED", "MODULE_UNLOAD_STARTING")

CALL_SELECTIONS = ("context", "all")
CALL_DOMAINS = ("driver", "runtime")  # events of other domains (resource, audit) are not calls
BUFFER_BYTES = 32 << 20  # one buffer holds ~800k API records: a flush, not a full buffer, ends most runs

_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")


class TraceUnavailable(RuntimeError):
    """Tracing cannot start here: CUPTI missing, too new for the driver, or another subscriber holds it."""


def require_cupti():
    """cupti-python's module, or TraceUnavailable saying what to install."""
    try:
        from cupti import cupti
    except ImportError as exc:
        raise TraceUnavailable(f"CUPTI is not available: cupti-python is not installed ({exc}); "
                               "install ctxlab with the extra cu13 or cu12") from None
    return cupti


def _explain_subscribe_error(exc: Exception) -> TraceUnavailable:
    text = str(exc)
    if "MULTIPLE_SUBSCRIBERS" in text:
        return TraceUnavailable(f"another CUPTI subscriber is already active (a profiler?): {text}")
    if "NOT_COMPATIBLE" in text or "UNSUPPORTED" in text or "INVALID_DEVICE" in text:
        return TraceUnavailable(f"this CUPTI cannot work with the installed driver (CUPTI newer than the "
                                f"driver supports?): {text}")
    return TraceUnavailable(f"CUPTI could not subscribe: {text}")


def callback_names(selection: str = "context") -> list[str]:
    """The driver functions (cupti-python's callback id names) that get a Python callback."""
    cupti = require_cupti()
    names = [m.name for m in cupti.driver_api_trace_cbid if m.name not in ("INVALID", "SIZE", "FORCE_INT")]
    if selection == "all":
        return names
    return [n for n in names if n.startswith(CALLBACK_PREFIXES)]


def api_name(domain: str, name: str) -> str:
    """A runtime function's public name (cupti names its callback ids ``cudaMalloc_v3020``)."""
    return _VERSION_SUFFIX.sub("", name) if domain == "runtime" else name


# ---------------------------------------------------------------- the activity buffers (one set per process)

class _Activity:
    """CUPTI allows one pair of buffer callbacks per process: registered once, feeding the active tracer."""

    registered = False
    sink: Tracer | None = None
    lock = threading.Lock()

    @classmethod
    def register(cls, cupti) -> None:
        if cls.registered:
            return
        try:
            cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)  # gettid: threading.get_native_id()
        except Exception:
            pass
        cupti.activity_register_callbacks(cls._requested, cls._completed)
        cls.registered = True

    @staticmethod
    def _requested():
        return BUFFER_BYTES, 0

    @classmethod
    def _completed(cls, activities) -> None:
        sink = cls.sink
        if sink is not None:
            sink._take_rows(_rows(activities))


def _rows(activities) -> list[tuple]:
    """(kind, cbid, start, end, thread id, correlation id, return value) of each API record.

    The records live in CUPTI's buffer, which is reused once the completion callback returns, so they are
    copied now. Reading cupti-python's objects field by field costs ~14 us a record; when the records are
    all API records lying back to back (the usual case: no other kind is enabled), the block is copied at
    once and decoded with cupti-python's own record dtype instead."""
    from cupti import cupti

    api = [a for a in activities if type(a) is cupti.ActivityAPI]
    if not api:
        return []
    size = cupti.activity_api_dtype.itemsize
    first, last = api[0].ptr, api[-1].ptr
    if len(api) == len(activities) and last - first == (len(api) - 1) * size:
        import ctypes

        import numpy as np

        block = np.frombuffer(ctypes.string_at(first, len(api) * size), dtype=cupti.activity_api_dtype)
        return list(zip(*(block[f].tolist() for f in ("kind", "cbid", "start", "end", "thread_id",
                                                       "correlation_id", "return_value")), strict=True))
    return [(int(a.kind), a.cbid, a.start, a.end, a.thread_id, a.correlation_id, a.return_value) for a in api]


class Tracer:
    """Context manager: records API calls and resource events while active; stops on exit, also on error.

    ``calls``: ``"context"`` (default) gives Python callbacks only to the context functions
    (``CALLBACK_PREFIXES``) and the resource events; ``"all"`` to every driver and runtime
    function, which costs a Python call per API call (tens of times slower on small launches).
    """

    def __init__(self, domains: Iterable[str] = ("driver", "runtime", "resource"), calls: str = "context",
                 unrecorded: Iterable[str] = (), stacks: bool = False, extra_callbacks: Iterable[str] = (),
                 hooks: Mapping[str, Callable] | None = None):
        if calls not in CALL_SELECTIONS:
            raise ValueError(f"calls must be one of {CALL_SELECTIONS}, not {calls!r}")
        self.domains = tuple(domains)
        self.calls = calls
        self.unrecorded = tuple(unrecorded)  # functions (cupti's callback id names) whose records CUPTI skips
        # stacks: each call a callback sees (and each resource event) carries the user's Python stack
        # (ctxlab.stacks), taken in the callback; calls with only an activity record carry none
        self.stacks = stacks
        # more functions (driver: cupti's callback id names, e.g. cuMemAlloc_v2; runtime: the API name,
        # e.g. cudaDeviceReset) that get a callback besides the selection: rarely called ones only
        self.extra_callbacks = tuple(extra_callbacks)
        # driver functions (cupti's callback id names) whose callbacks, at both sites, also call
        # ``hook(tracer, callback_data)`` first: code that reads a call's parameters (the audit's). A function
        # enabled only for its hook is not recorded by the callback (its activity record still is).
        self.hooks = dict(hooks or {})
        self._hooks: dict[tuple[int, int], tuple[Callable, bool]] = {}
        self.cuda_initialised = False  # CU_INIT_FINISHED seen (read by the audit's fork hook)
        self.events: list[dict] = []  # everything recorded, in order (kept unless drained)
        self.stats = {"records": 0, "callbacks": 0, "flushes": 0}
        self._seq = itertools.count()
        self._subscriber = None
        self._active = False
        self._lock = threading.Lock()
        self._rows: list[tuple] = []  # raw activity records, not yet turned into events
        # (domain, correlation) -> what callbacks saw: a list, because the driver calls the runtime makes
        # inside one runtime call share that call's correlation id
        self._exact: dict[tuple, list[dict]] = {}
        self._entered: dict[int, list[int]] = {}  # OS thread id -> when its open calls began (innermost last)
        self._flushed: tuple[int, int] = (0, 0)  # (time of the last flush, the thread that asked)
        self._resources: list[dict] = []
        self._names: dict[int, str] = {}  # OS thread id -> Python thread name
        self._current: dict[int, tuple[int, int]] = {}  # OS thread id -> (context handle, id) after its last call
        self._uids: dict[int, int] = {}  # context handle -> CUPTI context id
        self._fn_names: dict[tuple[int, int], str] = {}
        self._status: dict[tuple[str, int], str] = {}

    # ---- lifetime
    def __enter__(self) -> Tracer:
        cupti = require_cupti()
        self._cupti = cupti
        self._domain_names = {int(cupti.CallbackDomain.DRIVER_API): "driver",
                              int(cupti.CallbackDomain.RUNTIME_API): "runtime",
                              int(cupti.CallbackDomain.RESOURCE): "resource"}
        self._kinds = {int(cupti.ActivityKind.DRIVER): "driver", int(cupti.ActivityKind.RUNTIME): "runtime"}
        with _Activity.lock:
            if _Activity.sink is not None:
                raise TraceUnavailable("another ctxlab tracer is already active in this process")
            _Activity.sink = self
        try:
            self._subscriber = cupti.subscribe(self._callback, 0)
        except Exception as exc:
            _Activity.sink = None
            raise _explain_subscribe_error(exc) from None
        try:
            self._enable(cupti)
        except Exception:
            self.close()
            raise
        self._active = True
        self._name_threads()
        return self

    def _enable(self, cupti) -> None:
        if "resource" in self.domains:
            for name in RESOURCE_EVENTS:
                cupti.enable_callback(1, self._subscriber, cupti.CallbackDomain.RESOURCE,
                                      cupti.CallbackIdResource[name])
        extra = set(self.extra_callbacks)
        if "driver" in self.domains:
            names = set(callback_names(self.calls))
            names |= {m.name for m in cupti.driver_api_trace_cbid if m.name in extra}
            known = cupti.driver_api_trace_cbid.__members__
            for name, hook in self.hooks.items():
                if name in known:  # a function this CUPTI does not know has no callback to hook
                    cbid = cupti.driver_api_trace_cbid[name]
                    self._hooks[(int(cupti.CallbackDomain.DRIVER_API), int(cbid))] = (hook, name in names)
            for name in sorted(names | {n for n in self.hooks if n in known}):
                cupti.enable_callback(1, self._subscriber, cupti.CallbackDomain.DRIVER_API,
                                      cupti.driver_api_trace_cbid[name])
        if "runtime" in self.domains:
            for member in cupti.runtime_api_trace_cbid:
                if member.name in ("INVALID", "SIZE", "FORCE_INT"):
                    continue
                if self.calls == "all" or api_name("runtime", member.name) in extra:
                    cupti.enable_callback(1, self._subscriber, cupti.CallbackDomain.RUNTIME_API, member)
        _Activity.register(cupti)
        self._record_switch(0)
        if "driver" in self.domains:
            cupti.activity_enable(cupti.ActivityKind.DRIVER)
        if "runtime" in self.domains:
            cupti.activity_enable(cupti.ActivityKind.RUNTIME)
        self._record_switch(0)  # before or after enabling the kind: CUPTI's notes differ between versions

    def _record_switch(self, enable: int) -> None:
        cupti = self._cupti
        for name in self.unrecorded:
            if name in cupti.driver_api_trace_cbid.__members__:
                cupti.activity_enable_driver_api(cupti.driver_api_trace_cbid[name], enable)
            else:
                cupti.activity_enable_runtime_api(cupti.runtime_api_trace_cbid[name], enable)

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop recording; what was recorded up to here is in ``events``."""
        cupti = getattr(self, "_cupti", None)
        if cupti is None:
            return
        if self._active:
            self.flush()
            for kind in (cupti.ActivityKind.DRIVER, cupti.ActivityKind.RUNTIME):
                try:
                    cupti.activity_disable(kind)
                except Exception:
                    pass
            try:
                self._record_switch(1)
            except Exception:
                pass
        if self._subscriber is not None:
            cupti.unsubscribe(self._subscriber)
            self._subscriber = None
        if self._active:
            self._active = False
            self._process(final=True)
        with _Activity.lock:
            if _Activity.sink is self:
                _Activity.sink = None

    # ---- collecting
    def flush(self) -> None:
        """Have CUPTI hand over every API record written so far (calls that have returned)."""
        if self._active:
            self._flushed = (self._cupti.get_timestamp(), threading.get_native_id())
            self._cupti.activity_flush_all(int(self._cupti.ActivityFlag.FLUSH_FORCED))
            self.stats["flushes"] += 1

    def drain(self) -> list[dict]:
        """The events recorded since the last drain (flushing CUPTI's buffers first, so a step's calls are
        all there when the step has returned)."""
        self.flush()
        self._process()
        with self._lock:
            new, self.events = self.events, []
        return new

    def _take_rows(self, rows: list[tuple]) -> None:
        with self._lock:
            self._rows.extend(rows)
            self.stats["records"] += len(rows)

    def timestamp(self) -> int:
        """CUPTI's clock (ns), the one every event's start and end are on."""
        return int(self._cupti.get_timestamp())

    def note(self, event: dict) -> None:
        """Add an event a hook made (domain ``audit``: not a call); it is ordered with the rest and named
        by thread like a resource event."""
        with self._lock:
            self._resources.append(event)

    def _callback(self, userdata, domain, cbid, data) -> None:
        try:
            domain = int(domain)
            if self._hooks:
                hooked = self._hooks.get((domain, int(cbid)))
                if hooked is not None:
                    if isinstance(data, int):
                        data = self._cupti.CallbackData.from_ptr(data)
                    try:
                        hooked[0](self, data)
                    except Exception:  # the call is still recorded; the report counts what the hooks missed
                        self.stats["hook_errors"] = self.stats.get("hook_errors", 0) + 1
                    if not hooked[1]:
                        return
            kind = self._domain_names.get(domain)
            if kind is None:  # a domain never subscribed: nothing to record
                return
            tid = threading.get_native_id()
            if tid not in self._names:
                current = threading.current_thread()
                # a thread Python did not start (a library's worker) is a "Dummy-N" to threading: its OS name
                self._names[tid] = _os_thread_name(tid) if isinstance(current, threading._DummyThread) \
                    else current.name
            cupti = self._cupti
            if kind == "resource":
                if isinstance(data, int):
                    data = cupti.ResourceData.from_ptr(data) if data else None
                context = int(data.context or 0) if data is not None else 0  # some events carry no data
                event = {"domain": "resource", "name": cupti.CallbackIdResource(cbid).name, "context": context,
                         "tid": tid, "start": cupti.get_timestamp()}
                if event["name"] == "CU_INIT_FINISHED":
                    self.cuda_initialised = True
                if self.stacks:
                    event["stack"] = user_stack(skip=1)
                if context:
                    try:
                        uid = self._uids.get(context) or int(cupti.get_context_id(context))
                        if uid:  # 0 while the context is still being made
                            self._uids[context] = event["context_uid"] = uid
                    except Exception:
                        pass
                with self._lock:
                    self._resources.append(event)
                    self.stats["callbacks"] += 1
                return
            if isinstance(data, int):
                data = cupti.CallbackData.from_ptr(data)
            key = (kind, int(data.correlation_id))
            if int(data.callback_site) == 0:
                self._entered.setdefault(tid, []).append(cupti.get_timestamp())
                return
            end = cupti.get_timestamp()
            opened = self._entered.get(tid)
            context, uid = int(data.context or 0), int(data.context_uid)
            if context and uid:
                self._uids[context] = uid
            seen = {"context": context, "context_uid": uid, "name": api_name(kind, data.function_name),
                    "tid": tid, "start": opened.pop() if opened else end, "end": end}
            if data.function_return_value:
                seen["status"] = self._status_of(kind, ctypes.c_int.from_address(
                    int(data.function_return_value)).value)
            if self.stacks:
                seen["stack"] = user_stack(skip=1)
            with self._lock:
                self._exact.setdefault(key, []).append(seen)
                self.stats["callbacks"] += 1
        except Exception:  # a callback must never raise into the driver
            pass

    def _name_threads(self) -> None:
        for t in threading.enumerate():
            if t.native_id is not None:
                self._names[t.native_id] = t.name

    def _thread_name(self, tid: int) -> str:
        name = self._names.get(tid)
        if name is None:
            name = self._names[tid] = _os_thread_name(tid)
        return name

    def _function(self, kind: str, cbid: int) -> str:
        key = (0 if kind == "driver" else 1, cbid)
        name = self._fn_names.get(key)
        if name is None:
            cupti = self._cupti
            try:
                enum = cupti.driver_api_trace_cbid if kind == "driver" else cupti.runtime_api_trace_cbid
                name = api_name(kind, enum(cbid).name)
            except ValueError:
                domain = cupti.CallbackDomain.DRIVER_API if kind == "driver" else cupti.CallbackDomain.RUNTIME_API
                try:
                    name = api_name(kind, str(cupti.get_callback_name(domain, cbid)))
                except Exception:  # a function newer than this CUPTI (a newer runtime's): named by its id
                    name = f"{kind} function #{cbid} (unknown to this CUPTI)"
            self._fn_names[key] = name
        return name

    def _status_of(self, kind: str, value: int) -> str:
        key = (kind, value)
        if key not in self._status:
            self._status[key] = _status_name(kind, value)
        return self._status[key]

    def _process(self, final: bool = False) -> None:
        """Turn the records handed over so far into events, with the context each call had."""
        self._name_threads()
        with self._lock:
            rows, self._rows = self._rows, []
            resources, self._resources = self._resources, []
            exact = self._exact
        events = []
        for kind_id, cbid, start, end, tid, corr, ret in rows:
            kind = self._kinds.get(kind_id)
            if kind is None:
                continue
            event = {"domain": kind, "name": self._function(kind, cbid), "tid": tid, "start": start, "end": end,
                     "correlation": corr, "status": self._status_of(kind, ret)}
            seen = _take(exact, (kind, corr), event["name"])
            if seen is not None:
                event["context"], event["context_uid"] = seen["context"], seen["context_uid"]
                if "stack" in seen:
                    event["stack"] = seen["stack"]
            events.append(event)
        # calls a callback saw and no record will come for: the driver calls the runtime makes itself
        # (CUPTI records only the driver calls the program makes). A call is settled once it returned
        # before the flush: at once on the thread that flushed, with a margin on the others.
        flushed_at, flusher = self._flushed
        for key, seens in list(exact.items()):
            for seen in list(seens):
                if not (final or (seen["tid"] == flusher and seen["end"] <= flushed_at)
                        or seen["end"] < flushed_at - 2_000_000):
                    continue
                seens.remove(seen)
                event = {"domain": key[0], "name": seen["name"], "tid": seen["tid"], "start": seen["start"],
                         "end": seen["end"], "correlation": key[1], "status": seen.get("status"),
                         "context": seen["context"], "context_uid": seen["context_uid"], "from": "callback"}
                if "stack" in seen:
                    event["stack"] = seen["stack"]
                events.append(event)
            if not seens:
                exact.pop(key, None)
        events.extend(resources)
        # the context each call had current when it returned: from the last call on its thread that
        # a callback saw; calls made before any such call see the thread's state as unknown (none)
        for e in sorted(events, key=lambda e: (e.get("end", e["start"]), e["start"])):
            if e["domain"] not in CALL_DOMAINS:
                continue
            if "context" in e:
                self._current[e["tid"]] = (e["context"], e["context_uid"])
            else:
                handle, uid = self._current.get(e["tid"], (0, 0))
                e["context"] = handle
                if handle:
                    e["context_uid"] = uid
                e["inferred"] = True
        events.sort(key=lambda e: (e["start"], -e.get("end", e["start"])))
        for e in events:
            if e.get("context") and not e.get("context_uid") and self._uids.get(e["context"]):
                e["context_uid"] = self._uids[e["context"]]  # seen as 0 while the context was being made
            e["seq"] = next(self._seq)
            e["thread"] = self._thread_name(e["tid"])
        with self._lock:
            self.events.extend(events)


def _os_thread_name(tid: int) -> str:
    """A thread Python did not start, by its OS name and id (while it lives), else by its id."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as handle:
            return f"{handle.read().strip()} ({tid})"
    except OSError:
        return f"thread {tid}"


def _take(exact: dict, key: tuple, name: str) -> dict | None:
    """The callback's view of the call an activity record describes (same correlation id and function)."""
    seens = exact.get(key)
    if not seens:
        return None
    for i, seen in enumerate(seens):
        if seen["name"] == name:
            del seens[i]
            if not seens:
                exact.pop(key, None)
            return seen
    return None


def _status_name(kind: str, value: int) -> str:
    try:
        if kind == "driver":
            from cuda.bindings.driver import CUresult

            return CUresult(value).name
        from cuda.bindings.runtime import cudaError_t

        return cudaError_t(value).name
    except Exception:
        return str(value)


# ---------------------------------------------------------------- pure functions on events

def _is_span(e: dict) -> bool:
    return "site" not in e and "start" in e


def calls(events: list[dict]) -> list[dict]:
    """One record per API call, in the order the calls started, with its outcome, plus resource events;
    each driver call and resource event made inside a runtime call is among that call's ``children``
    and has ``parent``: the runtime call's name (per thread).

    Takes the events of this tracer (one per call, with start and end times) and those of the
    callback-only tracer before it (an enter and an exit event per call)."""
    if any(_is_span(e) for e in events):
        return _calls_from_spans(events)
    return _calls_from_sites(events)


def _calls_from_spans(events: list[dict]) -> list[dict]:
    out: list[dict] = []
    open_runtime: dict[str, list[dict]] = {}
    ordered = sorted(events, key=lambda e: (e.get("start", 0), -e.get("end", e.get("start", 0)), e.get("seq", 0)))
    for e in ordered:
        thread = e.get("thread", "?")
        stack = open_runtime.setdefault(thread, [])
        start = e.get("start", 0)
        while stack and stack[-1].get("end", 0) < start:
            stack.pop()
        if e["domain"] == "runtime":
            record = {**e, "children": []}
            out.append(record)  # a runtime call made inside another one is a call of its own
            stack.append(record)
            continue
        record = {**e, "parent": stack[-1]["name"] if stack else None}
        (stack[-1]["children"] if stack else out).append(record)
    return out


def _calls_from_sites(events: list[dict]) -> list[dict]:
    open_runtime: dict[str, list[dict]] = {}
    open_driver: dict[tuple, dict] = {}
    out = []
    for e in sorted(events, key=lambda e: e.get("seq", 0)):
        thread = e.get("thread", "?")
        stack = open_runtime.setdefault(thread, [])
        if e["domain"] == "runtime":
            if e.get("site") == "enter":
                record = {**e, "children": []}
                stack.append(record)
                out.append(record)
            elif stack:
                record = stack.pop()
                record["status"] = e.get("status")
                record["site"] = "exit"
        elif e["domain"] == "driver":
            key = (thread, e.get("correlation"))
            if e.get("site") == "exit" and key in open_driver:
                record = open_driver.pop(key)  # placed where the call started; now its outcome
                record.update(site="exit", status=e.get("status"), context=e.get("context") or record.get("context"))
                continue
            record = {**e, "parent": stack[-1]["name"] if stack else None}
            if e.get("site") == "enter":
                open_driver[key] = record
            (stack[-1]["children"] if stack else out).append(record)
        else:
            record = {**e, "parent": stack[-1]["name"] if stack else None}
            (stack[-1]["children"] if stack else out).append(record)
    return out


def touches_context(call: dict) -> bool:
    """True for a resource event or a call whose name starts with one of CONTEXT_PREFIXES (contexts, modules)."""
    if call["domain"] == "resource":
        return True
    return call["name"].startswith(CONTEXT_PREFIXES)


def only_context(tree: list[dict]) -> list[dict]:
    """Keep the calls that touch contexts and modules, and the runtime calls that made them."""
    kept = []
    for call in tree:
        if call["domain"] == "runtime":
            children = [c for c in call["children"] if touches_context(c)]
            if children:
                kept.append({**call, "children": children})
        elif touches_context(call):
            kept.append(call)
    return kept


def by_thread(tree: list[dict]) -> dict[str, list[dict]]:
    """The calls grouped by the thread that made them, in order."""
    out: dict[str, list[dict]] = {}
    for call in tree:
        out.setdefault(call.get("thread", "?"), []).append(call)
    return out


def label(call: dict) -> str:
    """A call on one line: its name (resource events in brackets), a failing status, and its context."""
    text = call["name"]
    if call["domain"] == "resource":
        text = f"[{text}]"
    if call.get("status") and call["status"] not in ("CUDA_SUCCESS", "cudaSuccess"):
        text += f" -> {call['status']}"
    if call.get("context"):
        text += f"  ctx {call['context']:#x}"
    return text


def render_tree(tree: list[dict]) -> str:
    """The call tree as text: a block per thread, each call with its driver calls indented under it."""
    lines = []
    for thread, items in by_thread(tree).items():
        lines.append(f"thread {thread}")
        for call in items:
            lines.append(f"  {label(call)}")
            for child in call.get("children", ()):
                lines.append(f"    {label(child)}")
    return "\n".join(lines) + ("\n" if lines else "")


def summarize(events: list[dict], context_only: bool = True) -> list[str]:
    """Short labels of the calls in ``events``, nested, for attaching to a lab's step."""
    tree = calls(events)
    if context_only:
        tree = only_context(tree)
    out = []
    for call in tree:
        children = call.get("children", ())
        out.append(label(call) + (" > " + ", ".join(label(c) for c in children) if children else ""))
    return out


def current_spans(events: list[dict]) -> list[dict]:
    """When each thread had each context current: ``{"thread", "context", "context_uid", "start", "end"}``,
    from the context each call saw when it returned (events with times only)."""
    spans: list[dict] = []
    open_: dict[str, dict] = {}
    last = 0
    for e in sorted((e for e in events if _is_span(e) and e["domain"] in CALL_DOMAINS),
                    key=lambda e: (e.get("end", e["start"]), e["start"])):
        thread, end = e.get("thread", "?"), e.get("end", e["start"])
        last = max(last, end)
        handle = e.get("context") or 0
        span = open_.get(thread)
        if span is not None and span["context"] == handle:
            span["end"] = end
            continue
        if span is not None:
            span["end"] = e["start"] if e["start"] >= span["start"] else end
            spans.append(span)
            del open_[thread]
        if handle:
            open_[thread] = {"thread": thread, "context": handle, "context_uid": e.get("context_uid"),
                             "start": e["start"], "end": end}
    for span in open_.values():
        span["end"] = max(span["end"], last)
        spans.append(span)
    return sorted(spans, key=lambda s: s["start"])


_active: Tracer | None = None


def start_for_child() -> Tracer | None:
    """In a lab's child process with CTXLAB_TRACE=1: one tracer for the whole child."""
    global _active
    if _active is None and os.environ.get("CTXLAB_TRACE") == "1":
        import atexit

        _active = Tracer().__enter__()
        atexit.register(_active.close)  # stop CUPTI's buffers before the interpreter goes away
    return _active
