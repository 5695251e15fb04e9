"""Property-based: random and mutated bytes and JSON to every loader, through the CLI."""

from __future__ import annotations

import json
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import RESULTS, gpu_absence, recorded
from tests.hostile import invoke

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

VALID = RESULTS / "refcount.json"
FORMATS = ["table", "json", "junit", "markdown"]
# ``check --baseline`` loads the baseline, then needs a GPU: without one it always ends in exit 2, which is what
# these tests can assert; where a GPU is present a valid baseline would run every lab, so only show and merge.
COMMANDS = ["show", "merge", "baseline"] if gpu_absence() else ["show", "merge"]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)


def run_loader(data: bytes, command: str, fmt: str):
    """Write ``data`` to a file, load it with ``command``, with an output file that must never be half-written."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = os.path.join(tmp, "in.json"), os.path.join(tmp, "out")
        with open(path, "wb") as handle:
            handle.write(data)
        args = {"show": ["show", path, "--format", fmt, "-o", out],
                "merge": ["report", "merge", path, "-o", out],
                "baseline": ["check", "--baseline", path, "--json", out]}[command]
        result = invoke(*args)
        written = os.path.exists(out)
        # check that loaded its baseline and then found no GPU writes the environment-error record, and only it
        unable = written and command == "baseline" and '"environment_error"' in open(out, encoding="utf-8").read()
        leftovers = sorted(set(os.listdir(tmp)) - {"in.json", "out"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert leftovers == []
    if result.exit_code == 2:
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert not written or (unable and "no usable GPU" in result.output)
    else:
        assert command != "baseline"  # without a GPU, check always ends in exit 2
        assert result.exit_code in (0, 1) and written
    return result


@SETTINGS
@given(data=st.binary(max_size=300), command=st.sampled_from(COMMANDS),
       fmt=st.sampled_from(FORMATS))
def test_random_bytes(data, command, fmt):
    run_loader(data, command, fmt)


@SETTINGS
@given(value=json_values, command=st.sampled_from(COMMANDS))
def test_random_json(value, command):
    run_loader(json.dumps(value).encode(), command, "table")


def mutate(doc, path: list, value):
    """``doc`` with the item at ``path`` replaced by ``value`` (or deleted when value is the marker)."""
    if not path:
        return doc if value is DELETE else value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        key = sorted(doc)[head % len(doc)] if doc else None
        if key is None:
            return doc
        out = dict(doc)
        if value is DELETE and not rest:
            del out[key]
        else:
            out[key] = mutate(doc[key], rest, value)
        return out
    if isinstance(doc, list) and doc:
        out = list(doc)
        index = head % len(doc)
        if value is DELETE and not rest:
            del out[index]
        else:
            out[index] = mutate(doc[index], rest, value)
        return out
    return doc if value is DELETE else value


DELETE = object()
BASE = recorded("refcount.json")


@SETTINGS
@given(path=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=5),
       value=json_values | st.just(DELETE), command=st.sampled_from(["show", "merge"]),
       fmt=st.sampled_from(FORMATS))
def test_mutated_result_files(path, value, command, fmt):
    run_loader(json.dumps(mutate(BASE, path, value)).encode(), command, fmt)


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=len(VALID.read_bytes())),
       flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=4),
       command=st.sampled_from(COMMANDS))
def test_mutated_bytes(cut, flips, command):
    data = bytearray(VALID.read_bytes()[:cut])
    for where, byte in flips:
        if data:
            data[where % len(data)] = byte
    run_loader(bytes(data), command, "markdown")


@SETTINGS
@given(path=st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=5),
       value=json_values | st.just(DELETE))
def test_the_loader_accepts_only_what_the_schema_accepts(path, value):
    """The JSON Schema (docs/schema.md) is the one definition of a result: whatever loads fits it."""
    import jsonschema

    from ctxlab.records.model import ResultFileError
    from ctxlab.records.shapes import runs_from_document
    from ctxlab.schema import schema

    doc = mutate(BASE, path, value)
    try:
        runs_from_document(doc, "mutated.json")
    except ResultFileError:
        return
    jsonschema.validate(doc, schema())


def test_a_baseline_whose_timings_are_not_numbers_is_refused_before_it_can_order_anything(tmp_path):
    from tests.hostile import assert_one_line_exit_2

    doc = dict(BASE, timings={"runtime-1": "fast"})
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    result = invoke("check", "--baseline", str(path), "--json", str(tmp_path / "out.json"))
    assert_one_line_exit_2(result)
    assert "timings" in result.output and not (tmp_path / "out.json").exists()
