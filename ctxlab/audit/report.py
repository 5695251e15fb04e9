"""The audit's reports: a table for people, JSON (schema ctxlab-audit/1), JUnit XML and SARIF 2.1.0.

Every text that comes from the program (messages name its threads, files and functions) is escaped
for the format it lands in (``ctxlab.report.escape``): terminal controls removed from the table, XML
1.0's forbidden characters from JUnit; JSON and SARIF are written by ``json.dumps``, which escapes
control characters, and SARIF messages are plain ``text`` (never ``markdown``).
"""

from __future__ import annotations

import json
from urllib.parse import quote

from ctxlab.audit.engine import Finding, Stream
from ctxlab.audit.rules.catalogue import RULES
from ctxlab.audit.rules.rule import Rule
from ctxlab.records.schema import AUDIT_SCHEMA
from ctxlab.report.escape import one_line, terminal, xml
from ctxlab.report.screen import Screen, text_width, wrap
from ctxlab.version import __version__

AUDIT_FORMATS = ("table", "json", "junit", "sarif")
SCHEMA = AUDIT_SCHEMA
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def thread_rows(stream: Stream) -> list[dict]:
    """The report's row of each thread that made calls, as it was at the end: its last call, the call it was
    inside."""
    run = stream.run
    inside = {c.tid: c for c in (run.open_calls if run is not None else ())}
    out = []
    for tid, items in stream.by_tid.items():
        calls = [e for e in items if e.get("domain") in ("driver", "runtime")]
        if not calls:
            continue
        last = calls[-1]
        folded = run.folded_by_thread.get(tid, 0) if run is not None else 0
        row = {"tid": tid, "thread": last.get("thread", "?"), "calls": len(calls) + folded,
               "last_call": {"name": last.get("name"), "status": last.get("status"),
                             "location": (last.get("stack") or [None])[0]}}
        if tid in inside:
            row["inside"] = inside[tid].as_dict(run.seconds_inside.get(tid) if run is not None else None)
        out.append(row)
    return out


def ending_text(result) -> str:
    """How the program ended, in words."""
    ending = result.ending or {}
    how = ending.get("how", "exit")
    if how == "exit":
        return f"the program exited with status {result.exit_status}"
    if how == "signal":
        return f"the program {ending.get('detail') or 'died by a signal'} (status {result.exit_status})"
    return f"the program {ending.get('detail') or 'was stopped'}"


def summary_line(result) -> str:
    """The one line on standard error: counts by severity, probes, and how the program ended."""
    counts = result.counts()
    probes = sum(p.get("count", 0) for p in result.probes)
    probed = f", {probes} library probe(s) handled" if probes else ""
    folded = (result.stats or {}).get("folded") or {}
    counted = (f", {folded['calls']} repeated call(s) judged as counts (the last {folded.get('tail_kept', '?')} of "
               f"each thread kept whole)") if folded.get("calls") else ""
    return (f"ctxlab audit: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
            f"{probed}{counted}; {ending_text(result)}")


def render(result, fmt: str, screen: Screen | None = None) -> str:
    """The audit result in one of AUDIT_FORMATS (the table fitted to ``screen``)."""
    if fmt == "json":
        return render_json(result)
    if fmt == "junit":
        return render_junit(result)
    if fmt == "sarif":
        return json.dumps(to_sarif(result), indent=1) + "\n"
    if fmt == "table":
        return render_table(result, screen)
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(AUDIT_FORMATS)}")


def rule_dict(rule: Rule) -> dict:
    """A rule as the reports describe it."""
    return {"id": rule.id, "severity": rule.severity, "title": rule.title, "explanation": rule.explanation,
            "claim": rule.claim, "cannot_see": rule.cannot_see}


def render_json(result) -> str:
    """The audit as JSON (schema ctxlab-audit/1)."""
    doc = {"schema": SCHEMA, "program": result.program, "exit_status": result.exit_status,
           "ending": result.ending, "counts": result.counts(), "findings": [f.as_dict() for f in result.findings],
           "probes": result.probes, "threads": result.threads,
           "rules": [rule_dict(r) for r in RULES], "forks": result.forks, "exceptions": result.exceptions,
           "stats": result.stats}
    return json.dumps(doc, indent=1) + "\n"


def _where(f: Finding) -> str:
    if f.location is None:
        return "location unknown (no Python stack was taken for this call or near it)"
    text = f"{f.location}"
    if f.location.function:
        text += f" in {f.location.function}"
    if f.location_from == "nearby":
        text += " (approximate: the thread's last call with a Python stack)"
    elif f.location_from == "exception":
        text += " (where the program's exception was raised)"
    return text


SEVERITY_STYLE = {"error": "error", "warning": "changed", "info": "dim"}  # screen styles: error stands out


def render_table(result, screen: Screen | None = None) -> str:
    """The audit for people: each finding with its rule, place, stack and explanation, folded at word
    boundaries to the screen's width (80 columns where none is given), the severity coloured where the
    screen takes colour."""
    screen = screen or Screen()
    width = screen.width
    lines = wrap(terminal(f"audit of {one_line(result.program)}"), width)
    if (result.ending or {}).get("how", "exit") != "exit":
        lines.extend(wrap(terminal(one_line(f"  {ending_text(result)}")), width))
    if not result.findings:
        lines.append("  no hazards found")

    def fold(text: str, room: int) -> list[str]:
        return [text] if text_width(text) <= room else wrap(text, room)  # as written where it fits

    def block(text: str, first: str = "        ", rest: str = "          ") -> None:
        folded = fold(terminal(one_line(text)), max(20, width - len(rest)))
        lines.extend((first if i == 0 else rest) + line for i, line in enumerate(folded))

    for f in result.findings:
        head = f"{one_line(f.rule)}  thread {one_line(f.thread)}  {one_line(_where(f))}"
        tag = f"{f.severity.upper():7}"
        folded = fold(terminal(head), max(20, width - 8))
        lines.append(screen.paint(tag, SEVERITY_STYLE.get(f.severity)) + " " + folded[0])
        lines.extend("        " + line for line in folded[1:])
        block(f.message)
        block(str(f.because))
        if f.calls:
            block(f"calls: {'; '.join(f.calls)}")
        for what, loc in f.related:
            block(f"{what} {loc}")
        for frame in f.stack[1:4]:
            block(f"from {frame} in {frame.function}")
        block(f"evidence: ctxlab claims ({f.claim})" if f.claim else "evidence: the calls' own statuses and "
              "parameters (no lab claim)")
    for probe in result.probes:
        block(f"probe: {probe['call']} returned {probe['status']} {probe['count']} time(s), made by "
              f"{probe.get('library') or 'a library'} on purpose ({probe.get('why') or 'catalogued'})", first="  ",
              rest="    ")
    lines.extend(wrap(terminal(one_line(summary_line(result))), width))
    return "\n".join(lines) + "\n"


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
              "help": {"text": f"{r.explanation} Evidence: "
                               + (f"the lab claim {r.claim} (ctxlab claims). " if r.claim else
                                  "the calls' own statuses and parameters. ")
                               + f"What this rule cannot see: {r.cannot_see}"},
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
