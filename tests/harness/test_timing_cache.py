"""The timings check keeps between runs to order its jobs (harness.timing_cache): round trip, merge, and any
hostile or missing file read as none, never an error; an unwritable cache folder costs only the order."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.harness.timing_cache import MAX_BYTES, load_timings, save_timings, timings_path
from ctxlab.records.model import LabResult
from ctxlab.suite import run_check
from tests.fake_labs import REGISTRY


def _run(lab, timings):
    return LabResult(lab=lab, started="2026-12-02T00:00:00+00:00", seconds=1.0, environment={}, options={},
                     observations=(), claims=(), errors=(), metrics={}, timings=timings)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLAB_CACHE", str(tmp_path))
    return tmp_path


def test_timings_round_trip_and_merge(cache):
    assert load_timings() == {}
    save_timings([_run("a", {"s1": 1.5, "s2": 0.25})])
    save_timings([_run("b", {"s1": 3.0}), _run("a", {"s2": 2.0})])
    assert load_timings() == {("a", "s1"): 1.5, ("a", "s2"): 2.0, ("b", "s1"): 3.0}
    assert not [f for f in os.listdir(cache) if f.startswith(".check-timings.")]  # no temporary file left


@pytest.mark.parametrize("content", [b"", b"not json", b"[1, 2]", b'{"a": [1]}', b'{"a": {"s": "slow"}}',
                                     b'{"a": {"s": -1}}', b'{"a": {"s": true}}', b"\xff\xfe", b" " * (MAX_BYTES + 1)])
def test_a_hostile_timings_file_reads_as_none(cache, content):
    with open(timings_path(), "wb") as handle:
        handle.write(content)
    assert load_timings() == {}
    save_timings([_run("a", {"s": 1.0})])  # and is replaced by a good one
    assert load_timings() == {("a", "s"): 1.0}


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                    max_leaves=12))
def test_any_json_in_the_timings_file_reads_without_error(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("cache")
    os.environ["CTXLAB_CACHE"] = str(folder)
    try:
        (folder / "check-timings.json").write_text(json.dumps(data))
        got = load_timings()
        assert all(isinstance(k, tuple) and isinstance(v, float) and v >= 0 for k, v in got.items())
    finally:
        del os.environ["CTXLAB_CACHE"]


def test_an_unwritable_cache_folder_costs_only_the_order(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv("CTXLAB_CACHE", str(blocked / "sub"))
    save_timings([_run("a", {"s": 1.0})])
    assert load_timings() == {}
    (run,) = run_check(["ok"], [0], registry=REGISTRY)
    assert run.claims[0].verdict == "holds"


def test_check_keeps_its_timings_and_orders_the_next_run_by_them(cache):
    (run,) = run_check(["levelled"], [0], registry=REGISTRY)
    kept = load_timings()
    assert set(kept) == {("levelled", name) for name in run.timings} and kept
