"""What a child compared, the claim decides (issue 36): the child records both sides, ``ctxlab.claim.decided``
compares them in the claim, where tests/labs/test_conditions_can_fail.py's mutants reach the comparison. A recording
made before the child recorded the sides carries the child's own answer, which is read there (labs/results)."""

from __future__ import annotations

import pytest

from ctxlab.claim import decided


def _same(a, b) -> bool:
    return a == b


def test_the_sides_decide_not_the_childs_answer():
    assert decided({"a": 1, "b": 1}, "same", _same, "a", "b") is True
    assert decided({"a": 1, "b": 2}, "same", _same, "a", "b") is False
    # an answer recorded next to the sides is not read: the comparison is the claim's
    assert decided({"a": 1, "b": 1, "same": False}, "same", _same, "a", "b") is True


def test_a_recording_without_the_sides_is_read_as_it_was_judged():
    assert decided({"same": True}, "same", _same, "a", "b") is True
    assert decided({"same": "the primary context"}, "same", _same, "a", "b") == "the primary context"
    assert decided({"a": 1, "same": False}, "same", _same, "a", "b") is False  # one side only: not what it compared


def test_without_the_sides_or_an_answer_nothing_is_decided():
    with pytest.raises(KeyError):
        decided({}, "same", _same, "a", "b")
