"""CUPTI callbacks -> ordered events: which driver calls the runtime makes, and
which resources (contexts, modules, streams) appear, on which thread.

Built on NVIDIA's cupti-python; no symbol interposition (since CUDA 11.3 the
runtime reaches the driver through cuGetProcAddress, which LD_PRELOAD cannot
see). ``Tracer`` subscribes to the DRIVER_API, RUNTIME_API and RESOURCE
domains; ``nest`` puts each driver call under the runtime call that made it.
The event functions below are pure, so recorded traces can be checked on CPU.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Iterable

CONTEXT_PREFIXES = ("cuCtx", "cuDevicePrimaryCtx", "cuModule", "cuLibrary", "cuKernel")


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


class Tracer:
    """Context manager: records events while active; unsubscribes on exit, also on error."""

    def __init__(self, domains: Iterable[str] = ("driver", "runtime", "resource")):
        self.domains = tuple(domains)
        self.events: list[dict] = []
        self._seq = itertools.count()
        self._subscriber = None
        self._lock = threading.Lock()

    def __enter__(self) -> "Tracer":
        cupti = require_cupti()
        self._cupti = cupti
        self._names = {cupti.CallbackDomain.DRIVER_API: "driver", cupti.CallbackDomain.RUNTIME_API: "runtime",
                       cupti.CallbackDomain.RESOURCE: "resource"}
        try:
            self._subscriber = cupti.subscribe(self._callback, 0)
        except Exception as exc:
            raise _explain_subscribe_error(exc) from None
        try:
            for domain, name in self._names.items():
                if name in self.domains:
                    cupti.enable_domain(1, self._subscriber, domain)
        except Exception:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._subscriber is not None:
            self._cupti.unsubscribe(self._subscriber)
            self._subscriber = None

    def drain(self) -> list[dict]:
        """The events recorded since the last drain."""
        with self._lock:
            new, self.events = self.events, []
        return new

    def _callback(self, userdata, domain, cbid, data) -> None:
        try:
            event = self._event(domain, cbid, data)
        except Exception as exc:  # a callback must never raise into the driver
            event = {"domain": "error", "name": f"{type(exc).__name__}: {exc}"}
        event["seq"] = next(self._seq)
        event["thread"] = threading.current_thread().name
        with self._lock:
            self.events.append(event)

    def _event(self, domain, cbid, data) -> dict:
        cupti = self._cupti
        kind = self._names.get(domain, str(domain))
        if kind == "resource":
            if isinstance(data, int):
                data = cupti.ResourceData.from_ptr(data) if data else None
            name = cupti.CallbackIdResource(cbid).name
            context = int(data.context or 0) if data is not None else 0  # some events carry no data
            return {"domain": "resource", "name": name, "context": context}
        if isinstance(data, int):
            data = cupti.CallbackData.from_ptr(data)
        site = "enter" if int(data.callback_site) == 0 else "exit"
        event = {"domain": kind, "name": data.function_name, "site": site, "context": int(data.context or 0),
                 "context_uid": int(data.context_uid), "correlation": int(data.correlation_id)}
        if site == "exit" and data.function_return_value:
            event["status"] = _status_name(kind, ctypes.c_int.from_address(int(data.function_return_value)).value)
        return event


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

def calls(events: list[dict]) -> list[dict]:
    """One record per API call, in the order the calls started, with the outcome of its exit, plus
    resource events; each driver call has ``parent``: the runtime call it happened in (per thread)."""
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
    out: dict[str, list[dict]] = {}
    for call in tree:
        out.setdefault(call.get("thread", "?"), []).append(call)
    return out


def label(call: dict) -> str:
    text = call["name"]
    if call["domain"] == "resource":
        text = f"[{text}]"
    if call.get("status") and call["status"] not in ("CUDA_SUCCESS", "cudaSuccess"):
        text += f" -> {call['status']}"
    if call.get("context"):
        text += f"  ctx {call['context']:#x}"
    return text


def render_tree(tree: list[dict]) -> str:
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


_active: Tracer | None = None


def start_for_child() -> Tracer | None:
    """In a lab's child process with CTXLAB_TRACE=1: one tracer for the whole child."""
    import os

    global _active
    if _active is None and os.environ.get("CTXLAB_TRACE") == "1":
        _active = Tracer().__enter__()
    return _active
