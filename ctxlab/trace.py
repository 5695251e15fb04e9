"""Trace events -> ordered API calls: which driver calls the runtime makes, which resources (contexts,
modules, streams) appear, on which thread, with which context current.

The implementation lives in ``ctxlab.tracing`` (the C callback, the tracer, the flight recorder); this module
is the API's face of the events (``ctxlab.api.trace(argv=[...])`` runs a program under the tracer). The events come from
``ctxlab.tracing.tracer.Tracer`` (CUPTI's callback API, answered by ctxlab's C callback: no
Python code runs inside the driver, so a traced program cannot deadlock on the GIL; no symbol interposition,
since CUDA 11.3 the runtime reaches the driver through cuGetProcAddress, which LD_PRELOAD cannot see).
The functions here are pure, so recorded traces can be checked on CPU.
"""

from __future__ import annotations

from ctxlab.tracing.calls import (
    by_thread,
    call_name,
    calls,
    current_spans,
    label,
    only_context,
    render_tree,
    summarize,
    touches_context,
)
from ctxlab.tracing.names import CALL_DOMAINS, CONTEXT_PREFIXES
from ctxlab.tracing.tracer import (
    CALL_SELECTIONS,
    CALLBACK_PREFIXES,
    RESOURCE_EVENTS,
    Tracer,
    TraceUnavailable,
    api_name,
    callback_names,
    require_cupti,
    start_for_child,
)

__all__ = ["CALL_DOMAINS", "CALL_SELECTIONS", "CALLBACK_PREFIXES", "CONTEXT_PREFIXES", "RESOURCE_EVENTS", "Tracer",
           "TraceUnavailable", "api_name", "by_thread", "call_name", "callback_names", "calls", "current_spans",
           "label", "only_context", "render_tree", "require_cupti", "start_for_child", "summarize",
           "touches_context"]

