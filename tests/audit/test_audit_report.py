"""The audit's reports: SARIF 2.1.0's required structure (checked offline), JSON, JUnit and the table;
hostile strings from the audited program (thread names, file names, exception text) escaped in every
format."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from ctxlab.audit import RULES
from ctxlab.audit.engine import Finding, Location
from ctxlab.audit.report import AUDIT_FORMATS, render, render_table, to_sarif
from ctxlab.audit.run import AuditResult
from tests.hostile import HTML_EVIDENCE, HTML_HOST, TERMINAL_ESCAPES

HOSTILE = HTML_EVIDENCE + TERMINAL_ESCAPES + "[bold]markup[/bold] `code` *star* \u202e"
SARIF_LEVELS = {"none", "note", "warning", "error"}


def result(hostile: bool = False) -> AuditResult:
    text = HOSTILE if hostile else "cuMemAlloc_v2 returned CUDA_ERROR_INVALID_CONTEXT"
    where = Location(f"dir/{HTML_HOST}.py" if hostile else "examples/hazards/no_context.py", 23,
                     HTML_EVIDENCE if hostile else "stranger")
    findings = [Finding("no-context", "error", text, HOSTILE if hostile else "stranger", where, "callback",
                        (where, Location("app.py", 9, "main")), (text,), "migrate.driver-call-without-context",
                        (("destroyed at", Location("app.py", 3, "main")),)),
                Finding("several-runtime-copies", "info", "2 runtime calls", "MainThread", None, "none", (), (),
                        "refcount.reference-per-runtime-copy")]
    return AuditResult(program=HOSTILE if hostile else "examples/hazards/no_context.py", exit_status=0,
                       findings=findings, stats={"api_calls": 3})


def test_sarif_has_what_sarif_2_1_0_requires():
    doc = json.loads(render(result(), "sarif"))
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    (run,) = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] and isinstance(driver["version"], str)
    ids = [r["id"] for r in driver["rules"]]
    assert ids == [r.id for r in RULES] and len(set(ids)) == len(ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert rule["defaultConfiguration"]["level"] in SARIF_LEVELS
        # a rule stands on a lab claim, or says that its evidence is the calls' own statuses
        assert rule["properties"]["claim"] or "the calls' own statuses and parameters" in rule["help"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is True and run["invocations"][0]["exitCode"] == 0
    first, second = run["results"]
    for item in run["results"]:
        assert item["ruleId"] in ids and driver["rules"][item["ruleIndex"]]["id"] == item["ruleId"]
        assert item["level"] in SARIF_LEVELS and item["message"]["text"]
    assert first["level"] == "error" and second["level"] == "note"
    (loc,) = first["locations"]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "examples/hazards/no_context.py"
    assert loc["physicalLocation"]["region"] == {"startLine": 23}
    assert [f["location"]["physicalLocation"]["region"]["startLine"] for f in first["stacks"][0]["frames"]] == [23, 9]
    assert first["relatedLocations"][0]["message"]["text"] == "destroyed at"
    assert "locations" not in second  # no stack known: no made-up location


def test_sarif_uris_are_percent_encoded_uri_references():
    doc = to_sarif(result(hostile=True))
    uri = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert re.fullmatch(r"[A-Za-z0-9/:._~%-]+", uri), uri


def test_json_report_round_trips():
    doc = json.loads(render(result(), "json"))
    assert doc["schema"] == "ctxlab-audit/2" and doc["exit_status"] == 0
    assert doc["counts"] == {"error": 1, "warning": 0, "info": 1}
    assert doc["findings"][0]["location"] == {"file": "examples/hazards/no_context.py", "line": 23,
                                              "function": "stranger"}
    assert {r["id"] for r in doc["rules"]} == {r.id for r in RULES}


def test_junit_has_a_case_per_rule_and_a_failure_per_error_rule():
    root = ET.fromstring(render(result(), "junit").split("\n", 1)[1])
    cases = root.iter("testcase")
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {"no-context"}
    assert len(list(root.iter("testcase"))) == len(RULES)


def test_table_names_rule_thread_location_and_claim():
    from ctxlab.report.screen import Screen

    text = render(result(), "table", Screen(width=200))  # one line each where the screen is wide enough
    assert "ERROR   no-context  thread stranger  examples/hazards/no_context.py:23 in stranger" in text
    assert "ctxlab claims (migrate.driver-call-without-context)" in text
    assert "location unknown" in text and "exited with status 0" in text


@pytest.mark.parametrize("fmt", AUDIT_FORMATS)
def test_hostile_strings_are_escaped_in_every_format(fmt):
    text = render(result(hostile=True), fmt)
    for char in ("\x1b", "\x9b", "\x07", "\x00", "\u202e"):
        assert char not in text, (fmt, repr(char))
    if fmt in ("json", "sarif"):
        json.loads(text)  # control characters only as JSON escapes
        assert "<script>" in text or "\\u003cscript" in text  # data, not markup: JSON viewers show it as text
    if fmt == "junit":
        ET.fromstring(text.split("\n", 1)[1])
        assert "<script>" not in text and "<img" not in text
    if fmt == "table":
        assert "red" in text and "[bold]markup[/bold]" in text  # shown as text, controls stripped


def test_the_table_fits_the_screen_and_colours_severity_only_where_it_may():
    from ctxlab.report.screen import Screen, text_width

    for width in (60, 80, 200):
        text = render_table(result(), Screen(width=width))
        assert all(text_width(line) <= width for line in text.splitlines()), width
        assert "\x1b[" not in text
    wide = render_table(result(), Screen(width=200))
    assert len(wide.splitlines()) < len(render_table(result(), Screen(width=60)).splitlines())
    coloured = render_table(result(), Screen(width=80, colour=True))
    assert "\x1b[1;97;41mERROR" in coloured  # an error stands out


def test_the_summary_line_says_how_many_repeated_calls_were_judged_as_counts():
    from ctxlab.audit.report import summary_line

    plain = result()
    assert "judged as counts" not in summary_line(plain)
    plain.stats = {"folded": {"calls": 12345, "by_call": {"cuCtxGetCurrent": 12345}, "tail_kept": 64}}
    line = summary_line(plain)
    assert "12345 repeated call(s) judged as counts (the last 64 of each thread kept whole)" in line
    assert " ".join(line.split()) in " ".join(render_table(plain).split())  # wrapped to the screen
