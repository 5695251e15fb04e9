"""Bounded reads (issue 38, item 2): a limit is only a limit. Reading a result file never asks for more room
than the file has (a regular file: its size and a byte; a pipe or device: chunks up to the limit), so every
documented --max-size, up to 1024G, reads a 39 KB file as the default does, without a MemoryError."""

from __future__ import annotations

import os
import threading
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlab.records.files import read_bounded
from ctxlab.records.model import ResultFileError
from tests.conftest import RESULTS
from tests.hostile import assert_one_line_exit_2, invoke

SOURCE = RESULTS / "refcount.json"
# Small limits, and the huge ones a user may give (1G, 100G, the documented maximum 1024G).
LIMITS = st.one_of(st.integers(1, 300_000), st.sampled_from([2**30, 100 * 2**30, 2**40]))
SLACK = 64 * 1024  # what open(), fstat and the refusal's text may take besides the file's bytes
CHUNK = 1 << 20  # the most one read of a pipe may ask for


def traced_peak(read):
    """(what ``read()`` returned or raised, the most memory Python held at once while it ran)."""
    tracemalloc.start()
    try:
        try:
            outcome: object = read()
        except ResultFileError as exc:
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(0, 200_000), limit=LIMITS)
def test_a_regular_file_is_read_with_no_more_room_than_it_has(tmp_path, size, limit):
    path = tmp_path / "r.json"
    data = os.urandom(size)
    path.write_bytes(data)
    outcome, peak = traced_peak(lambda: read_bounded(str(path), limit))
    if size <= limit:
        assert outcome == data
    else:
        assert isinstance(outcome, ResultFileError) and "larger than the limit" in str(outcome)
    assert peak <= size + SLACK, (peak, size, limit)


def _through_a_pipe(data: bytes, read):
    """``read(path)`` of a pipe that a thread fills with ``data``; what it returned and the peak."""
    r, w = os.pipe()

    def feed() -> None:
        try:
            with os.fdopen(w, "wb") as out:
                out.write(data)
        except OSError:  # the reader stopped at its limit and closed its end
            pass

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        return traced_peak(lambda: read(f"/proc/self/fd/{r}"))
    finally:
        os.close(r)
        feeder.join()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd to name a pipe")
@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 3 * CHUNK), limit=LIMITS)
def test_a_pipe_is_read_in_chunks_up_to_the_limit(size, limit):
    data = os.urandom(size)
    outcome, peak = _through_a_pipe(data, lambda path: read_bounded(path, limit))
    if size <= limit:
        assert outcome == data
    else:
        assert isinstance(outcome, ResultFileError) and "more than" in str(outcome)
    # What was read, once in pieces and once joined, and one chunk's buffer: never the limit's worth.
    assert peak <= 2 * min(size, limit + 1) + CHUNK + SLACK, (peak, size, limit)


@pytest.mark.parametrize("command", [["show", SOURCE], ["show", SOURCE, "--format", "json"],
                                     ["report", "merge", SOURCE]])
@pytest.mark.parametrize("limit", ["100G", "1024G", "1024GiB", str(2**40)])
def test_every_documented_limit_reads_a_small_file(command, limit):
    result = invoke(*command, "--max-size", limit)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output


@settings(max_examples=25, deadline=None)
@given(number=st.integers(1, 1024), unit=st.sampled_from(["", "K", "M", "G"]))
def test_any_size_up_to_1024g_is_a_limit_not_a_failure(number, unit):
    size = number * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[unit]
    result = invoke("show", SOURCE, "--format", "json", "--max-size", f"{number}{unit}")
    if size >= SOURCE.stat().st_size:
        assert result.exit_code == 0, result.output
    else:
        assert_one_line_exit_2(result)
        assert "--max-size raises it" in result.output
