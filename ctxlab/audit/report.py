"""The audit's reports: a table for people, JSON (schema ctxlab-audit/1), JUnit XML and SARIF 2.1.0.

Every text that comes from the program (messages name its threads, files and functions) is escaped
for the format it lands in (``ctxlab.report.escape``): terminal controls removed from the table, XML
1.0's forbidden characters from JUnit; JSON and SARIF are written by ``json.dumps``, which escapes
control characters, and SARIF messages are plain ``text`` (never ``markdown``).
"""

from __future__ import annotations

import json
from urllib.parse import quote

from ctxlab import __version__
from ctxlab.audit.engine import Finding
from ctxlab.audit.rules import RULES, Rule
from ctxlab.report.escape import one_line, terminal, xml

AUDIT_FORMATS = ("table", "json", "junit", "sarif")
SCHEMA = "ctxlab-audit/1"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def summary_line(result) -> str:
    """The one line on standard error: counts by severity and the program's exit status."""
    counts = result.counts()
    return (f"ctxlab audit: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info; "
            f"the program exited with status {result.exit_status}")


def render(result, fmt: str) -> str:
    """The audit result in one of AUDIT_FORMATS."""
    if fmt == "json":
        return render_json(result)
    if fmt == "junit":
        return render_junit(result)
    if fmt == "sarif":
        return json.dumps(to_sarif(result), indent=1) + "\n"
    if fmt == "table":
        return render_table(result)
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(AUDIT_FORMATS)}")


def rule_dict(rule: Rule) -> dict:
    """A rule as the reports describe it."""
    return {"id": rule.id, "severity": rule.severity, "title": rule.title, "explanation": rule.explanation,
            "claim": rule.claim, "cannot_see": rule.cannot_see}


def render_json(result) -> str:
    """The audit as JSON (schema ctxlab-audit/1)."""
    doc = {"schema": SCHEMA, "program": result.program, "exit_status": result.exit_status,
           "counts": result.counts(), "findings": [f.as_dict() for f in result.findings],
           "rules": [rule_dict(r) for r in RULES], "forks": result.forks, "exceptions": result.exceptions,
           "stats": result.stats}
    return json.dumps(doc, indent=1) + "\n"


def _where(f: Finding) -> str:
    if f.location is None:
        return "location unknown (only an activity record: no Python stack)"
    text = f"{f.location}"
    if f.location.function:
        text += f" in {f.location.function}"
    if f.location_from == "nearby":
        text += " (approximate: the thread's last call with a Python stack)"
    elif f.location_from == "exception":
        text += " (where the program's exception was raised)"
    return text


def render_table(result) -> str:
    """The audit for people: each finding with its rule, place, stack and explanation."""
    lines = [f"audit of {one_line(result.program)}"]
    if not result.findings:
        lines.append("  no hazards found")
    for f in result.findings:
        lines.append(f"{f.severity.upper():7} {one_line(f.rule)}  thread {one_line(f.thread)}  {one_line(_where(f))}")
        lines.append(f"        {one_line(f.message)}")
        if f.calls:
            lines.append(f"        calls: {one_line('; '.join(f.calls))}")
        for what, loc in f.related:
            lines.append(f"        {one_line(what)} {one_line(str(loc))}")
        for frame in f.stack[1:4]:
            lines.append(f"        from {one_line(str(frame))} in {one_line(frame.function)}")
        lines.append(f"        evidence: ctxlab claims ({one_line(f.claim)})")
    lines.append(one_line(summary_line(result)))
    return terminal("\n".join(lines)) + "\n"


def render_junit(result) -> str:
    """The audit as JUnit XML: a test case per rule, failed by its error findings."""
    from junitparser import Failure, TestCase, TestSuite

    from ctxlab.report.junit import junit_document

    suite = TestSuite(xml(f"ctxlab.audit {result.program}"))
    suite.add_property("program", xml(result.program))
    suite.add_property("exit_status", xml(result.exit_status))
    for rule in RULES:
        case = TestCase(xml(rule.id), classname="ctxlab.audit")
        mine = [f for f in result.findings if f.rule == rule.id]
        text = "\n".join(f"{f.severity}: {f.message} at {_where(f)} (thread {f.thread}; calls: {'; '.join(f.calls)})"
                         for f in mine)
        if any(f.severity == "error" for f in mine):
            case.result = [Failure(xml(mine[0].message), xml(rule.id))]
        if text:
            case.system_out = xml(text)
        suite.add_testcase(case)
    return junit_document("ctxlab audit", [suite])


def _uri(path: str) -> str:
    """A file as a SARIF artifact URI: relative paths stay relative (resolved against the repository root)."""
    return quote(path.replace("\\", "/"), safe="/:._-~")


def _location(loc) -> dict:
    return {"physicalLocation": {"artifactLocation": {"uri": _uri(loc.file)},
                                 "region": {"startLine": max(int(loc.line), 1)}}}


def to_sarif(result) -> dict:
    """SARIF 2.1.0: one run, the rules with their help, one result per finding at the user's file:line."""
    index = {rule.id: i for i, rule in enumerate(RULES)}
    rules = [{"id": r.id, "name": "".join(part.capitalize() for part in r.id.split("-")),
              "shortDescription": {"text": r.title}, "fullDescription": {"text": r.explanation},
              "help": {"text": f"{r.explanation} Evidence: the lab claim {r.claim} (ctxlab claims). "
                               f"What this rule cannot see: {r.cannot_see}"},
              "defaultConfiguration": {"level": SARIF_LEVELS[r.severity]},
              "properties": {"claim": r.claim, "severity": r.severity}} for r in RULES]
    results = []
    for f in result.findings:
        item: dict = {"ruleId": f.rule, "ruleIndex": index.get(f.rule, -1), "level": SARIF_LEVELS[f.severity],
                      "message": {"text": f"{f.message} (thread {f.thread}; calls: {'; '.join(f.calls)})"},
                      "properties": {"thread": f.thread, "claim": f.claim, "locationFrom": f.location_from}}
        if f.location is not None:
            item["locations"] = [_location(f.location)]
        if len(f.stack) > 1:
            item["stacks"] = [{"message": {"text": "the user's Python stack"},
                               "frames": [{"location": {**_location(frame), "message": {"text": frame.function}}}
                                          for frame in f.stack]}]
        if f.related:
            item["relatedLocations"] = [{"id": i, **_location(loc), "message": {"text": what}}
                                        for i, (what, loc) in enumerate(f.related)]
        results.append(item)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "ctxlab audit", "version": __version__, "rules": rules}},
                      "invocations": [{"executionSuccessful": True, "exitCode": result.exit_status,
                                       "commandLine": result.program}],
                      "results": results}]}
