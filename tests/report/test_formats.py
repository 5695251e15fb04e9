"""The one format registry (ctxlab.report.formats): every format registered once, every command looks it up,
so show and check write the same bytes for the same runs in the same format."""

from __future__ import annotations

import pytest

from ctxlab.cli.fleet import REPORT_OPTIONS, check_reports
from ctxlab.cli.report import render_for
from ctxlab.output import write_outputs
from ctxlab.records.files import load_runs
from ctxlab.report import FORMATS, render
from ctxlab.report.formats import REGISTRY, View, format_named, text_of, write
from tests.conftest import RESULTS
from tests.hostile import invoke

CHECK = RESULTS / "check.json"


def test_each_format_is_registered_once_with_a_suffix_and_a_writer():
    assert FORMATS == tuple(REGISTRY) and len(set(FORMATS)) == len(FORMATS)
    runs = load_runs(CHECK)[:1]
    for name, fmt in REGISTRY.items():
        assert fmt.name == name and fmt.suffix.startswith(".") and fmt.help
        assert callable(write(runs, name)) is fmt.streams, name  # a streaming format hands back its chunks
    assert {kind for kind, _ in REPORT_OPTIONS} <= set(REGISTRY)  # check's report options write registered ones


@pytest.mark.parametrize("fmt", FORMATS)
def test_show_and_check_write_the_same_bytes_for_the_same_runs(fmt, tmp_path):
    runs = load_runs(CHECK)
    shown = tmp_path / f"show{REGISTRY[fmt].suffix}"
    result = invoke("show", str(CHECK), "--format", fmt, "-o", str(shown))
    assert result.exit_code == 0, result.output
    checked = tmp_path / f"check{REGISTRY[fmt].suffix}"
    write_outputs(check_reports(runs, None, [(fmt, str(checked))]))
    assert shown.read_bytes() == checked.read_bytes()
    assert text_of(render_for(runs, fmt, str(checked))) == checked.read_text()
    if fmt != "table":  # the API's render: the same text (the table: the same at its plain 80 columns)
        assert render(runs, fmt) == checked.read_text()


def test_the_summary_is_a_format_of_its_own_with_the_drift():
    runs = load_runs(CHECK)
    drift = [{"lab": "migrate", "device": 0, "item": "migrate.x", "change": "verdict", "was": "holds", "now": "fails"}]
    summary = text_of(write(runs, "summary", View(drifted=drift)))
    assert summary.startswith("# ctxlab check") and "migrate.x on GPU 0: verdict: now fails (was holds)" in summary
    assert text_of(write(runs, "markdown")) != text_of(write(runs, "summary"))


def test_an_unknown_format_names_the_registered_ones():
    with pytest.raises(ValueError, match="unknown format 'yaml': choose one of table, json"):
        format_named("yaml")
