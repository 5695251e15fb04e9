"""The real-world scorer (tests/gpu/test_realworld.py: ``score``, ``_score_one``, ``outcomes``) where the hand-mutant
pass (docs/testing.md, "Hand mutants") found it untested: a finding counts only on its expected thread, an info
finding that matched is no extra, a sticky error counts only with its symptom's line, and an alternative outcome
is what it names and nothing of the first outcome (CPU only)."""

from __future__ import annotations

import json

import pytest

from tests.gpu.test_realworld import MANIFEST, marked_line, score

UNDEFINED = "examples/realworld/destroyed_handle_stream_synced_by_buffer_del.py"
WITH_INFO = "examples/realworld/nonprimary_torch_under_created_context.py"
STICKY = "examples/realworld/sticky_cupy_scatter_past_output_torch_reports.py"


def entry_of(program: str) -> dict:
    with open(MANIFEST) as handle:
        return next(e for e in json.load(handle) if e["program"] == program)


def found(rule: str, program: str, marker: str | None, thread: str, severity: str = "error", **more) -> dict:
    """A finding as the audit's JSON report has it, at the marker's line (None: no location)."""
    where = {"file": program, "line": marked_line(program, marker)} if marker else None
    return {"rule": rule, "severity": severity, "thread": thread, "location": where, **more}


def the_crash(thread: str) -> dict:
    return {"findings": [found("program-crashed", UNDEFINED, "HAZARD: program-crashed", thread)],
            "ending": {"how": "signal"}}


def test_a_finding_on_another_thread_than_expected_is_missed_and_extra():
    entry = entry_of(UNDEFINED)
    assert score(entry, the_crash("aligner"))["exact"]
    result = score(entry, the_crash("MainThread"))
    assert not result["exact"] and [m["rule"] for m in result["missed"]] == ["program-crashed"]
    assert [(x["rule"], x["thread"]) for x in result["extra"]] == [("program-crashed", "MainThread")]


def with_info(thread: str) -> dict:
    return {"findings": [found("non-primary-current", WITH_INFO, "HAZARD: non-primary-current", "MainThread",
                               severity="warning"),
                         found("several-runtime-copies", WITH_INFO, None, thread, severity="info")],
            "ending": {"how": "exit"}}


def test_an_expected_info_finding_that_matched_is_not_extra():
    result = score(entry_of(WITH_INFO), with_info("MainThread"))
    assert result["missed"] == [] and result["extra"] == [] and result["exact"]


def test_an_info_finding_on_another_thread_is_missed_and_extra():
    result = score(entry_of(WITH_INFO), with_info("worker"))
    assert [m["rule"] for m in result["missed"]] == ["several-runtime-copies"]
    assert [(x["rule"], x["thread"]) for x in result["extra"]] == [("several-runtime-copies", "worker")]


@pytest.mark.parametrize("related, exact", [("symptom", True), ("hazard", False), ("none", False)])
def test_a_sticky_error_counts_only_where_it_names_the_line_where_it_surfaced(related, exact):
    entry = entry_of(STICKY)
    line = {"symptom": marked_line(STICKY, "SYMPTOM: sticky-error"),
            "hazard": marked_line(STICKY, "HAZARD: sticky-error"), "none": None}[related]
    rows = [{"what": "surfaced at", "location": {"file": STICKY, "line": line}}] if line else []
    doc = {"findings": [found("sticky-error", STICKY, "HAZARD: sticky-error", "MainThread", related=rows)]
           + [found(i["rule"], STICKY, None, i["thread"], severity="info") for i in entry.get("info", ())],
           "ending": {"how": "exit"}}
    result = score(entry, doc)
    assert result["exact"] is exact
    assert [m["rule"] for m in result["missed"]] == ([] if exact else ["sticky-error"])


def test_an_alternative_outcome_expects_no_info_of_the_first_outcome():
    entry = {**entry_of(UNDEFINED), "info": [{"rule": "several-runtime-copies", "thread": "MainThread"}]}
    refused = {"findings": [found("handle-destroyed", UNDEFINED, "HAZARD: handle-destroyed", "aligner",
                                  because={"location": {"line": marked_line(UNDEFINED, "CAUSE: handle-destroyed")}})],
               "ending": {"how": "exit"}}
    result = score(entry, refused)
    assert result["exact"] and result["outcome"] == 1


def test_an_alternative_that_names_no_ending_expects_the_program_to_exit():
    first = entry_of(UNDEFINED)
    (alternative,) = first["alternatives"]
    entry = {**first, "alternatives": [{"findings": alternative["findings"]}]}  # no "ends": the program exits
    refused = {"findings": [found("handle-destroyed", UNDEFINED, "HAZARD: handle-destroyed", "aligner",
                                  because={"location": {"line": marked_line(UNDEFINED, "CAUSE: handle-destroyed")}})],
               "ending": {"how": "exit"}}
    result = score(entry, refused)
    assert result["exact"] and result["outcome"] == 1 and result["ending_as_expected"]
