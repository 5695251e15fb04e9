"""Synthetic event streams in the tracer's recorded format (``labs/results/first_context.trace.json``:
domain, name, tid, thread, start, end, correlation, status, context, context_uid, inferred or from,
seq; resource events have no end and no status), for the audit's CPU tests."""

from __future__ import annotations

import itertools

MAIN, WORKER = 101, 202
NAMES = {MAIN: "MainThread", WORKER: "worker"}
PRIMARY, CREATED, OTHER = 0x1D2154D0, 0x7F00AA00, 0x7F00BB00


def stack(line: int, function: str = "main", file: str = "app.py") -> list:
    return [[file, line, function], [file, 99, "<module>"]]


class Events:
    """Builds a stream; times are given explicitly so nesting (a driver call inside a runtime call) is exact."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._seq = itertools.count()
        self._corr = itertools.count(1)

    def call(self, domain: str, name: str, start: int, end: int | None = None, tid: int = MAIN,
             status: str | None = None, context: int = 0, line: int | None = None, **extra) -> dict:
        ok = "CUDA_SUCCESS" if domain == "driver" else "cudaSuccess"
        event = {"domain": domain, "name": name, "tid": tid, "start": start,
                 "end": end if end is not None else start + 5,
                 "correlation": next(self._corr), "status": status or ok, "context": context,
                 "seq": next(self._seq), "thread": NAMES.get(tid, f"thread {tid}")}
        if context:
            event["context_uid"] = {PRIMARY: 1, CREATED: 2, OTHER: 3}.get(context, 9)
        if line is not None:  # a callback saw it: exact context, the user's stack
            event["stack"] = stack(line)
        else:  # an activity record only: the context is inferred
            event["inferred"] = True
        event.update(extra)
        self.events.append(event)
        return event

    def driver(self, name: str, start: int, **kw) -> dict:
        return self.call("driver", name, start, **kw)

    def runtime(self, name: str, start: int, **kw) -> dict:
        return self.call("runtime", name, start, **kw)

    def resource(self, name: str, start: int, tid: int = MAIN, context: int = 0, line: int | None = None) -> dict:
        event = {"domain": "resource", "name": name, "context": context, "tid": tid, "start": start,
                 "seq": next(self._seq), "thread": NAMES.get(tid, f"thread {tid}")}
        if line is not None:
            event["stack"] = stack(line)
        self.events.append(event)
        return event

    def observed(self, name: str, start: int, tid: int = MAIN, context: int = 0, line: int | None = None,
                 **extra) -> dict:
        """What one of the audit's hooks noted inside a call (domain audit, as ctxlab.audit.model.hooks writes it)."""
        event = {"domain": "audit", "name": name, "context": context, "tid": tid, "start": start,
                 "seq": next(self._seq), "thread": NAMES.get(tid, f"thread {tid}"), **extra}
        if line is not None:
            event["stack"] = stack(line)
        self.events.append(event)
        return event

    def primary_runtime(self, start: int = 10, tid: int = MAIN, line: int = 5) -> None:
        """cudaSetDevice creating and binding the primary context (as first_context.trace.json shows)."""
        self.runtime("cudaSetDevice", start, end=start + 50, tid=tid, context=PRIMARY)
        # driver calls a runtime makes: only a callback sees them (no activity record)
        self.driver("cuCtxSetCurrent", start + 5, end=start + 10, tid=tid, context=PRIMARY, line=line,
                    **{"from": "callback"})
        self.driver("cuDevicePrimaryCtxRetain", start + 15, end=start + 40, tid=tid, context=PRIMARY, line=line,
                    **{"from": "callback"})
        self.resource("CONTEXT_CREATED", start + 20, tid=tid, context=PRIMARY, line=line)


def guard_plugin_args() -> list[str]:
    """pytest arguments that load the guard plugin: none where ctxlab is installed (its pytest11 entry point),
    ``-p ctxlab.audit.pytest_plugin`` where it runs from the source tree on PYTHONPATH (scripts/gpu-test.sh)."""
    from importlib.metadata import entry_points

    if any(ep.value == "ctxlab.audit.pytest_plugin" for ep in entry_points(group="pytest11")):
        return []
    return ["-p", "ctxlab.audit.pytest_plugin"]
