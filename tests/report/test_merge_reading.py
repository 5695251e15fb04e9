"""``report merge`` reads each file once, straight into the lean runs it shows (issue 51 item 3): the same
runs as cutting down full records, in one process or in readers, with the cycle collector back as it was."""

from __future__ import annotations

import gc
import json

import pytest

from ctxlab.records.files import load_runs
from ctxlab.records.model import ResultFileError
from ctxlab.report import fleet_load
from ctxlab.report.fleet_load import lean, lean_from_dict, load_for_merge
from ctxlab.report.merge import render_html, render_markdown
from tests.conftest import RESULTS

RECORDED = sorted(str(p) for p in RESULTS.rglob("*.json"))


def readable(paths: list[str]) -> list[str]:
    out = []
    for path in paths:
        try:
            load_runs(path)
        except ResultFileError:
            continue
        out.append(path)
    return out


def test_lean_runs_are_made_as_cutting_down_full_records_made_them():
    paths = readable(RECORDED)
    assert len(paths) > 20
    for path in paths:
        shared: dict[str, str] = {}
        direct = load_runs(path, build=lambda data, shared=shared: lean_from_dict(data, shared))
        assert direct == [lean(run, {}) for run in load_runs(path)], path


def test_strings_are_shared_within_a_file_and_across_files(tmp_path):
    doc = json.loads((RESULTS / "check.json").read_text())
    paths = []
    for n in range(3):
        path = tmp_path / f"r{n}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    loaded = load_for_merge(paths, jobs=1)
    first, last = loaded[0][1][0].claims[0], loaded[-1][1][0].claims[0]
    assert first.id == last.id and first.id is last.id


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_matrix_is_the_same_however_the_files_are_read(tmp_path, monkeypatch, jobs):
    monkeypatch.setattr(fleet_load, "PARALLEL_FROM", 2)
    paths = readable(RECORDED)
    full = [(path, load_runs(path)) for path in paths]
    loaded = load_for_merge(paths, jobs=jobs)
    assert render_markdown(loaded) == render_markdown(full)
    assert render_html(loaded) == render_html(full)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_cycle_collector_is_left_as_it_was(tmp_path, enabled):
    (tmp_path / "bad.json").write_text("{")
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        load_for_merge([str(RESULTS / "check.json")], jobs=1)
        assert gc.isenabled() == enabled
        with pytest.raises(ResultFileError):
            load_for_merge([str(tmp_path / "bad.json")], jobs=1)
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
