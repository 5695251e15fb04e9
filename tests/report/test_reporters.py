import xml.etree.ElementTree as ET

from junitparser import JUnitXml

from ctxlab.records.model import ClaimResult, LabResult
from ctxlab.report import render
from tests.records.test_record import sample


def mixed() -> LabResult:
    claims = tuple(ClaimResult(f"lab.{v}", f"statement {v}", "src", v, f"evidence for {v}")
                   for v in ("holds", "fails", "changed", "observed", "skipped"))
    base = sample()
    return LabResult(base.lab, base.started, base.seconds, base.environment, base.options, base.observations,
                     claims, base.errors, base.metrics)


def test_junit_counts_and_properties(tmp_path):
    text = render([mixed()], "junit")
    ET.fromstring(text.split("\n", 1)[1])  # well-formed XML after the declaration
    path = tmp_path / "r.xml"
    path.write_text(text)
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    assert suite.tests == 6 and suite.failures == 1 and suite.skipped == 1 and suite.errors == 1
    cases = {case.name: case for case in suite}
    assert [type(r).__name__ for r in cases["lab.fails"].result] == ["Failure"]
    assert cases["lab.fails"].result[0].message == "evidence for fails"
    assert [type(r).__name__ for r in cases["lab.skipped"].result] == ["Skipped"]
    assert cases["lab.holds"].result == [] and cases["lab.changed"].result == []
    props = {p.name: p.value for p in suite.properties()}
    assert props["gpu"] == "NVIDIA H200" and props["driver_version"] == "13000"


def test_table_shows_timeline_verdicts_and_errors():
    text = render([mixed()], "table", steps=True)
    for piece in ("timeline", "worker-2", "context made", "lab.fails", "fails", "error in x", "5 claims"):
        assert piece in text
    assert "cuCtxPushCurrent" in text  # trace events show under their step


def test_markdown_has_claims_and_timeline():
    text = render([mixed()], "markdown")
    assert "| **fails** | lab.fails: statement fails | evidence for fails | src |" in text
    assert "| s | 0 | worker-1 | setup | 1 (0x2a) | context made |" in text


def test_a_labs_step_table_shows_its_fields_as_columns():
    import dataclasses

    from ctxlab.labs import get_lab
    from ctxlab.records.shapes import runs_from_document
    from tests.conftest import recorded

    # The step table comes from the record's own views (a report never imports the labs).
    views = dict(get_lab("refcount").views)
    runs = [dataclasses.replace(r, views=views) for r in runs_from_document(recorded("refcount.json"))]
    table = render(runs, "table", width=200, steps=True)
    assert "refcount: state" in table and "lab retains" in table and "pointer status" in table
    assert "refcount: timeline" in table  # what the step table does not cover still shows
    md = render(runs, "markdown")
    assert "### state" in md and "| scenario | thread | step | context | active | flags | lab retains |" in md
