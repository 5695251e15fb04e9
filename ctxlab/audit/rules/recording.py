"""What the flight recording could not hold: a recording that filled up (its ``--record-limit``, or half the
free disk where it lies) keeps counting what it dropped. The audit judges what was recorded and says what was
not, so a report of a truncated run never reads as a judged one."""

from __future__ import annotations

from ctxlab.audit.engine import Hit, Stream
from ctxlab.audit.rules.rule import NO_CLAIM, Rule

RECORDING_FULL = "RECORDING_FULL"  # the audit event ``run._stream`` adds where the recording dropped anything
DROPPED = ("dropped_records", "dropped_stacks", "dropped_bytes")


def recording_full_event(counts: dict, last: dict | None) -> dict | None:
    """The audit event that stands for what a recording dropped (``Flight.counts``), after its last recorded
    event (whose thread it is put on); None when nothing was dropped."""
    dropped = {key: int(counts.get(key) or 0) for key in DROPPED}
    if not any(dropped.values()):
        return None
    last = last or {}
    return {"domain": "audit", "name": RECORDING_FULL, "tid": last.get("tid", 0),
            "start": int(last.get("end", last.get("start", 0)) or 0) + 1, "records": int(counts.get("records") or 0),
            **dropped}


def _what_was_lost(e: dict) -> list[str]:
    lost = []
    if e.get("dropped_records"):
        lost.append(f"{e['dropped_records']:,} calls after the first {e.get('records', 0):,} were not recorded "
                    f"and are not judged")
    if e.get("dropped_stacks"):
        lost.append(f"{e['dropped_stacks']:,} Python stacks were not kept (those calls have no line of their own)")
    if e.get("dropped_bytes"):
        lost.append(f"{e['dropped_bytes']:,} bytes of names and kernel arguments were not kept (launches past "
                    f"them are not followed into memory)")
    return lost


def recording_full(s: Stream) -> list[Hit]:
    """The recording filled up: what it dropped, and that the findings cover only what it kept."""
    return [Hit(e, f"the flight recording was full: {'; '.join(_what_was_lost(e))}. The findings cover what was "
                   f"recorded. Give --record-limit more room (or free disk where the recording lies) to judge the "
                   f"whole run", cause_missing="the recording's size bound, not a call of the program")
            for e in s.observed if e.get("name") == RECORDING_FULL]


RECORDING_FULL_RULE = Rule(
    "recording-full", "warning", "The flight recording filled up: part of the run is not judged",
    "The C callback writes every call into a file mapped in shared memory, bounded by --record-limit (or "
    "half the free disk where it lies). Once it is full, what does not fit is counted, not written, and the "
    "program runs on. The findings then cover the calls that were recorded; this finding says how many "
    "calls, stacks and argument bytes were dropped, so a clean report of a truncated run does not read as "
    "clean.",
    NO_CLAIM, recording_full,
    "Which calls were dropped is not known, only how many: they came after the last recorded one.")
