"""``ctxlab.api.trace(...)`` and ``ctxlab.api.audit(...)`` in the Python API (the tracer replaced by one that hands
back a recorded stream, as in test_audit_cli), and ``ctxlab.trace`` and ``ctxlab.audit`` the plain subpackages of
those names: one spelling each, no module made callable."""

import pytest

import ctxlab
from tests.audit_events import WORKER, Events


def test_trace_runs_a_program_and_returns_its_status_and_events(fake):
    ev = Events()
    ev.driver("cuCtxGetCurrent", 100)
    fake.EVENTS = ev.events
    status, events, stats = ctxlab.api.trace(code="import sys; sys.exit(4)")
    assert status == 4 and [e["name"] for e in events] == ["cuCtxGetCurrent"] and "program_seconds" in stats
    assert stats["ending"]["how"] == "exit"


def test_audit_returns_the_findings_and_the_programs_status(fake):
    ev = Events()
    ev.driver("cuMemAlloc_v2", 100, tid=WORKER, status="CUDA_ERROR_INVALID_CONTEXT", line=21)
    fake.EVENTS = ev.events
    result = ctxlab.api.audit(code="x = 1")
    assert result.exit_status == 0 and [f.rule for f in result.findings] == ["no-context"] and result.exit_code == 3


def test_the_subpackages_of_the_same_names_are_plain_modules():
    import types

    assert ctxlab.trace.calls([]) == [] and ctxlab.audit.judge([]) == []
    for module in (ctxlab.trace, ctxlab.audit):
        assert type(module) is types.ModuleType and not callable(module)
    assert "trace" not in ctxlab.__all__ and "audit" not in ctxlab.__all__
    assert callable(ctxlab.api.trace) and callable(ctxlab.api.audit)


def test_a_missing_script_is_file_not_found(fake):
    with pytest.raises(FileNotFoundError):
        ctxlab.api.trace(argv=["no/such/script.py"])
