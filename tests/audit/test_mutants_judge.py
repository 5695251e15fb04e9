"""The audit's judge where the hand-mutant pass (docs/testing.md, "Hand mutants") found it untested: the order of
the findings, the rules each rule gives way to, a rule's declared severity, the audit's counts, its launch
statistics and each thread's last call (CPU only)."""

from __future__ import annotations

import dataclasses

import pytest

from ctxlab.audit import RULES_BY_ID, AuditResult, Rule, judge
from ctxlab.audit.engine import Hit
from ctxlab.audit.run import judge_run
from ctxlab.tracing.supervise import Ending, Supervised
from tests.audit_events import MAIN, PRIMARY, WORKER, Events


def rule_hitting(rule_id: str, severity: str, *events: dict) -> Rule:
    """A rule whose predicate finds exactly ``events`` (in that order)."""
    return Rule(rule_id, severity, f"{rule_id} title", f"{rule_id} explanation", "", lambda s: [Hit(e, rule_id)
                                                                                               for e in events],
                "nothing")


def as_declared(rule_id: str, *events: dict) -> Rule:
    """The declared rule (its id, severity and the rules it gives way to) with a predicate finding ``events``."""
    return dataclasses.replace(RULES_BY_ID[rule_id], predicate=lambda s: [Hit(e, rule_id) for e in events])


def test_findings_come_errors_first_then_warnings_then_infos_each_in_time_order():
    ev = Events()
    calls = {t: ev.driver("cuMemAlloc_v2", t, line=t) for t in (10, 20, 30, 40)}
    rules = [rule_hitting("a-warning", "warning", calls[30], calls[10]),
             rule_hitting("an-info", "info", calls[20]),
             rule_hitting("an-error", "error", calls[40])]
    found = judge(ev.events, rules=rules)
    assert [(f.severity, f.location.line) for f in found] == [("error", 40), ("warning", 10), ("warning", 30),
                                                             ("info", 20)]


def test_a_rule_with_a_severity_outside_the_three_is_refused():
    with pytest.raises(ValueError, match="severity 'fatal' is not one of"):
        rule_hitting("made-up", "fatal")


@pytest.mark.parametrize("superseded, by", [("stray-context", "non-primary-current"),
                                            ("unordered-access", "unordered-handover"),
                                            ("non-primary-current", "cross-context-handle")])
def test_a_finding_gives_way_to_the_rule_it_names_on_the_same_thread_only(superseded, by):
    ev = Events()
    here = ev.driver("cuMemAlloc_v2", 10, tid=MAIN, line=10)
    same = ev.driver("cuMemAlloc_v2", 20, tid=MAIN, line=20)
    other = ev.driver("cuMemAlloc_v2", 20, tid=WORKER, line=20)
    kept = judge(ev.events, rules=[as_declared(superseded, here), as_declared(by, other)])
    assert sorted(f.rule for f in kept) == sorted([superseded, by])
    dropped = judge(ev.events, rules=[as_declared(superseded, here), as_declared(by, same)])
    assert [f.rule for f in dropped] == [by]


def test_the_counts_count_every_finding_of_each_severity():
    ev = Events()
    calls = [ev.driver("cuMemAlloc_v2", t, line=t) for t in (10, 20, 30)]
    found = judge(ev.events, rules=[rule_hitting("w", "warning", calls[0], calls[1]),
                                    rule_hitting("e", "error", calls[2])])
    result = AuditResult(program="p", exit_status=0, findings=found)
    assert result.counts() == {"error": 1, "warning": 2, "info": 0}
    assert result.exit_code == 3


def supervised(events: list[dict]) -> Supervised:
    """A run that exited 0, its calls as the child's notes (no flight recording)."""
    return Supervised(ending=Ending("exit", 0), flight=None, result={},
                      notes=[{"kind": "event", "event": e} for e in events]
                      + [{"kind": "thread", "tid": MAIN, "ident": 7, "name": "MainThread"}])


def test_launch_records_count_a_runtime_launch_once_not_again_for_the_driver_launch_beneath_it():
    ev = Events()
    ev.runtime("cudaLaunchKernel", 100, end=140, context=PRIMARY, line=30)
    ev.driver("cuLaunchKernel", 110, end=120, context=PRIMARY, line=30, **{"from": "callback"})  # beneath it
    ev.driver("cuLaunchKernel", 200, end=210, context=PRIMARY, line=31)  # the program's own driver launch
    result = judge_run("p", supervised(ev.events), [])
    assert result.stats["launch_records"] == {"driver": 1, "runtime": 1}


def test_each_threads_row_names_its_last_call():
    ev = Events()
    ev.driver("cuCtxSetCurrent", 10, context=PRIMARY, line=5)
    ev.driver("cuMemAlloc_v2", 20, context=PRIMARY, line=6)
    ev.driver("cuStreamSynchronize", 30, context=PRIMARY, line=7, status="CUDA_ERROR_NOT_READY")
    result = judge_run("p", supervised(ev.events), [])
    (row,) = result.threads
    assert row["calls"] == 3
    assert row["last_call"] == {"name": "cuStreamSynchronize", "status": "CUDA_ERROR_NOT_READY",
                                "location": ["app.py", 7, "main"]}
