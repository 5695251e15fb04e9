"""Trace events -> ordered API calls: which driver calls the runtime makes, which resources (contexts,
modules, streams) appear, on which thread, with which context current. The functions here are pure, so
recorded traces can be checked on CPU."""

from __future__ import annotations

from ctxlab.tracing.names import CALL_DOMAINS, CONTEXT_PREFIXES


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


SUCCESS = ("CUDA_SUCCESS", "cudaSuccess")


def call_name(call: dict, bracketed: tuple[str, ...] = ("resource",)) -> str:
    """A call's name as the trace and the audit print it: an event of a ``bracketed`` domain (not a call: a
    resource event, an audit note) in brackets, then a failing status."""
    text = call.get("name", "?")
    if call.get("domain") in bracketed:
        text = f"[{text}]"
    if call.get("status") and call["status"] not in SUCCESS:
        text += f" -> {call['status']}"
    return text


def label(call: dict) -> str:
    """A call on one line: its name (resource events in brackets), a failing status, and its context."""
    text = call_name(call)
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
