"""A launch's arguments read against the one allocation map in the audit's one pass (ctxlab.audit.model.state),
as the pytest guard's hooks read them as the calls stream (ctxlab.audit.model.hooks): the same notes from the
same calls, one finding where both noted it (CPU only)."""

import pytest

from ctxlab.audit import judge
from ctxlab.audit.engine import Stream
from ctxlab.audit.model.hooks import FOREIGN_POINTER, AuditHooks
from ctxlab.audit.model.one_pass import model
from tests.audit.test_audit_hooks import BASE_A, BASE_B, CREATED, PRIMARY, Calls, allocate, carray, launch

FIELDS = ("launch", "context", "function", "parameter", "offset", "pointer", "base", "size", "owner",
          "allocation_correlation", "tid", "start")


def scenario(kind: str) -> Calls:
    calls = Calls()
    allocate(calls, BASE_A, 16384, PRIMARY, correlation=11)
    allocate(calls, BASE_B, 4096, CREATED, correlation=12)
    if kind == "destroyed":  # the owner goes before the launch: its memory went with it
        calls.add("cuCtxDestroy_v2", 0, args={"ctx": PRIMARY})
    if kind == "freed":
        calls.add("cuMemFree_v2", PRIMARY, args={"ptr": BASE_A})
    status = "CUDA_ERROR_INVALID_HANDLE" if kind == "failed" else "CUDA_SUCCESS"
    launch(calls, CREATED, [carray(BASE_A + 64, 8), carray(BASE_B, 8)], status=status)
    if kind == "repeated":
        launch(calls, CREATED, [carray(BASE_A + 64, 8), carray(BASE_B, 8)])
    return calls


def by_hooks(calls: Calls) -> list[dict]:
    return [n for n in AuditHooks().annotate(calls.events) if n["name"] == FOREIGN_POINTER]


def by_the_pass(calls: Calls) -> list[dict]:
    return model(Stream([dict(e, seq=i, thread="MainThread") for i, e in enumerate(calls.events)])).foreign


@pytest.mark.parametrize("kind", ["plain", "destroyed", "freed", "failed", "repeated"])
def test_the_one_pass_notes_what_the_hooks_note(kind):
    hooks, one_pass = by_hooks(scenario(kind)), by_the_pass(scenario(kind))
    assert [{k: n[k] for k in FIELDS} for n in one_pass] == [{k: n[k] for k in FIELDS} for n in hooks]
    assert len(one_pass) == (1 if kind == "plain" or kind == "repeated" else 0)
    if one_pass:
        note = one_pass[0]
        assert (note["owner"], note["base"], note["offset"], note["thread"]) == (PRIMARY, BASE_A, 0, "MainThread")


def test_a_launch_both_noted_is_one_finding_and_the_pass_counts_what_it_read():
    calls = scenario("repeated")
    events = [dict(e, seq=i, thread="MainThread") for i, e in enumerate(calls.events)]
    with_hooks = events + [dict(n, seq=100 + i, thread="MainThread") for i, n in enumerate(by_hooks(calls))]
    for stream in (events, with_hooks):
        assert [f.rule for f in judge(stream) if f.rule == "pointer-from-another-context"] == \
            ["pointer-from-another-context"]
    stream = Stream(events)
    model(stream)
    summary = stream.counts
    assert (summary["launch_callbacks"], summary["launches_inspected"], summary["foreign_arguments"]) == (2, 1, 1)
    assert summary["allocations_seen"] == 2
