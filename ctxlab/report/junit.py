"""JUnit XML through junitparser: one testcase per claim, the environment as properties.

``fails`` is a failure and ``error`` an error; ``skipped`` a skip with its reason; a
scenario that crashed in its child process is an error; other verdicts pass. Every
text from the record goes through ``escape.xml``: characters XML cannot hold are
dropped, and junitparser escapes the rest. Names (the lab, a claim id, a scenario, a
property's key) are cut after ``text.NAME_CHARS`` characters, saying so: the lab's is
repeated in every testcase's classname, so a long one would make the document grow
with the claims times its length. Evidence, messages and output are whole (a claim's
system-out cuts the evidence its result's message already holds whole).
"""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from ctxlab.records.model import LabResult
from ctxlab.report.escape import xml
from ctxlab.report.text import NAME_CHARS, TEXT_CHARS, capped


def _name(value: object) -> str:
    return xml(capped(value, NAME_CHARS))


def suite_for(run: LabResult) -> TestSuite:
    """One run as a test suite: a testcase per claim and per crashed scenario, the environment as properties."""
    classname = _name(f"ctxlab.{run.lab}")
    suite = TestSuite(classname)
    suite.timestamp = _name(run.started)
    for key, value in sorted(run.environment.items()):
        suite.add_property(_name(key), xml(value))
    for claim in run.claims:
        case = TestCase(_name(claim.id), classname=classname)
        evidence = xml(claim.evidence)
        if claim.verdict == "fails":
            case.result = [Failure(evidence, "fails")]
        elif claim.verdict == "error":
            case.result = [Error(evidence, "error")]
        elif claim.verdict in ("skipped", "unjudged"):  # JUnit has no other state for a claim not tried
            case.result = [Skipped(evidence)]
        if case.result:  # the evidence is whole in the result's message: the output's copy need not be
            evidence = xml(capped(claim.evidence, TEXT_CHARS, "the message above has them"))
        case.system_out = (f"{xml(claim.verdict)}: {evidence}\nstatement: {xml(claim.statement)}\n"
                           f"source: {xml(claim.source)}")
        suite.add_testcase(case)
    for error in run.errors:
        scenario = error.get("scenario") or "run"
        case = TestCase(_name(f"{capped(run.lab, NAME_CHARS)}.{scenario}"), classname=classname)
        case.result = [Error(xml(error.get("message") or "error"), _name(error.get("kind") or "error"))]
        seconds = run.timings.get(scenario)
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            case.time = round(float(seconds), 3)  # how long the scenario ran before it crashed or timed out
        if error.get("output_tail"):
            case.system_err = xml(error["output_tail"])
        suite.add_testcase(case)
    suite.time = round(run.seconds, 3)
    return suite


def render_junit(runs: list[LabResult]) -> str:
    """The runs as one JUnit XML document, with its XML declaration."""
    return junit_document("ctxlab", [suite_for(run) for run in runs])


def junit_document(name: str, suites: list) -> str:
    """Test suites as one JUnit XML document with its XML declaration (the labs' and the audit's reports)."""
    out = JUnitXml(name)
    for suite in suites:
        out.add_testsuite(suite)
    out.update_statistics()
    text = out.tostring()
    text = text.decode() if isinstance(text, bytes) else text
    if not text.startswith("<?xml"):
        text = '<?xml version="1.0" encoding="utf-8"?>\n' + text
    return text + "\n"
