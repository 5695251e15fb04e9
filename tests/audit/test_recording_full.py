"""A flight recording that fills up (issue 48: an option bounds the disk the recorder may use, with a clear
message when it is reached, and the audit goes on with what it has): ``--record-limit`` bounds the recording's
capacities, the traced child reads the bound from its environment, a full recording's dropped counts become a
``recording-full`` warning of the audit and a clause of the trace's summary line, and the option refuses
what is not a size, in one line with status 2."""

from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.audit.rules.catalogue import judge
from ctxlab.audit.rules.recording import recording_full_event
from ctxlab.audit.run import judge_run
from ctxlab.cli import cli
from ctxlab.cli.tracing import _full
from ctxlab.tracing import recorder
from ctxlab.tracing.flight import read_flight
from ctxlab.tracing.supervise import Ending, Supervised
from tests.audit.test_flight_recorder import call, open_flight
from tests.audit_events import MAIN, PRIMARY, Events


def _bytes(caps: tuple[int, int, int]) -> int:
    return caps[0] * recorder.RECORD_BYTES + caps[1] * recorder.STACK_BYTES + caps[2]


@pytest.mark.parametrize("limit", [1 << 20, 64 << 20, 3 << 30])
def test_a_limit_bounds_the_recording(limit, tmp_path):
    assert _bytes(recorder.capacities(str(tmp_path), limit)) <= limit
    assert _bytes(recorder.capacities(str(tmp_path), limit)) > limit // 2  # and uses the room it was given


def test_no_limit_and_a_limit_larger_than_the_room_change_nothing(monkeypatch, tmp_path):
    import shutil as shutil_module

    monkeypatch.setattr(shutil_module, "disk_usage", lambda folder: type("U", (), {"free": 256 << 20})())
    room = recorder.capacities(str(tmp_path))
    assert recorder.capacities(str(tmp_path), None) == room
    assert recorder.capacities(str(tmp_path), 1 << 40) == room  # half the free disk still bounds it
    assert _bytes(recorder.capacities(str(tmp_path), 16 << 20)) <= 16 << 20 < _bytes(room)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=12).filter(lambda t: "\0" not in t))
def test_the_child_reads_only_a_number_as_its_bound(text):
    with pytest.MonkeyPatch.context() as env:
        env.setenv(recorder.RECORD_LIMIT_ENV, text)
        got = recorder.record_limit()
    if text.isascii() and text.isdigit():
        assert got == max(int(text), recorder.RECORD_LIMIT_LEAST)
    else:
        assert got is None


def test_the_bound_travels_to_the_child_only_when_given():
    assert recorder.record_limit_env(None) == {}
    assert recorder.record_limit_env(64 << 20) == {recorder.RECORD_LIMIT_ENV: str(64 << 20)}


def test_a_full_recording_is_a_warning_that_says_what_was_dropped(tmp_path):
    lib, files, sink = open_flight(tmp_path, records=16)
    try:
        sink.thread_named(threading.get_native_id(), threading.get_ident(), "MainThread")
        for i in range(40):
            call(lib, 5, correlation=i + 1)
        got = read_flight(files)
    finally:
        lib.ctxlab_set_active(0)
        sink.close()
        lib.ctxlab_reset()
    assert got.counts["records"] == 16 and got.counts["dropped_records"] == 24
    event = recording_full_event(got.counts, got.events[-1])
    assert event is not None and event["start"] > got.events[-1]["end"]
    (finding,) = [f for f in judge([*got.events, event]) if f.rule == "recording-full"]
    assert finding.severity == "warning"
    assert "24 calls after the first 16 were not recorded and are not judged" in finding.message
    assert "--record-limit" in finding.message


def test_a_recording_that_kept_everything_adds_nothing():
    assert recording_full_event({"records": 5, "dropped_records": 0, "dropped_stacks": 0, "dropped_bytes": 0},
                                None) is None
    assert _full({"records": 5, "dropped_records": 0}) == ""


def test_stacks_and_bytes_dropped_are_said_too():
    event = recording_full_event({"records": 9, "dropped_stacks": 3, "dropped_bytes": 4096}, {"tid": 1, "start": 5})
    assert event is not None
    (finding,) = judge([event])
    assert "3 Python stacks were not kept" in finding.message and "4,096 bytes" in finding.message
    assert "calls after" not in finding.message  # no call was dropped
    assert _full({"dropped_stacks": 3}) == ("; the recording was full: 3 stacks were not recorded (give "
                                            "--record-limit more room or free disk where it lies)")


def test_the_audit_of_a_run_whose_recording_filled_up_reports_it(tmp_path):
    lib, files, sink = open_flight(tmp_path, records=8)
    try:
        for i in range(20):
            call(lib, 5, correlation=i + 1)
        flight = read_flight(files)
    finally:
        lib.ctxlab_set_active(0)
        sink.close()
        lib.ctxlab_reset()
    ev = Events()
    ev.driver("cuCtxSetCurrent", 10, context=PRIMARY, line=5)
    sup = Supervised(ending=Ending("exit", 0), flight=flight, result={},
                     notes=[{"kind": "thread", "tid": MAIN, "ident": 7, "name": "MainThread"}])
    result = judge_run("p", sup, [])
    (finding,) = [f for f in result.findings if f.rule == "recording-full"]
    assert "12 calls after the first 8" in finding.message
    assert result.exit_code == 0  # a warning: the status says what the judged calls showed


@pytest.mark.parametrize("command", ["audit", "trace"])
@pytest.mark.parametrize("value, says", [("10K", "less than the 1M"), ("2000G", "more than 1024G"),
                                         ("abc", "not a size"), ("-5M", "not a size"), ("", "not a size")])
def test_the_option_refuses_what_is_not_a_bound_in_one_line(command, value, says):
    result = CliRunner().invoke(cli, [command, "--record-limit", value, "-c", "pass"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.output
