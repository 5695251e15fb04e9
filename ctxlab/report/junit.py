"""JUnit XML through junitparser: one testcase per claim, the environment as properties.

``fails`` is a failure and ``error`` an error; ``skipped`` a skip with its reason; a
scenario that crashed in its child process is an error; other verdicts pass. Every
text from the record goes through ``escape.xml``: characters XML cannot hold are
dropped, and junitparser escapes the rest.
"""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from ctxlab.records.model import LabResult
from ctxlab.report.escape import xml


def suite_for(run: LabResult) -> TestSuite:
    """One run as a test suite: a testcase per claim and per crashed scenario, the environment as properties."""
    suite = TestSuite(xml(f"ctxlab.{run.lab}"))
    suite.timestamp = xml(run.started)
    classname = xml(f"ctxlab.{run.lab}")
    for key, value in sorted(run.environment.items()):
        suite.add_property(xml(key), xml(value))
    for claim in run.claims:
        case = TestCase(xml(claim.id), classname=classname)
        if claim.verdict == "fails":
            case.result = [Failure(xml(claim.evidence), "fails")]
        elif claim.verdict == "error":
            case.result = [Error(xml(claim.evidence), "error")]
        elif claim.verdict in ("skipped", "unjudged"):  # JUnit has no other state for a claim not tried
            case.result = [Skipped(xml(claim.evidence))]
        case.system_out = xml(f"{claim.verdict}: {claim.evidence}\nstatement: {claim.statement}\n"
                              f"source: {claim.source}")
        suite.add_testcase(case)
    for error in run.errors:
        scenario = error.get("scenario") or "run"
        case = TestCase(xml(f"{run.lab}.{scenario}"), classname=classname)
        case.result = [Error(xml(error.get("message") or "error"), xml(error.get("kind") or "error"))]
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
