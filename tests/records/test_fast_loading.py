"""Reading a result file fast (issue 51 item 3) changes no answer: the depth count, the integer limit, the
shape rules' refusals and the records are those of the plain ways they were computed before."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlab.records import files, shapes
from ctxlab.records.model import LabResult, Observation, ResultFileError
from tests.conftest import RESULTS, recorded
from tests.records.test_loaders_fuzz import DELETE, json_values

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The bytes that decide a depth, and some that do not: runs of backslashes, quotes and brackets mixed.
tricky = st.lists(st.sampled_from([b"\\", b"\\\\", b'"', b"[", b"]", b"{", b"}", b"a", b"n", b" "]),
                  max_size=60).map(b"".join)


def plain_reduced(data: bytes) -> bytes:
    """How nesting_depth cut its input down before: two replaces over the whole text, then all but quotes and
    brackets dropped."""
    return data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, files._NOT_STRUCTURAL)


@SETTINGS
@given(data=tricky)
def test_escaped_quotes_are_found_as_the_two_replaces_found_them(data):
    assert files._without_escaped_quotes(data) == plain_reduced(data)


@SETTINGS
@given(data=tricky, limit=st.integers(min_value=1, max_value=4))
def test_past_the_backslashes_looked_at_the_replaces_decide(data, limit):
    old = files.ESCAPES_LOOKED_AT
    files.ESCAPES_LOOKED_AT = limit
    try:
        assert files._without_escaped_quotes(data) == plain_reduced(data)
    finally:
        files.ESCAPES_LOOKED_AT = old


def test_a_long_run_of_backslashes_is_linear_and_counted_as_before():
    data = b'["' + b"\\" * 200_001 + b'"' + b"[" * 70 + b'"]'
    assert files._without_escaped_quotes(data) == plain_reduced(data)
    with pytest.raises(ResultFileError, match="nested deeper"):
        files.decode_json(b"[" * 70 + b"]" * 70, "deep.json")


def decode_plainly(data: bytes):
    """decode_json as it was: every integer token through the digit count."""
    return json.loads(data.decode("utf-8"), parse_constant=files._refuse_constant,
                      parse_float=files._finite_float, parse_int=files._bounded_int)


@pytest.mark.parametrize("text", [
    '{"a": 1234567890123456789012345678901234567890}',  # 40 digits: read
    '{"a": -12345678901234567890123456789012345678901}',  # 41: refused
    '{"a": "12345678901234567890123456789012345678901", "b": 7}',  # 41 digits in a string only: read
    '{"a": "12345678901234567890123456789012345678901", "b": 123456789012345678901234567890123456789012}',
    '[1.5, 2e3, 12345678901234567890123456789012345678901.5]',  # a float's digits are not counted
])
def test_integers_are_limited_as_before(text):
    try:
        expected: object = decode_plainly(text.encode())
    except files._NotANumber as exc:
        expected = f"x.json: not JSON: {exc}"
    try:
        got: object = files.decode_json(text.encode(), "x.json")
    except ResultFileError as exc:
        got = str(exc)
    assert got == expected


@SETTINGS
@given(value=json_values)
def test_any_document_decodes_as_before(value):
    data = json.dumps(value).encode()
    try:
        expected: object = decode_plainly(data)
    except files._NotANumber as exc:
        expected = f"x.json: not JSON: {exc}"
    try:
        got: object = files.decode_json(data, "x.json")
    except ResultFileError as exc:
        got = str(exc)
    assert got == expected and type(got) is type(expected)


BASE = recorded("check-peer-devices-all.json")


def refusal(doc) -> str | None:
    try:
        shapes.check_document(doc, "m.json")
    except ResultFileError as exc:
        return str(exc)
    return None


OBSERVATION_KEYS = ["step", "thread", "what", "context_id", "context", "round", "repeat", "scenario", "events",
                    "value"]
CLAIM_KEYS = ["id", "statement", "source", "verdict", "evidence", "kind"]
odd_values = st.sampled_from([1.0, 2.5, True, False, "", "s", None, [], {}, "observation", "promise", "holds",
                              "maybe", 0, -1, 7, DELETE]) | json_values


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=st.integers(min_value=0, max_value=9), section=st.sampled_from(["observations", "claims"]),
       item=st.integers(min_value=0, max_value=500), key=st.integers(min_value=0, max_value=99),
       value=odd_values, whole=st.sampled_from([False] * 5 + [True]))
def test_the_shape_rules_refuse_what_and_where_they_did(run, section, item, key: int | str, value, whole):
    """The one-look checks of observations and claims pass only what the field-by-field rules pass; anything
    else gets the rules' own refusal, naming the same place."""
    doc = json.loads(json.dumps(BASE))
    items = doc["runs"][run % len(doc["runs"])][section]
    index = item % len(items)
    keys = OBSERVATION_KEYS if section == "observations" else CLAIM_KEYS
    key = keys[key % len(keys)]
    if whole:  # the observation or claim itself replaced
        items[index] = None if value is DELETE else value
    elif value is DELETE:
        items[index].pop(key, None)
    else:
        items[index][key] = value
    fast = refusal(doc)
    plain = (shapes._plain_observation, shapes._plain_claim)
    shapes._plain_observation = shapes._plain_claim = lambda data: False  # type: ignore[assignment]
    try:
        assert fast == refusal(doc)
    finally:
        shapes._plain_observation, shapes._plain_claim = plain


class Text(str):
    """A string of a subclass: the rules pass it, the one-look check leaves it to them."""


@pytest.mark.parametrize("field,value,plain,passes", [
    ("context_id", True, False, False), ("context_id", 1.0, False, False), ("round", None, True, True),
    ("events", None, False, False), ("events", object(), False, False), ("events", [], True, True),
    ("step", Text("s"), False, True), ("scenario", 3, False, False)])
def test_an_observation_off_the_plain_types_goes_to_the_rules(field, value, plain, passes):
    obs = {"step": "s", "thread": "t", "what": "w", field: value}
    assert shapes._plain_observation(obs) == plain
    assert (refusal({"schema": "ctxlab/1", "lab": "x", "started": "", "seconds": 0, "environment": {},
                     "observations": [obs], "claims": []}) is None) == passes


def test_records_are_the_ones_the_constructor_makes():
    for name in ("check.json", "lifecycle-traced.json", "refcount.json"):
        doc = recorded(name)
        for item in doc.get("runs", [doc]):
            for data in item["observations"]:
                made = Observation.from_dict(data)
                built = Observation(step=data["step"], thread=data["thread"], context_id=data.get("context_id"),
                                    what=data["what"], value=data.get("value"), context=data.get("context"),
                                    scenario=data.get("scenario"), round=data.get("round"),
                                    events=tuple(data.get("events", ())), repeat=data.get("repeat"))
                assert made == built and vars(made) == vars(built) and repr(made) == repr(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.step = "changed"  # type: ignore[misc]
    with pytest.raises(KeyError):
        Observation.from_dict({"thread": "t", "what": "w"})


def test_a_builder_makes_each_checked_run():
    built = files.load_runs(RESULTS / "check.json", build=lambda data: data["lab"])  # type: ignore[arg-type,return-value]
    assert built == [run.lab for run in files.load_runs(RESULTS / "check.json")]
    assert all(isinstance(run, LabResult) for run in files.load_runs(RESULTS / "check.json"))
