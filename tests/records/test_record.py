import json

import pytest

from ctxlab.output import check_writable, write_output
from ctxlab.records.files import load_runs
from ctxlab.records.model import ClaimResult, LabResult, Observation, ResultFileError, dumps


def sample(lab="demo", verdict="holds") -> LabResult:
    return LabResult(
        lab=lab, started="2026-11-30T00:00:00+00:00", seconds=1.5,
        environment={"driver_version": 13000, "gpu": "NVIDIA H200", "compute_capability": "9.0"},
        options={"device": 0},
        observations=(Observation("setup", "worker-1", 1, "context made", {"handle": 42}, context=42,
                                  scenario="s", round=0),
                      Observation("handoff", "worker-2", 1, "verified", [1, 2], events=({"fn": "cuCtxPushCurrent"},))),
        claims=(ClaimResult("demo.claim", "A statement.", "A source", verdict, "what we saw"),),
        errors=({"scenario": "x", "kind": "timeout", "message": "m", "output_tail": "t"},),
        metrics={"rate": 12.5})


def test_round_trip_one_and_many(tmp_path):
    one = sample()
    path = tmp_path / "one.json"
    path.write_text(dumps([one]))
    assert load_runs(path) == [one]
    many = [sample("a"), sample("b", "fails")]
    path.write_text(dumps(many))
    data = json.loads(path.read_text())
    assert data["schema"] == "ctxlab/1" and len(data["runs"]) == 2
    assert load_runs(path) == many


def test_failed_means_a_failing_claim_or_an_error():
    assert sample(verdict="fails").failed
    clean = LabResult("x", "t", 0.0, {}, {}, (), (ClaimResult("i", "s", "src", "holds", "e"),))
    assert not clean.failed


def test_unknown_verdict_is_rejected():
    with pytest.raises(ValueError, match="verdict"):
        ClaimResult("i", "s", "src", "maybe", "e")


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ('{"schema": "ctxlab/0", "lab": "x"}', 'schema "ctxlab/0" is not "ctxlab/1"'),
    ('[1, 2]', "expected a JSON object"),
    ('{"schema": "ctxlab/1", "lab": "x"}', 'no "started" field'),
])
def test_bad_files_give_clear_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ResultFileError, match=message):
        load_runs(path)


def test_missing_file(tmp_path):
    with pytest.raises(ResultFileError, match="cannot read"):
        load_runs(tmp_path / "nope.json")


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "r.json"
    write_output(str(target), "first")
    write_output(str(target), "second")
    assert target.read_text() == "second"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_check_writable(tmp_path):
    check_writable(str(tmp_path / "ok.json"))
    with pytest.raises(OSError, match="does not exist"):
        check_writable(str(tmp_path / "missing" / "x.json"))
    with pytest.raises(OSError, match="is a directory"):
        check_writable(str(tmp_path))
