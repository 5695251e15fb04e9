"""JUnit XML through junitparser: one testcase per claim, the environment as properties.

``fails`` is a failure; ``skipped`` a skip with its reason; a scenario that
crashed in its child process is an error; other verdicts pass.
"""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from ctxlab.record import LabResult


def suite_for(run: LabResult) -> TestSuite:
    suite = TestSuite(f"ctxlab.{run.lab}")
    suite.timestamp = run.started
    for key, value in sorted(run.environment.items()):
        suite.add_property(key, str(value))
    for claim in run.claims:
        case = TestCase(claim.id, classname=f"ctxlab.{run.lab}")
        if claim.verdict == "fails":
            case.result = [Failure(claim.evidence, "fails")]
        elif claim.verdict == "skipped":
            case.result = [Skipped(claim.evidence)]
        case.system_out = f"{claim.verdict}: {claim.evidence}\nstatement: {claim.statement}\nsource: {claim.source}"
        suite.add_testcase(case)
    for error in run.errors:
        case = TestCase(f"{run.lab}.{error.get('scenario', 'run')}", classname=f"ctxlab.{run.lab}")
        case.result = [Error(error.get("message", "error"), error.get("kind", "error"))]
        if error.get("output_tail"):
            case.system_err = error["output_tail"]
        suite.add_testcase(case)
    suite.time = round(run.seconds, 3)
    return suite


def render_junit(runs: list[LabResult]) -> str:
    xml = JUnitXml("ctxlab")
    for run in runs:
        xml.add_testsuite(suite_for(run))
    xml.update_statistics()
    text = xml.tostring()
    text = text.decode() if isinstance(text, bytes) else text
    if not text.startswith("<?xml"):
        text = '<?xml version="1.0" encoding="utf-8"?>\n' + text
    return text + "\n"
