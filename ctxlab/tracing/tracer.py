"""The tracer: every driver and runtime call and CUPTI resource event of this process, with the context each
call had, the parameters the rules follow, and the user's Python stack where one is wanted.

CUPTI calls its subscriber's callback on the thread that made the call, often while the driver or the
runtime holds a lock of its own. The callback is ctxlab's C code (``ctxlab.tracing.native``), which never takes the
GIL there: a Python callback would have to, and hangs the program as soon as another thread holds the GIL
while it waits for that lock (two CuPy threads initialising CUDA at once were enough). Python reads what
the C side wrote when asked (``drain``) and when tracing stops; a stack thread of ours takes snapshots of
threads that released the GIL for their call (see ``cupti_shim.c``). Only calls made while tracing are seen.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable

from ctxlab.tracing import native
from ctxlab.tracing.decode import Sources, event_of
from ctxlab.tracing.fields import FIELDS, LAUNCH_ARGUMENTS, RUNTIME_FIELDS
from ctxlab.tracing.names import api_name
from ctxlab.tracing.native import objects
from ctxlab.tracing.native.frames import hold_codes
from ctxlab.tracing.native.locate import loaded_library, param_info_address
from ctxlab.tracing.recorder import FlightSink
from ctxlab.tracing.threads import ThreadNames, asking_thread, snapshot, status_name, user_frames

# Driver functions whose calls carry the user's stack by default: those that make, bind, unbind, destroy or
# load into a context, or hand out a handle tied to one. Failing calls carry one too.
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
STACK_WAIT_MS = 200  # how long a thread that released the GIL waits at its call's end for its snapshot

_IGNORED_CBIDS = ("INVALID", "SIZE", "FORCE_INT")


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


def _explain_subscribe_error(name: str) -> TraceUnavailable:
    if "MULTIPLE_SUBSCRIBERS" in name:
        return TraceUnavailable(f"another CUPTI subscriber is already active (a profiler?): {name}")
    if any(word in name for word in ("NOT_COMPATIBLE", "UNSUPPORTED", "INVALID_DEVICE", "NO_DEVICE")):
        return TraceUnavailable(f"this CUPTI cannot work with the installed driver (CUPTI newer than the "
                                f"driver supports, or no GPU): {name}")
    return TraceUnavailable(f"CUPTI could not subscribe: {name}")


def callback_names(selection: str = "context") -> list[str]:
    """The driver functions (cupti-python's callback id names) whose calls carry the user's stack."""
    cupti = require_cupti()
    names = [m.name for m in cupti.driver_api_trace_cbid if m.name not in _IGNORED_CBIDS]
    if selection == "all":
        return names
    return [n for n in names if n.startswith(CALLBACK_PREFIXES)]


class _Active:
    """One tracer per process: CUPTI takes one subscriber."""

    tracer: Tracer | None = None
    lock = threading.Lock()


def renew_locks_after_fork(tracer: Tracer | None) -> None:
    """In a forked child: the tracer's locks as new (a thread of the parent may have held one at the fork;
    the C side renews its own in its fork handler)."""
    _Active.lock = threading.Lock()
    if tracer is not None:
        tracer._lock = threading.Lock()


class Tracer:
    """Context manager: records API calls and resource events while active; stops on exit, also on error.

    ``stacks``: calls of the context functions (``CALLBACK_PREFIXES``), of ``extra_callbacks`` (driver:
    cupti's callback id names, e.g. ``cuMemAlloc_v2``; runtime: the API name, e.g. ``cudaDeviceReset``),
    every failing call and the resource events carry the user's Python stack; with ``calls="all"`` every
    call does. ``launch_arguments``: the kernel arguments of each distinct launch are kept (the audit's
    pointer rule). Every call records its context and the parameters of ``ctxlab.tracing.fields``.
    ``annotate`` is given each batch of events as it is read and adds what it returns (the audit's replay).
    With ``flight`` (``ctxlab.tracing.recorder``) every record goes to the flight recorder's file, which the
    parent process that runs this one reads, and ``events`` stays empty.
    """

    def __init__(self, domains: Iterable[str] = ("driver", "runtime", "resource"), calls: str = "context",
                 stacks: bool = False, extra_callbacks: Iterable[str] = (), launch_arguments: bool = False,
                 annotate: Callable[[list[dict]], list[dict]] | None = None, flight: FlightSink | None = None):
        if calls not in CALL_SELECTIONS:
            raise ValueError(f"calls must be one of {CALL_SELECTIONS}, not {calls!r}")
        self.domains = tuple(domains)
        self.calls = calls
        self.stacks = stacks
        self.extra_callbacks = tuple(extra_callbacks)
        self.launch_arguments = launch_arguments
        # annotate(batch of calls) -> events of domain "audit" made from the calls' kept parameters
        self.annotate = annotate
        # flight: the C side writes into a file the parent process reads; nothing is collected here
        self.flight = flight
        self._cuda_initialised = False  # CU_INIT_FINISHED seen
        self.events: list[dict] = []  # everything recorded, in order (kept unless drained)
        self.stats: dict = {"records": 0, "callbacks": 0}
        self._seq = itertools.count()
        self._lib: ctypes.CDLL | None = None
        self._cupti_lib: ctypes.CDLL | None = None
        self._subscriber = ctypes.c_void_p()
        self._active = False
        self._lock = threading.Lock()
        self._notes: list[dict] = []
        self.threads = ThreadNames()
        self._last_seen: dict[int, int] = {}  # OS thread id -> when its last recorded event ended
        self._ended: set[int] = set()
        self._rounds = 0  # the stack thread's idle rounds (flight recording)
        self._fn_names: dict[tuple[int, int], str] = {}
        self._status: dict[tuple[str, int], str] = {}
        # stack id -> (frames, why there are none, the library whose code made the call)
        self._stacks: dict[int, tuple[list | None, str | None, str | None]] = {}
        # snapshots the stack thread took: (frames, library, the Python thread they are of when not the caller's)
        self._served: dict[int, tuple[list, str | None, str | None]] = {}
        self._asked_by: dict[int, str] = {}
        self._serving = False
        self._server: threading.Thread | None = None

    # ---- lifetime
    def __enter__(self) -> Tracer:
        cupti = require_cupti()
        try:
            lib = native.load()
        except native.NativeUnavailable as exc:
            raise TraceUnavailable(str(exc)) from None
        with _Active.lock:
            if _Active.tracer is not None:
                raise TraceUnavailable("another ctxlab tracer is already active in this process")
            _Active.tracer = self
        try:
            self._start(cupti, lib)
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, cupti, lib: ctypes.CDLL) -> None:
        self._cupti = cupti
        try:
            cupti.get_timestamp()  # loads libcupti, whose functions the C side calls
        except Exception as exc:
            raise TraceUnavailable(f"CUPTI cannot be loaded: {exc}") from None
        path = loaded_library("libcupti")
        if path is None:
            raise TraceUnavailable("CUPTI's library was not found loaded in this process")
        self._cupti_lib = culib = ctypes.CDLL(path)
        self._start_native(lib, native.address(culib.cuptiGetTimestamp), native.address(culib.cuptiGetContextId),
                           param_info_address() if self.launch_arguments else 0)
        self._configure(cupti, lib)
        culib.cuptiSubscribe.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]
        culib.cuptiSubscribe.restype = ctypes.c_int
        result = culib.cuptiSubscribe(ctypes.byref(self._subscriber), native.address(lib.ctxlab_callback), None)
        if result != 0:
            self._subscriber = ctypes.c_void_p()
            raise _explain_subscribe_error(self._result_name(result))
        self._enable(cupti)
        self._begin()

    def _start_native(self, lib: ctypes.CDLL, timestamp: int, context_id: int, param_info: int) -> None:
        """The C side set up afresh: CUPTI's clock and context ids (0: its own clock, none), the launch
        parameters' sizes, the CPython functions it walks frames with."""
        self._lib = lib
        lib.ctxlab_reset()
        lib.ctxlab_init(timestamp, context_id, param_info, *native.python_api(), STACK_WAIT_MS)
        lib.ctxlab_set_failure_stacks(1 if self.stacks else 0)
        if self.flight is not None:
            self.flight.open(lib, self._cupti)

    def _begin(self) -> None:
        """Start recording: threads named, the stack thread started, the C side switched on."""
        lib = lib_or_raise(self._lib)
        self.threads.watch(self.flight.thread_named if self.flight is not None else None)
        if self.stacks or self.flight is not None:
            self._serving = True
            lib.ctxlab_set_helper(1)
            self._server = threading.Thread(target=self._serve_stacks, name="ctxlab-stacks", daemon=True)
            self._server.start()
        # CTXLAB_CALLBACK=off: subscribed and enabled, but the callback returns at once (what CUPTI's own
        # dispatch costs, for benchmarks/launch_cost.py; nothing is recorded)
        lib.ctxlab_set_active(0 if os.environ.get("CTXLAB_CALLBACK") == "off" else 1)
        self._active = True

    def _result_name(self, result: int) -> str:
        try:
            return "CUPTI_" + self._cupti.Result(result).name
        except Exception:
            return f"CUPTI error {result}"

    def _configure(self, cupti, lib: ctypes.CDLL) -> None:
        """Tell the C side which calls want a stack and which parameters to keep."""
        stacks = set(callback_names(self.calls)) | set(self.extra_callbacks) if self.stacks else set()
        for member in cupti.driver_api_trace_cbid:
            if member.name in _IGNORED_CBIDS:
                continue
            cbid = int(member)
            if member.name in stacks:
                lib.ctxlab_set_want(native.DOMAIN_DRIVER, cbid, native.WANT_STACK)
            for _arg, site, offset, deref, inner, width in FIELDS.get(member.name, ()):
                lib.ctxlab_set_field(native.DOMAIN_DRIVER, cbid, site, offset, deref, inner, width)
            if self.launch_arguments and member.name in LAUNCH_ARGUMENTS:
                lib.ctxlab_set_launch(cbid, *LAUNCH_ARGUMENTS[member.name])
            if self.flight is not None and member.name in LAUNCH_ARGUMENTS:  # the kernels' names, once each
                lib.ctxlab_set_launch_function(cbid, LAUNCH_ARGUMENTS[member.name][0])
            if member.name.startswith("cuDevicePrimaryCtxRetain"):  # names the runtime copy that retains
                lib.ctxlab_set_want(native.DOMAIN_DRIVER, cbid, native.WANT_CALLERS)
            if self.launch_arguments and member.name.startswith("cuMemAlloc"):  # which library allocated too
                lib.ctxlab_set_want(native.DOMAIN_DRIVER, cbid, native.WANT_CALLERS)
        for member in cupti.runtime_api_trace_cbid:
            if member.name in _IGNORED_CBIDS:
                continue
            cbid = int(member)
            if self.stacks and (self.calls == "all" or api_name("runtime", member.name) in stacks):
                lib.ctxlab_set_want(native.DOMAIN_RUNTIME, cbid, native.WANT_STACK)
            for _arg, site, offset, deref, inner, width in RUNTIME_FIELDS.get(member.name, ()):
                lib.ctxlab_set_field(native.DOMAIN_RUNTIME, cbid, site, offset, deref, inner, width)
        for name in RESOURCE_EVENTS:
            cbid = int(cupti.CallbackIdResource[name])
            if name.startswith("MODULE"):
                lib.ctxlab_set_want(native.DOMAIN_RESOURCE, cbid, native.WANT_MODULE)
            if self.stacks:
                lib.ctxlab_set_want(native.DOMAIN_RESOURCE, cbid, native.WANT_STACK)

    def _enable(self, cupti) -> None:
        handle = int(self._subscriber.value or 0)
        # every function of a domain: the C side follows each thread's nesting, so it must see each call
        if "driver" in self.domains:
            cupti.enable_domain(1, handle, cupti.CallbackDomain.DRIVER_API)
        if "runtime" in self.domains:
            cupti.enable_domain(1, handle, cupti.CallbackDomain.RUNTIME_API)
        if "resource" in self.domains:
            for name in RESOURCE_EVENTS:
                cupti.enable_callback(1, handle, cupti.CallbackDomain.RESOURCE, cupti.CallbackIdResource[name])

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop recording; what was recorded up to here is in ``events``."""
        lib = self._lib
        if lib is not None and self._active:
            lib.ctxlab_set_active(0)
        if self._subscriber.value and self._cupti_lib is not None:
            self._cupti_lib.cuptiUnsubscribe.argtypes = [ctypes.c_void_p]
            self._cupti_lib.cuptiUnsubscribe(self._subscriber)
            self._subscriber = ctypes.c_void_p()
        if self._serving and lib is not None:
            self._serving = False
            lib.ctxlab_set_helper(0)
            if self._server is not None and self._server is not threading.current_thread():
                self._server.join(timeout=5)
        if self._lib is not None:
            self.threads.unwatch()
        if self._active and self.flight is not None:
            self._active = False
            self._name_threads(final=True)
            self.flight.close()
        elif self._active:
            self._active = False
            self._process()
            self._release_stacks()
        with _Active.lock:
            if _Active.tracer is self:
                _Active.tracer = None

    @property
    def cuda_initialised(self) -> bool:
        """Whether the program used CUDA while tracing (read by the audit's fork hook at a fork, before the
        records are read: the C side says whether it recorded anything)."""
        lib = self._lib
        return self._cuda_initialised or bool(lib is not None and self._active and lib.ctxlab_recorded_any())

    # ---- stacks
    def _serve_stacks(self) -> None:
        """Snapshots of threads blocked in a call with the GIL released (asked for by the C side)."""
        lib = self._lib
        assert lib is not None
        tid = ctypes.c_uint32()
        while self._serving:
            stack_id = lib.ctxlab_next_request(100, ctypes.byref(tid))
            if not stack_id:
                self._name_threads()
                continue
            ident = self.threads.ident(tid.value)
            frames = sys._current_frames()
            taken: tuple[list, str | None, str | None]
            if ident is not None:
                taken = (*snapshot(frames.get(ident)), None)
                if self.flight is not None and self.flight.frames_in_place:
                    hold_codes(lib, frames.get(ident))  # its next call from these frames is read in place
            else:  # a library's own thread: where the Python thread that asked the library was
                taken = asking_thread(frames, self.threads, exclude={threading.get_ident()})
            del frames
            if self.flight is not None:
                self.flight.served(stack_id, taken[0], taken[1], taken[2])
            self._served[stack_id] = taken  # before the thread is let go: it may read it at once
            if not lib.ctxlab_served(stack_id):
                self._served.pop(stack_id, None)  # it stopped waiting: the thread may have moved on

    def _name_threads(self, final: bool = False) -> None:
        """Flight recording: the threads' names, the ends of threads that made calls, the loaded objects."""
        if self.flight is None:
            return
        self.flight.clock()
        alive = self.threads.refresh()
        for tid, name in list(self.threads.names.items()):
            self.flight.thread_named(tid, self.threads.idents.get(tid), name)
            if tid not in alive and tid not in self._ended:
                self._ended.add(tid)
                self.flight.thread_ended(tid)
        self._rounds += 1
        if final or self._rounds % 10 == 0:  # the loaded objects: every tenth round of the stack thread
            self.flight.refresh_maps()

    def _stack(self, stack_id: int) -> tuple[list | None, str | None, str | None]:
        known = self._stacks.get(stack_id)
        if known is not None:
            return known
        assert self._lib is not None
        state, frames, _tid = native.stack_frames(self._lib, stack_id)
        if state == native.STACK_PENDING and self._active:
            return None, native.STACK_REASONS[state], None  # the stack thread may still take it: not cached
        result: tuple[list | None, str | None, str | None]
        if state == native.STACK_NATIVE:
            walked, library = user_frames(frames)
            result = (walked, None, library)
        elif state == native.STACK_SERVED:
            taken, library, other = self._served.pop(stack_id, ([], None, None))
            if other is not None:
                self._asked_by[stack_id] = other
            result = (taken, None, library)
        else:
            result = (None, native.STACK_REASONS.get(state, f"no stack (state {state})"), None)
        self._stacks[stack_id] = result
        return result

    def _release_stacks(self) -> None:
        """Take every stack the C side walked (each holds references to code objects) before it forgets them."""
        lib = self._lib
        if lib is None:
            return
        total = native.counts(lib)["stacks"]
        for stack_id in range(1, total + 1):
            if stack_id not in self._stacks:
                self._stack(stack_id)
        self.stats.update(native.counts(lib))
        lib.ctxlab_reset()

    # ---- collecting
    def drain(self) -> list[dict]:
        """The events recorded since the last drain."""
        self._process()
        with self._lock:
            new, self.events = self.events, []
        return new

    def timestamp(self) -> int:
        """CUPTI's clock (ns), the one every event's start and end are on."""
        if self._cupti_lib is None:
            return time.monotonic_ns()
        return int(self._cupti.get_timestamp())

    def note(self, event: dict) -> None:
        """Add an event made outside CUPTI (domain ``audit``: not a call), ordered and named like the rest."""
        if self.flight is not None:
            self.flight.note("event", {"event": event})
            return
        with self._lock:
            self._notes.append(event)

    def _process(self) -> None:
        """Turn what the C side recorded into events."""
        lib = self._lib
        if lib is None:
            return
        alive = self.threads.refresh()
        rows = native.take_records(lib)
        events = [self._event(row) for row in rows]
        for e in events:
            self._last_seen[e["tid"]] = max(self._last_seen.get(e["tid"], 0), e.get("end", e["start"]))
        for tid, last in self._last_seen.items():  # a thread that made calls and is gone: its stack went with it
            if self.stacks and tid not in alive and tid not in self._ended and self.threads.names.get(tid):
                self._ended.add(tid)
                events.append({"domain": "audit", "name": "THREAD_ENDED", "tid": tid, "start": last + 1})
        if self.annotate is not None and events:
            events.extend(self.annotate(events))
        with self._lock:
            events.extend(self._notes)
            self._notes = []
        self.stats["records"] += len(rows)
        self.stats["callbacks"] += len(rows)
        events.sort(key=lambda e: (e["start"], -e.get("end", e["start"])))
        for e in events:
            e["seq"] = next(self._seq)
            e["thread"] = self.threads.name(e["tid"])
        with self._lock:
            self.events.extend(events)

    def _event(self, row) -> dict:
        lib = lib_or_raise(self._lib)
        event = event_of(row, Sources(self._function, self._resource_name, self._status_of, self._stack_of,
                                      lambda at, length: native.blob(lib, at, length),
                                      lambda kept: [objects.library_name(path) for path in objects.callers(kept)]))
        if event["name"] == "CU_INIT_FINISHED":
            self._cuda_initialised = True
        return event

    def _stack_of(self, stack_id: int) -> tuple[list | None, str | None, str | None, str | None]:
        frames, reason, library = self._stack(stack_id)
        return frames, reason, library, self._asked_by.get(stack_id)

    def _function(self, kind: str, cbid: int) -> str:
        key = (0 if kind == "driver" else 1, cbid)
        name = self._fn_names.get(key)
        if name is None:
            cupti = self._cupti
            try:
                enum = cupti.driver_api_trace_cbid if kind == "driver" else cupti.runtime_api_trace_cbid
                name = enum(cbid).name
            except ValueError:
                domain = cupti.CallbackDomain.DRIVER_API if kind == "driver" else cupti.CallbackDomain.RUNTIME_API
                try:
                    name = str(cupti.get_callback_name(domain, cbid))
                except Exception:  # a function newer than this CUPTI (a newer runtime's): named by its id
                    name = f"{kind} function #{cbid} (unknown to this CUPTI)"
            self._fn_names[key] = name
        return name

    def _resource_name(self, cbid: int) -> str:
        try:
            return str(self._cupti.CallbackIdResource(cbid).name)
        except ValueError:
            return f"resource event #{cbid}"

    def _status_of(self, kind: str, value: int) -> str:
        key = (kind, value)
        if key not in self._status:
            self._status[key] = status_name(kind, value)
        return self._status[key]


def lib_or_raise(lib: ctypes.CDLL | None) -> ctypes.CDLL:
    """The C side's library of an active tracer."""
    if lib is None:
        raise TraceUnavailable("the tracer is not active")
    return lib


_child_tracer: Tracer | None = None


def start_for_child() -> Tracer | None:
    """In a lab's child process with CTXLAB_TRACE=1: one tracer for the whole child."""
    global _child_tracer
    if _child_tracer is None and os.environ.get("CTXLAB_TRACE") == "1":
        import atexit

        _child_tracer = Tracer().__enter__()
        atexit.register(_child_tracer.close)
    return _child_tracer
