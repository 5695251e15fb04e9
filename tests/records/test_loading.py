"""Loaders take any bytes: exit 2 and one line naming the file (issue 12 point 3, issue 18)."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import RESULTS
from tests.hostile import assert_one_line_exit_2, assert_usage_error, claim, invoke, run, write

VALID = RESULTS / "refcount.json"


def loaders(path) -> list[list]:
    """Every command that reads a result file, reading ``path``."""
    return [["show", path], ["report", "merge", path], ["report", "merge", VALID, path],
            ["check", "--baseline", path]]


def assert_every_loader_refuses(path, message: str) -> None:
    for command in loaders(path):
        result = invoke(*command)
        assert_one_line_exit_2(result)
        assert message in result.output, (command, result.output)
        assert str(path) in result.output


def test_not_utf8_names_the_byte_and_offset(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"schema": "ctxlab/1", "lab": "caf\xe9"}')
    assert_every_loader_refuses(path, "not UTF-8 (byte 0xe9 at offset 34)")


def test_bad_json_says_where(tmp_path):
    path = write(tmp_path / "bad.json", {})
    path.write_text('{"schema": "ctxlab/1",\n  "lab": }')
    assert_every_loader_refuses(path, "not JSON: Expecting value (line 2, column 10)")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_not_json(tmp_path, token):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(run()).replace('"seconds": 1.5', f'"seconds": {token}'))
    assert_every_loader_refuses(path, f"not JSON: {token} is not a number JSON allows")


@pytest.mark.parametrize("number, message", [("1e999", "1e999 is too large for a number"),
                                             ("1" * 5000, "an integer of 5000 digits is longer than")])
def test_numbers_too_large_to_hold_are_refused(tmp_path, number, message):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(run()).replace('"seconds": 1.5', f'"seconds": {number}'))
    assert_every_loader_refuses(path, message)


def test_a_nesting_bomb_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert_every_loader_refuses(path, "nested deeper than")


def test_deep_nesting_inside_strings_does_not_count(tmp_path):
    doc = run(claims=[claim(evidence="[" * 10_000 + '\\"{' * 1000)])
    result = invoke("show", write(tmp_path / "ok.json", doc))
    assert result.exit_code == 0, result.output


def test_an_oversized_file_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as handle:  # sparse: 3 GiB of size, no data written
        handle.truncate(3 * 2**30)
    assert path.stat().st_blocks < 64
    assert_every_loader_refuses(path, "larger than the limit")


def test_the_size_limit_can_be_raised_or_lowered():
    big = RESULTS / "check.json"  # 136 KB
    result = invoke("show", big, "--max-size", "64K")
    assert_one_line_exit_2(result)
    assert "--max-size" in result.output
    assert invoke("show", big, "--max-size", "1M", "--format", "json").exit_code == 0
    assert invoke("report", "merge", big, "--max-size", "64K").exit_code == 2
    assert_usage_error(invoke("show", big, "--max-size", "lots"), "lots")


def test_an_endless_device_is_bounded_too():
    assert_one_line_exit_2(invoke("show", "/dev/zero", "--max-size", "1K"))


@pytest.mark.parametrize("doc, message", [
    ([1, 2], "expected a JSON object, found a list"),
    (None, "expected a JSON object, found null"),
    ({"lab": "x"}, "no \"schema\" field"),
    ({"schema": None, "lab": "x"}, "schema null is not \"ctxlab/1\""),
    ({"schema": "ctxlab/1", "runs": 5}, "runs: expected a list, found a number"),
    ({"schema": "ctxlab/1", "runs": [5]}, "runs[0]: expected a JSON object, found a number"),
    (run(claims=5), "claims: expected a list, found a number"),
    (run(claims=[claim(verdict=5)]), "claims[0].verdict: expected a string, found a number"),
    (run(claims=[claim(verdict="maybe")]), "claims[0].verdict: \"maybe\" is not one of"),
    (run(claims=[{"id": "x"}]), "claims[0]: no \"statement\" field"),
    (run(observations=[{"step": 1}]), "observations[0].step: expected a string"),
    (run(observations=[{"step": "s", "thread": "t", "what": "w", "context": "0x1"}]),
     "observations[0].context: expected an integer or null, found a string"),
    (run(errors=[5]), "errors[0]: expected a JSON object, found a number"),
    (run(errors=[{"message": 5}]), "errors[0].message: expected a string"),
    (run(seconds="1.5"), "seconds: expected a number, found a string"),
    (run(seconds=True), "seconds: expected a number, found a boolean"),
    (run(environment=[]), "environment: expected a JSON object, found a list"),
    (run(metrics=[1]), "metrics: expected a JSON object"),
    (run(lab=None), "lab: expected a string, found null"),
])
def test_wrong_shapes_are_named_by_where_they_are(tmp_path, doc, message):
    path = write(tmp_path / "shape.json", doc)
    assert_every_loader_refuses(path, message)
    result = invoke("show", path)
    assert "NoneType" not in result.output and "at at" not in result.output


def test_file_content_in_an_error_is_one_line_and_inert(tmp_path):
    path = write(tmp_path / "evil.json", {"schema": "x\n\x1b[2Jy" * 50, "lab": "x"})
    result = invoke("show", path)
    assert_one_line_exit_2(result)
    assert "\x1b" not in result.output and len(result.output) < 400


def test_a_missing_file_or_a_directory(tmp_path):
    assert_one_line_exit_2(invoke("show", tmp_path / "absent.json"))
    assert_one_line_exit_2(invoke("show", tmp_path))


def test_every_recorded_result_still_loads():
    for path in sorted(RESULTS.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("schema") == "ctxlab/1":
            result = invoke("show", path, "--format", "json")
            assert result.exit_code == 0, (path, result.output)


def test_record_load_runs_and_parse_runs_keep_their_signatures(tmp_path):
    from ctxlab.records.files import load_runs
    from ctxlab.records.model import ResultFileError
    from ctxlab.records.shapes import runs_from_document

    runs = load_runs(VALID)
    assert runs and runs == runs_from_document(json.loads(VALID.read_text()), str(VALID))
    with pytest.raises(ResultFileError, match="runs: expected a list"):
        runs_from_document({"schema": "ctxlab/1", "runs": {}}, "x.json")


def test_a_failed_load_writes_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff")
    out = tmp_path / "out.md"
    assert_one_line_exit_2(invoke("show", bad, "-o", out))
    assert not out.exists()
    assert os.listdir(tmp_path) == ["bad.json"]
