"""The audit's catalogue of rules, in the order they run, and ``judge``, which runs them.

Each rule is declared beside its predicate, in the module of its family (``Rule``, ``rule.py``): ``context``
(which context a thread has), ``sharing`` (state shared where it must not be), ``lifetimes`` (a context's
life), ``handles`` (handles of another context, hand-overs), ``classes`` (captures, freed memory, handles
destroyed, out of memory, launch configurations), ``ordering`` (what happens before what), ``settings``,
``recording``, ``failures`` (sticky errors, failing calls), ``endings`` and ``hangs`` (how the program ended).
A rule names the lab claim (``ctxlab claims``) whose run demonstrates the hazard on a real GPU, says in one line
what goes wrong, and what it cannot see. Its predicate returns ``Hit`` objects; messages are built from the
values observed (calls, statuses, threads), never from what the rule expected to see.
"""

from __future__ import annotations

from ctxlab.audit.engine import SEVERITIES, Finding, Hit, RunInfo, Stream, finding
from ctxlab.audit.model.one_pass import model
from ctxlab.audit.rules import (
    classes,
    context,
    endings,
    failures,
    handles,
    hangs,
    lifetimes,
    ordering,
    recording,
    settings,
    sharing,
)
from ctxlab.audit.rules.rule import Rule

RULES: tuple[Rule, ...] = (  # in the order they run: failed-call, last, reports what no rule explained
    context.NO_CONTEXT_RULE,
    context.DESTROYED_WHILE_CURRENT_RULE,
    context.PRIMARY_RELEASED_UNDER_RUNTIME_RULE,
    context.RESET_WITH_LIVE_ALLOCATIONS_RULE,
    context.CROSS_CONTEXT_HANDLE_RULE,
    sharing.FORK_AFTER_INIT_RULE,
    sharing.SEVERAL_RUNTIME_COPIES_RULE,
    sharing.POINTER_FROM_ANOTHER_CONTEXT_RULE,
    sharing.GREEN_CONTEXT_ON_TWO_THREADS_RULE,
    lifetimes.STRAY_CONTEXT_RULE,
    lifetimes.CONTEXT_LEAK_RULE,
    handles.HANDLE_FROM_ANOTHER_CONTEXT_RULE,
    handles.NON_PRIMARY_CURRENT_RULE,
    lifetimes.USED_AFTER_TEARDOWN_RULE,
    handles.UNORDERED_HANDOVER_RULE,
    failures.STICKY_ERROR_RULE,
    classes.CAPTURE_VIOLATION_RULE,
    classes.FREED_MEMORY_USED_RULE,
    classes.HANDLE_DESTROYED_RULE,
    classes.OUT_OF_MEMORY_RULE,
    classes.LAUNCH_CONFIG_RULE,
    settings.SETTING_CHANGED_UNDER_RULE,
    ordering.FREED_WHILE_IN_USE_RULE,
    ordering.UNORDERED_ACCESS_RULE,
    ordering.WAIT_ORDERS_NOTHING_RULE,
    ordering.GRAPH_REPLAYS_FREED_RULE,
    ordering.IPC_INTERIOR_POINTER_RULE,
    ordering.LIBRARY_NOT_WATCHED_RULE,
    recording.RECORDING_FULL_RULE,
    endings.PROGRAM_CRASHED_RULE,
    hangs.PROGRAM_HUNG_RULE,
    failures.FAILED_CALL_RULE
)

RULES_BY_ID = {rule.id: rule for rule in RULES}


def judge(events: list[dict], forks: list[dict] | None = None, exceptions: list[dict] | None = None,
          rules=None, run: RunInfo | None = None) -> list[Finding]:
    """Every rule over the recorded events: the findings, errors first, then in time order."""
    return judge_stream(Stream(list(events), list(forks or ()), list(exceptions or ()), run=run), rules)


def judge_stream(stream: Stream, rules=None) -> list[Finding]:
    """The rules, in their tuple's order, over one stream: each rule's findings mark the calls they account for
    (``Stream.explained``), which the later rules read (``failed-call``, last, reports what no rule explained);
    then a finding of a rule superseded by another's on the same thread is dropped."""
    hits: list[tuple[Rule, Hit]] = []
    failures = model(stream)
    for rule in rules if rules is not None else RULES:
        found = rule.predicate(stream)
        for hit in found:  # a finding accounts for every call of each failure it names
            stream.explained.update(failures.expand({id(e) for e in (hit.event, *hit.calls, *hit.explains)}))
        hits.extend((rule, hit) for hit in found)
    threads = {(rule.id, hit.event.get("tid")) for rule, hit in hits} | {(rule.id, "*") for rule, hit in hits}
    hits = [(rule, hit) for rule, hit in hits
            if not any((other.lstrip("*"), "*" if other.startswith("*") else hit.event.get("tid")) in threads
                       for other in rule.superseded_by)]
    out = [(SEVERITIES.index(rule.severity), hit.event.get("start", 0), finding(rule, hit, stream))
           for rule, hit in hits]
    return [f for _, _, f in sorted(out, key=lambda t: (t[0], t[1]))]
