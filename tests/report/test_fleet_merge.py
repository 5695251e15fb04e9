"""report merge at fleet scale (issue 28): the compiled schema check agrees with jsonschema, files are read
cut down and in child processes, and the fleet view comes first."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.records.model import ResultFileError
from ctxlab.report import fleet_load
from ctxlab.report.fleet_load import lean, load_for_merge
from ctxlab.report.fleet_view import differences
from ctxlab.report.merge import matrix, render_markdown
from ctxlab.schema import schema
from ctxlab.schema.compiled import Unsupported, compile_schema
from tests.conftest import RESULTS, recorded
from tests.hostile import invoke
from tests.records.test_loaders_fuzz import DELETE, json_values, mutate

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

VALIDATOR = jsonschema.Draft202012Validator(schema())
COMPILED = compile_schema(schema())
BASES = [recorded("refcount.json"), recorded("check-peer-devices-all.json"), recorded("fleet/check-no-gpu.json")]


@pytest.mark.parametrize("name", ["check.json", "check-all-devices.json", "interop.json", "peer.json",
                                  "migrate-green.json", "lifecycle-traced.json", "fleet/check-no-gpu.json"])
def test_compiled_check_accepts_every_recorded_result(name):
    doc = recorded(name)
    assert COMPILED(doc) and VALIDATOR.is_valid(doc)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(range(len(BASES))),
       path=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=6),
       value=json_values | st.just(DELETE) | st.sampled_from([1.0, -1, True, "", "9.0", "x", None, [], {}]))
def test_compiled_check_agrees_with_jsonschema(base, path, value):
    doc = mutate(BASES[base], path, value)
    try:
        expected = VALIDATOR.is_valid(doc)
    except (OverflowError, ValueError):  # jsonschema cannot compare it; the loader never accepts it then
        return
    assert COMPILED(doc) == expected


def test_an_unknown_keyword_does_not_compile():
    with pytest.raises(Unsupported):
        compile_schema({"type": "object", "patternProperties": {"x": {}}})
    check = compile_schema({"type": "integer", "minimum": 0})
    assert check(1.0) and not check(True) and not check(-1) and not check("1")


def test_lean_runs_keep_what_a_merge_shows():
    runs = ctxlab.load(RESULTS / "check.json")
    shared: dict[str, str] = {}
    thin = [lean(run, shared) for run in runs]
    assert all(not r.observations and all(not c.statement for c in r.claims) for r in thin)
    assert render_markdown([("a.json", runs)]) == render_markdown([("a.json", thin)])
    assert [c.evidence for r in thin for c in r.claims if c.verdict == "observed"] == \
        [c.evidence for r in runs for c in r.claims if c.verdict == "observed"]


def test_many_files_are_read_in_child_processes_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet_load, "PARALLEL_FROM", 2)
    doc = recorded("refcount.json")
    paths = []
    for n in range(6):
        path = tmp_path / f"r{n}.json"
        path.write_text(json.dumps({**doc, "environment": {**doc["environment"], "hostname": f"host-{n}"}}))
        paths.append(str(path))
    loaded = load_for_merge(paths, jobs=2)
    assert [origin for origin, _ in loaded] == paths
    assert [runs[0].environment["hostname"] for _, runs in loaded] == [f"host-{n}" for n in range(6)]
    (tmp_path / "r2.json").write_text("{")
    (tmp_path / "r4.json").write_text("[]")
    with pytest.raises(ResultFileError, match="r2.json"):  # the first bad file in the order given
        load_for_merge(paths, jobs=2)


def test_the_fleet_view_names_the_groups_that_differ():
    (run,) = ctxlab.load(RESULTS / "refcount.json")
    claim = next(c for c in run.claims if c.verdict == "holds")
    other = dataclasses.replace(run, environment={**run.environment, "driver_version": 12080, "hostname": "b"},
                                claims=tuple(dataclasses.replace(c, verdict="fails") if c is claim else c
                                             for c in run.claims))
    same = dataclasses.replace(run, environment={**run.environment, "hostname": "c"})
    files = [("a.json", [run]), ("b.json", [other]), ("c.json", [same])]
    found = differences(matrix(files))
    assert [row for row, _ in found] == [claim.id]
    md = render_markdown(files)
    assert md.startswith("## Where the fleet differs")
    assert "G1: NVIDIA H200 / driver 13000 / runtime 13020 / ctxlab 0.2.0: 2 runner(s)" in md
    assert f"**{claim.id}**: G1: holds ×2; G2: fails ×1" in md.replace("\\", "")


def test_one_group_keeps_the_matrix_first():
    assert render_markdown([("a.json", ctxlab.load(RESULTS / "refcount.json"))]).startswith("| claim |")


def test_merge_cli_over_many_files(tmp_path):
    doc = recorded("check.json")
    paths = []
    for n in range(60):  # above PARALLEL_FROM: the child processes read them
        path = tmp_path / f"runner-{n}.json"
        runs = [{**r, "environment": {**r["environment"], "hostname": f"gpu-{n}"}} for r in doc["runs"]]
        path.write_text(json.dumps({"schema": "ctxlab/1", "runs": runs}))
        paths.append(str(path))
    result = invoke("report", "merge", *paths, "-o", str(tmp_path / "m.md"))
    assert result.exit_code == 0, result.output
    header = next(line for line in (tmp_path / "m.md").read_text().splitlines() if line.startswith("| claim |"))
    assert header.count("gpu-") == 60
