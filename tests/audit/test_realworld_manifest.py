"""examples/realworld/manifest.json against its programs, on the CPU: every entry's program exists, each expected
finding's marker (``# HAZARD: <rule>``) and cause marker (``# CAUSE: <rule>``) is on exactly one line of it, no
marker line is left that no entry names, clean programs carry none; and the GPU suite's scorer
(tests/gpu/test_realworld.py, ``score``) matches a finding only where its ``because`` is at the cause's line."""

import json
import os
import re

import pytest

from tests.gpu.test_realworld import MANIFEST, ROOT, marked_line, outcomes, score

MARK = re.compile(r"# (HAZARD|CAUSE): ([a-z-]+)")


def entries() -> list[dict]:
    with open(MANIFEST) as handle:
        return json.load(handle)


def marks(program: str) -> list[tuple[str, str, int]]:
    """(kind, rule, line) of every HAZARD and CAUSE marker in a program."""
    with open(os.path.join(ROOT, program)) as handle:
        return [(m.group(1), m.group(2), i) for i, line in enumerate(handle, 1) for m in MARK.finditer(line)]


def test_the_manifest_lists_each_program_once():
    programs = [e["program"] for e in entries()]
    assert len(programs) == len(set(programs))
    for entry in entries():
        assert os.path.isfile(os.path.join(ROOT, entry["program"])), entry["program"]
        assert entry["kind"] in ("hazard", "clean"), entry
        assert entry["report"].startswith("https://"), entry


@pytest.mark.parametrize("entry", entries(), ids=lambda e: os.path.basename(e["program"]))
def test_each_expected_marker_and_cause_is_on_exactly_one_line(entry):
    if entry["kind"] == "clean":
        assert entry["findings"] == [] and "alternatives" not in entry, entry
    wanted = [want for outcome in outcomes(entry) for want in outcome["findings"]]
    for want in wanted:
        assert want["marker"].startswith("HAZARD: "), want  # a finding may share its line's marker (two rules)
        marked_line(entry["program"], want["marker"])  # asserts exactly one line
        if "cause" in want:
            assert want["cause"] == f"CAUSE: {want['rule']}", want
            assert marked_line(entry["program"], want["cause"]) != marked_line(entry["program"], want["marker"])
    named = {w["marker"] for w in wanted} | {w["cause"] for w in wanted if "cause" in w}
    left = [(kind, rule, line) for kind, rule, line in marks(entry["program"]) if f"{kind}: {rule}" not in named]
    assert not left, f"{entry['program']}: marker lines no entry names: {left}"


def test_every_cause_marker_has_its_hazard_in_the_same_program():
    for entry in entries():
        for kind, rule, line in marks(entry["program"]):
            if kind == "CAUSE":
                assert any(k == "HAZARD" and r == rule for k, r, _ in marks(entry["program"])), (entry, line)


PROGRAM = "examples/realworld/order_cupy_wait_event_never_recorded.py"


def finding(rule: str, line: int, because: int | None, thread: str = "MainThread") -> dict:
    where = {"file": os.path.join(ROOT, PROGRAM), "line": because, "function": "main"} if because else None
    return {"rule": rule, "severity": "error", "thread": thread, "location": {"file": PROGRAM, "line": line},
            "because": {"what": "", "call": "", "thread": thread, "location": where, "library": "",
                        "in_record": because is not None}}


def lines(rule: str) -> tuple[int, int]:
    return marked_line(PROGRAM, f"HAZARD: {rule}"), marked_line(PROGRAM, f"CAUSE: {rule}")


def the_entry() -> dict:
    return next(e for e in entries() if e["program"] == PROGRAM)


def test_the_scorer_matches_a_finding_whose_because_is_at_the_cause_line():
    wait, created = lines("wait-orders-nothing")
    read, launched = lines("unordered-access")
    doc = {"findings": [finding("wait-orders-nothing", wait, created), finding("unordered-access", read, launched)]}
    result = score(the_entry(), doc)
    assert [m["rule"] for m in result["matched"]] == ["wait-orders-nothing", "unordered-access"]
    assert [m["cause_line"] for m in result["matched"]] == [created, launched]
    assert result["missed"] == [] and result["extra"] == []


@pytest.mark.parametrize("because", ["wrong line", "none"])
def test_the_scorer_misses_a_finding_at_the_right_line_with_the_wrong_cause(because):
    wait, created = lines("wait-orders-nothing")
    read, launched = lines("unordered-access")
    cause = {"wrong line": wait, "none": None}[because]  # the wait's own line is not the event's creation
    doc = {"findings": [finding("wait-orders-nothing", wait, cause), finding("unordered-access", read, launched)]}
    result = score(the_entry(), doc)
    assert [m["rule"] for m in result["matched"]] == ["unordered-access"]
    assert [m["rule"] for m in result["missed"]] == ["wait-orders-nothing"]
    assert [(x["rule"], x["line"]) for x in result["extra"]] == [("wait-orders-nothing", wait)]
    assert result["found"][0]["because_line"] == cause


def test_the_scorer_ignores_the_because_where_the_entry_names_no_cause():
    entry = next(e for e in entries() if e["findings"] and all("cause" not in w for w in e["findings"]))
    found = [finding(w["rule"], marked_line(entry["program"], w["marker"]), None, w["thread"])
             for w in entry["findings"]]
    info = [{"rule": i["rule"], "severity": "info", "thread": i["thread"], "location": None}
            for i in entry.get("info", ())]
    doc = {"findings": found + info}
    result = score(entry, doc)
    assert result["missed"] == [] and result["extra"] == [], result


UNDEFINED = "examples/realworld/destroyed_handle_stream_synced_by_buffer_del.py"


def undefined_lines() -> tuple[int, int, int]:
    """The crash's line, the refusal's line and the destroy's line of the program with two outcomes."""
    return (marked_line(UNDEFINED, "HAZARD: program-crashed"), marked_line(UNDEFINED, "HAZARD: handle-destroyed"),
            marked_line(UNDEFINED, "CAUSE: handle-destroyed"))


def test_the_scorer_takes_an_alternative_outcome_the_program_meets_exactly():
    entry = next(e for e in entries() if e["program"] == UNDEFINED)
    crashed, refused, destroyed = undefined_lines()
    crash = {"findings": [finding("program-crashed", crashed, None, "aligner")], "ending": {"how": "signal"}}
    first = score(entry, crash)
    assert first["exact"] and first["outcome"] == 0
    refusal = {"findings": [finding("handle-destroyed", refused, destroyed, "aligner")], "ending": {"how": "exit"}}
    second = score(entry, refusal)
    assert second["exact"] and second["outcome"] == 1 and [m["rule"] for m in second["matched"]] == ["handle-destroyed"]


@pytest.mark.parametrize("broken", ["refusal ending by signal", "refusal without its because", "crash ending by exit"])
def test_an_outcome_met_only_in_part_is_scored_against_the_first(broken):
    entry = next(e for e in entries() if e["program"] == UNDEFINED)
    crashed, refused, destroyed = undefined_lines()
    doc = {"refusal ending by signal": {"findings": [finding("handle-destroyed", refused, destroyed, "aligner")],
                                        "ending": {"how": "signal"}},
           "refusal without its because": {"findings": [finding("handle-destroyed", refused, None, "aligner")],
                                           "ending": {"how": "exit"}},
           "crash ending by exit": {"findings": [finding("program-crashed", crashed, None, "aligner")],
                                    "ending": {"how": "exit"}}}[broken]
    result = score(entry, doc)
    assert not result["exact"] and result["outcome"] == 0
    assert [m["rule"] for m in result["missed"]] == ([] if broken == "crash ending by exit" else ["program-crashed"])
