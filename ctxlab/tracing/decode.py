"""One record of the C callback (``native.RECORD_FIELDS``) as an event dict, the same wherever it is read:
by the Tracer in the traced process, and by the flight recorder's reader in the parent (``flight``). Only the
sources of names, stacks and kept bytes differ (``Sources``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ctxlab.tracing import native
from ctxlab.tracing.fields import named_args
from ctxlab.tracing.names import api_name

_CALLERS = native.CALLERS_ITEM.to_bytes(4, "little")


@dataclass(frozen=True)
class Sources:
    """Where a record's names, stack and kept bytes come from."""

    function: Callable[[str, int], str]  # (driver|runtime, callback id) -> CUPTI's name (cuMemAlloc_v2)
    resource: Callable[[int], str]  # resource callback id -> its name (CONTEXT_CREATED)
    status: Callable[[str, int], str]  # (driver|runtime, value) -> the status's name
    # stack id -> (frames, why there are none, library, the thread it was asked for)
    stack: Callable[[int], tuple[list | None, str | None, str | None, str | None]]
    blob: Callable[[int, int], bytes]  # (offset + 1, length) -> the kept bytes
    callers: Callable[[bytes], list[str]]  # a callers item -> the shared objects, innermost first


def event_of(row: Mapping, src: Sources) -> dict:
    """The event of one record (a numpy record, or any mapping of ``native.RECORD_FIELDS``' names)."""
    return events_of_rows([tuple(int(row[name]) for name, _type in native.RECORD_FIELDS)], src)[0]


_I = {name: i for i, (name, _type) in enumerate(native.RECORD_FIELDS)}


def events_of_rows(rows: list[tuple], src: Sources) -> list[dict]:
    """``event_of`` of each row (a tuple in ``native.RECORD_FIELDS``' order, as numpy's ``tolist`` gives), the
    same dicts in the same key order: what depends only on the record's function (its name, its kind, the
    names of its kept parameters) and on its status value is worked out once per distinct one, not per record."""
    calls: dict[tuple[int, int], tuple] = {}
    statuses: dict[tuple[str, int], str] = {}
    (start, end, context_i, a, b, c, d, e_i, tid_i, cbid_i, corr_i, uid_i, status_i, stack_i, blob_i, blob_len_i,
     domain_i, flags_i) = (_I[k] for k in ("start", "end", "context", "a", "b", "c", "d", "e", "tid", "cbid",
                                            "correlation", "context_uid", "status", "stack", "blob", "blob_len",
                                            "domain", "flags"))
    out = []
    for row in rows:
        domain, cbid = row[domain_i], row[cbid_i]
        known = calls.get((domain, cbid))
        if known is None:
            known = calls[(domain, cbid)] = _call_of(domain, cbid, src)
        event: dict
        if known[0] == "resource":
            name = known[1]
            event = {"domain": "resource", "name": name, "context": row[context_i], "tid": row[tid_i],
                     "start": row[start]}
            if known[2] and row[a]:
                event["stream"] = row[a]
            if known[3]:
                event["module_id"] = row[b]
            if row[uid_i]:
                event["context_uid"] = row[uid_i]
        else:
            kind, name, fields = known
            value = row[status_i]
            status = statuses.get((kind, value))
            if status is None:
                status = statuses[(kind, value)] = src.status(kind, value)
            event = {"domain": kind, "name": name, "tid": row[tid_i], "start": row[start], "end": row[end],
                     "correlation": row[corr_i], "status": status, "context": row[context_i],
                     "context_uid": row[uid_i]}
            if fields:
                event["args"] = dict(zip(fields, (row[a], row[b], row[c], row[d], row[e_i]), strict=False))
            flags = row[flags_i]
            if flags & native.NESTED_IN_RUNTIME:
                event["from"] = "callback"
            if flags & native.NO_EXIT:
                event["no_exit"] = True
            if row[blob_i]:
                kept = src.blob(row[blob_i], row[blob_len_i])
                if kept[:4] == _CALLERS:
                    event["callers"] = src.callers(kept)
                else:
                    event["arguments"] = kept
            elif flags & native.BLOB_DROPPED:
                event["arguments_dropped"] = True
        if row[stack_i]:
            frames, reason, library, asked_by = src.stack(row[stack_i])
            if frames is not None:
                event["stack"] = frames
            else:
                event["stack_missing"] = reason
            if library:
                event["library"] = library
            if asked_by:
                event["asked_by"] = asked_by
        out.append(event)
    return out


def _call_of(domain: int, cbid: int, src: Sources) -> tuple:
    """What a record's function gives every record of it: ("resource", name, stream?, module?) or
    (driver|runtime, public name, names of its kept parameters)."""
    if domain == native.DOMAIN_RESOURCE:
        name = src.resource(cbid)
        return "resource", name, name.startswith("STREAM"), name.startswith("MODULE")
    kind = "driver" if domain == native.DOMAIN_DRIVER else "runtime"
    raw = src.function(kind, cbid)
    fields = tuple(named_args(raw, (0,) * 5, runtime=kind == "runtime"))
    return kind, api_name(kind, raw), fields
