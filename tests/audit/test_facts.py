"""The facts taken in the one pass (ctxlab.audit.model.facts): each from the event that establishes it, the
same whatever came between, and the failing calls' contexts classified by the whole run's facts (CPU only)."""

from ctxlab.audit.engine import Stream
from ctxlab.audit.model.facts import primary_handles
from ctxlab.audit.model.hooks import GREEN_CONTEXT
from ctxlab.audit.model.one_pass import model
from tests.audit_events import CREATED, MAIN, OTHER, PRIMARY, WORKER, Events

STREAM = 0x5000


def test_primary_created_and_green_contexts_each_from_their_maker():
    ev = Events()
    ev.runtime("cudaFree", 10, end=40, context=0, line=3)
    ev.resource("CONTEXT_CREATED", 20, context=PRIMARY)  # beneath a runtime call: the primary
    ev.driver("cuCtxCreate_v4", 50, end=70, context=0, line=4, args={"ctx": CREATED, "device": 0})
    ev.resource("CONTEXT_CREATED", 60, context=CREATED)
    ev.driver("cuGreenCtxCreate", 80, end=100, context=0, line=5)
    ev.resource("CONTEXT_CREATED", 90, context=OTHER)  # CUPTI's own handle for the green context
    f = model(Stream(ev.events)).facts
    assert f.primary == {PRIMARY} and f.is_created(CREATED) and not f.is_created(PRIMARY)
    assert f.green[OTHER]["green_of"] == "cuGreenCtxCreate" and f.device == {CREATED: 0}
    assert f.made[CREATED]["start"] == 60
    note = {"domain": "audit", "name": GREEN_CONTEXT, "tid": MAIN, "start": 110, "context": OTHER, "seq": 99}
    assert model(Stream(ev.events + [note])).facts.green[OTHER] is note  # the handle's own note is kept


def test_a_destroy_is_named_by_its_call_and_a_stream_by_each_of_its_lives():
    ev = Events()
    ev.driver("cuCtxDestroy_v2", 10, end=30, context=0, line=3, args={"ctx": CREATED})
    ev.resource("CONTEXT_DESTROY_STARTING", 20, context=CREATED)
    ev.driver("cuCtxDestroy_v2", 40, end=50, context=0, line=4, args={"ctx": OTHER})  # no resource event
    first = ev.driver("cuStreamCreate", 60, end=70, context=PRIMARY, line=5, args={"stream": STREAM})
    second = ev.driver("cuStreamCreate", 80, end=90, tid=WORKER, context=CREATED, line=6, args={"stream": STREAM})
    f = model(Stream(ev.events)).facts
    assert f.destroyed[CREATED]["start"] == 10 and f.destroyed[OTHER]["start"] == 40
    assert f.owner(f.streams, STREAM, 75) == (PRIMARY, first) and f.owner(f.streams, STREAM, 95) == (CREATED, second)
    assert f.owner(f.streams, STREAM, 65) is None  # not made until its call returned


def test_a_failing_calls_context_is_classified_by_the_whole_runs_facts():
    """The call fails in a context that only a later event shows to be green (the handle cuCtxFromGreenCtx
    wrote, noted after it): the finished facts classify it, as its finding's state says."""
    ev = Events()
    ev.driver("cuDevicePrimaryCtxRetain", 10, end=20, tid=WORKER, context=0, line=3,
              args={"ctx": PRIMARY, "device": 0})
    failing = ev.driver("cuMemAlloc_v2", 50, context=OTHER, status="CUDA_ERROR_OUT_OF_MEMORY", line=4,
                        args={"size": 1 << 40})
    primary_call = ev.driver("cuMemAlloc_v2", 60, context=PRIMARY, status="CUDA_ERROR_OUT_OF_MEMORY", line=5,
                             args={"size": 1 << 40})
    note = {"domain": "audit", "name": GREEN_CONTEXT, "tid": MAIN, "start": 110, "context": OTHER, "seq": 99}
    m = model(Stream(ev.events + [note]))
    assert m.states[id(failing)].context_kind == "green"
    assert (m.states[id(primary_call)].context_kind, m.states[id(primary_call)].device) == ("primary", 0)
    assert primary_handles(ev.events) == {PRIMARY}


def test_the_rules_leave_the_facts_as_the_pass_made_them():
    """green-context-on-two-threads sets aside a green handle that is also the primary's: on its own copy, not
    on the model's facts every rule reads."""
    from ctxlab.audit.rules.catalogue import judge_stream

    ev = Events()
    ev.driver("cuDevicePrimaryCtxRetain", 10, end=20, context=0, line=3, args={"ctx": PRIMARY, "device": 0})
    note = {"domain": "audit", "name": GREEN_CONTEXT, "tid": MAIN, "start": 30, "context": PRIMARY, "seq": 99}
    stream = Stream(ev.events + [note])
    judge_stream(stream)
    assert model(stream).facts.green == {PRIMARY: note}


def test_a_handle_made_twice_at_one_time_belongs_to_the_call_after_the_resource_event():
    """The handle's owners in time order, a resource event before a call at one time (Facts.finish): the call,
    fed first by its start, still comes last."""
    ev = Events()
    call = ev.driver("cuStreamCreate", 10, end=50, context=CREATED, line=3, args={"stream": STREAM})
    ev.resource("STREAM_CREATED", 50, context=OTHER)
    ev.events[-1]["stream"] = STREAM
    f = model(Stream(ev.events)).facts
    assert f.owner(f.streams, STREAM, 50) == (CREATED, call)
