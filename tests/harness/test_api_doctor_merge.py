"""ctxlab.doctor() and ctxlab.merge(): what the CLI's doctor and report merge show, from Python."""

import pytest

import ctxlab
from ctxlab.records.model import ResultFileError
from tests.conftest import RESULTS


def test_doctor_reports_what_is_missing_here_without_raising():
    report = ctxlab.doctor()
    assert {"driver", "missing"} <= report.keys() and isinstance(report["missing"], list)


def test_merge_reads_each_runners_file_in_order():
    files = [RESULTS / "check.json", RESULTS / "check-all-devices.json"]
    loaded = ctxlab.merge(files)
    assert [path for path, _ in loaded] == [str(f) for f in files]
    assert all(runs for _, runs in loaded)
    from ctxlab.report.merge import render_markdown

    assert "migrate.state-follows-context" in render_markdown(loaded)  # the renderers take what merge gives


def test_merge_refuses_a_file_that_is_not_a_result_naming_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(ResultFileError, match="bad.json"):
        ctxlab.merge([RESULTS / "check.json", bad])


def test_the_cli_doctor_and_merge_go_through_the_api(monkeypatch):
    from click.testing import CliRunner

    from ctxlab.cli import cli

    seen = []
    monkeypatch.setattr("ctxlab.api.doctor", lambda: seen.append("doctor") or {"missing": [], "driver": {}})
    CliRunner().invoke(cli, ["doctor", "--format", "json"])
    monkeypatch.setattr("ctxlab.api.merge", lambda files, *a, **k: seen.append("merge") or [])
    CliRunner().invoke(cli, ["report", "merge", str(RESULTS / "check.json")])
    assert seen == ["doctor", "merge"]
