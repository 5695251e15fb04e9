"""The two rules that read what the audit's hooks noted inside calls (pointer-from-another-context,
green-context-on-two-threads), on synthetic event streams in the tracer's format (CPU only): each fires
where the hazard is, at the user's file:line, and stays quiet on the near misses."""

from ctxlab.audit import judge
from ctxlab.audit.model.hooks import FOREIGN_POINTER, GREEN_CONTEXT
from tests.audit_events import CREATED, MAIN, OTHER, PRIMARY, WORKER, Events

GREEN, GREEN_HANDLE = 0x7F00CC00, 0x5A5A0000


def only(findings, rule):
    found = [f for f in findings if f.rule == rule]
    others = [f for f in findings if f.rule != rule and f.severity == "error"]
    assert not others, [(f.rule, f.message) for f in others]
    return found


# ---------------------------------------------------------------- pointer-from-another-context

def foreign_stream(launch_ctx=CREATED, owner=PRIMARY, green=False) -> Events:
    ev = Events()
    ev.primary_runtime()
    malloc = ev.runtime("cudaMalloc", 70, end=90, context=PRIMARY)
    alloc = ev.driver("cuMemAlloc_v2", 75, end=85, context=PRIMARY, line=12, **{"from": "callback"})
    alloc["correlation"] = malloc["correlation"]  # the runtime's driver call shares its id
    if green:
        ev.driver("cuCtxFromGreenCtx", 95, context=0, line=14)
        ev.observed(GREEN_CONTEXT, 96, context=GREEN, green=GREEN_HANDLE, line=14)
    ev.driver("cuCtxCreate_v4", 100, end=120, context=CREATED, line=15)
    ev.driver("cuLaunchKernel", 130, context=launch_ctx)
    ev.observed(FOREIGN_POINTER, 131, context=launch_ctx, owner=owner, launch="cuLaunchKernel", function=0xF00,
                parameter=0, offset=0, pointer=0x7F0000001000, base=0x7F0000000000, size=16384,
                allocation_correlation=alloc["correlation"], line=16)
    return ev


def test_pointer_from_another_context_is_a_warning_at_the_launch():
    (f,) = only(judge(foreign_stream().events), "pointer-from-another-context")
    assert f.severity == "warning" and str(f.location) == "app.py:16" and f.location_from == "callback"
    assert f.claim == "migrate.own-address-space"
    assert f"context {CREATED:#x}" in f.message and f"allocation made in context {PRIMARY:#x}" in f.message
    assert "parameter 0 (byte 0)" in f.message and "16384-byte" in f.message
    assert [(what, str(loc)) for what, loc in f.related] == [("allocated at", "app.py:12")]


def test_pointer_from_another_context_says_when_the_owner_was_destroyed_later():
    ev = foreign_stream()
    ev.resource("CONTEXT_DESTROY_STARTING", 200, context=PRIMARY)
    (f,) = only(judge(ev.events), "pointer-from-another-context")
    assert f"context {PRIMARY:#x} was destroyed later" in f.message


def test_pointer_from_another_context_once_per_thread_contexts_and_function():
    ev = foreign_stream()
    again = dict(ev.events[-1], start=140, seq=999, offset=8)
    ev.events.append(again)
    assert len(only(judge(ev.events), "pointer-from-another-context")) == 1


def test_pointer_between_a_green_context_and_the_primary_is_quiet():
    # the near miss: memory shared by design (migrate.green-memory-shared-with-primary)
    ev = foreign_stream(launch_ctx=GREEN, owner=PRIMARY, green=True)
    assert not [f for f in judge(ev.events) if f.rule == "pointer-from-another-context"]


def test_pointer_between_two_created_contexts_fires_even_with_a_green_context_about():
    ev = foreign_stream(launch_ctx=OTHER, owner=CREATED, green=True)
    assert len(only(judge(ev.events), "pointer-from-another-context")) == 1


def test_no_foreign_argument_no_finding():
    ev = foreign_stream()
    ev.events = [e for e in ev.events if e.get("name") != FOREIGN_POINTER]
    assert not judge(ev.events) or all(f.rule != "pointer-from-another-context" for f in judge(ev.events))


# ---------------------------------------------------------------- green-context-on-two-threads

def green_stream(second_push: int = 60, first_pop: int = 100) -> Events:
    """MainThread pushes the green context, syncs, pops at ``first_pop``; worker pushes it at ``second_push``,
    syncs and pops."""
    ev = Events()
    ev.driver("cuGreenCtxCreate", 10, end=20, line=8)
    ev.driver("cuCtxFromGreenCtx", 22, end=25, line=9)
    ev.observed(GREEN_CONTEXT, 24, context=GREEN, green=GREEN_HANDLE, line=9)
    ev.driver("cuCtxPushCurrent_v2", 40, end=45, context=GREEN, line=20)
    ev.driver("cuCtxSynchronize", 80, end=90, context=GREEN, line=22)
    ev.driver("cuCtxPopCurrent_v2", first_pop, end=first_pop + 5, context=0, line=24)
    ev.driver("cuCtxPushCurrent_v2", second_push, end=second_push + 5, tid=WORKER, context=GREEN, line=20)
    ev.driver("cuCtxSynchronize", second_push + 30, end=second_push + 40, tid=WORKER, context=GREEN, line=22)
    ev.driver("cuCtxPopCurrent_v2", second_push + 50, end=second_push + 55, tid=WORKER, context=0, line=24)
    return ev


def test_green_context_on_two_threads_fires_at_the_second_push():
    (f,) = only(judge(green_stream().events), "green-context-on-two-threads")
    assert f.severity == "error" and f.thread == "worker" and str(f.location) == "app.py:20"
    assert f.claim == "migrate.green-one-thread-at-a-time" and f"green context {GREEN:#x}" in f.message
    assert "MainThread" in f.message
    assert ("green context made at", "app.py:9") in [(w, str(loc)) for w, loc in f.related]


def test_green_context_handed_over_is_quiet():
    # the near miss: MainThread pops before worker pushes (the lab's handoff-green relay)
    assert not judge(green_stream(second_push=200, first_pop=100).events)


def test_a_created_context_on_two_threads_is_not_this_rules():
    ev = green_stream()
    ev.events = [e for e in ev.events if e.get("name") != GREEN_CONTEXT]  # GREEN is just a context now
    assert not [f for f in judge(ev.events) if f.rule == "green-context-on-two-threads"]


def test_a_green_handle_equal_to_the_primary_context_is_not_judged():
    ev = green_stream()
    ev.primary_runtime(start=300)
    for e in ev.events:
        if e.get("context") == GREEN:
            e["context"] = PRIMARY
    assert not [f for f in judge(ev.events) if f.rule == "green-context-on-two-threads"]


def test_green_context_reported_once_per_pair_of_threads():
    ev = green_stream()
    ev.driver("cuCtxSynchronize", 92, end=95, tid=MAIN, context=GREEN, line=23)
    assert len(only(judge(ev.events), "green-context-on-two-threads")) == 1


def recorded_green_events() -> list[dict]:
    """The events ``examples/hazards/green_context_on_two_threads.py`` gave on the H200 (driver 580): CUPTI named
    the green context current on both threads by the first of the two contexts created inside cuGreenCtxCreate,
    not by the handle cuCtxFromGreenCtx returned."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).parents[1] / "data" / "green_two_threads_h200.events.json").read_text())


def test_green_context_on_two_threads_fires_on_the_events_recorded_on_the_h200():
    events = recorded_green_events()
    from_green = {e["context"] for e in events if e["name"] == GREEN_CONTEXT}
    current = {e["context"] for e in events if e["name"] == "cuCtxSynchronize"}
    assert from_green and current and not from_green & current  # the two handles differ: the case this covers
    (f,) = only(judge(events), "green-context-on-two-threads")
    assert f.thread == "second" and "made by cuGreenCtxCreate" in f.message


def test_green_context_handed_over_on_the_h200_events_is_quiet():
    events = recorded_green_events()
    first_pop = next(e for e in events if e["name"].startswith("cuCtxPopCurrent") and e["thread"] == "first")
    moved = [e for e in events if e["thread"] == "second"]
    shift = first_pop["end"] + 1000 - min(e["start"] for e in moved)  # the second thread starts after the pop
    for e in moved:
        e["start"] += shift
        if e.get("end"):
            e["end"] += shift
    assert not [f for f in judge(events) if f.rule == "green-context-on-two-threads"]


def with_foreign_pointer(events: list[dict], owner: int) -> list[dict]:
    """The H200 events, with the primary context made first and a launch in the green context (as CUPTI names
    it) whose argument points into memory of ``owner``."""
    main = next(e for e in events if e["name"] == "cuDeviceGet")
    green_current = next(e["context"] for e in events if e["name"] == "cuCtxSynchronize")
    t = main["end"] + 10
    retain = {**main, "name": "cuDevicePrimaryCtxRetain", "start": t, "end": t + 100, "context": 0}
    made = {"domain": "resource", "name": "CONTEXT_CREATED", "thread": main["thread"], "tid": main["tid"],
            "context": 0x5000, "start": t + 50}
    sync = next(e for e in events if e["name"] == "cuCtxSynchronize")
    launch = {"domain": "audit", "name": FOREIGN_POINTER, "thread": sync["thread"], "tid": sync["tid"],
              "context": green_current, "owner": owner, "function": 0x77, "pointer": 0x7F0000001000, "size": 4096,
              "offset": 0, "parameter": 0, "launch": "cuLaunchKernel", "start": sync["start"] - 5}
    return sorted([*events, retain, made, launch], key=lambda e: e["start"])


def test_a_green_kernel_reading_primary_memory_is_quiet_with_the_handle_cupti_gives():
    # CUPTI names the green context by a context made inside cuGreenCtxCreate: that one is green too
    assert not [f for f in judge(with_foreign_pointer(recorded_green_events(), owner=0x5000))
                if f.rule == "pointer-from-another-context"]


def test_a_green_kernel_reading_another_created_contexts_memory_is_reported():
    found = [f for f in judge(with_foreign_pointer(recorded_green_events(), owner=0x6000))
             if f.rule == "pointer-from-another-context"]
    assert len(found) == 1 and "0x6000" in found[0].message
