"""Nesting and filtering of trace events (pure functions; recorded real traces in test_trace_recorded)."""

from ctxlab.trace import calls, only_context, render_tree, summarize


def ev(seq, domain, name, site=None, thread="main", **extra):
    out = {"seq": seq, "domain": domain, "name": name, "thread": thread, **extra}
    if site:
        out["site"] = site
    return out


EVENTS = [
    ev(0, "runtime", "cudaSetDevice_v3020", "enter", correlation=1),
    ev(1, "driver", "cuDevicePrimaryCtxRetain", "enter", correlation=2),
    ev(2, "resource", "CONTEXT_CREATED", context=0x10),
    ev(3, "driver", "cuDevicePrimaryCtxRetain", "exit", correlation=2, status="CUDA_SUCCESS", context=0x10),
    ev(4, "driver", "cuCtxSetCurrent", "enter", correlation=3),
    ev(5, "driver", "cuCtxSetCurrent", "exit", correlation=3, status="CUDA_SUCCESS", context=0x10),
    ev(6, "driver", "cuMemAlloc_v2", "enter", correlation=4),
    ev(7, "driver", "cuMemAlloc_v2", "exit", correlation=4, status="CUDA_SUCCESS", context=0x10),
    ev(8, "runtime", "cudaSetDevice_v3020", "exit", correlation=1, status="cudaSuccess"),
    ev(9, "driver", "cuCtxGetCurrent", "enter", thread="worker"),
    ev(10, "driver", "cuCtxGetCurrent", "exit", thread="worker", status="CUDA_ERROR_INVALID_CONTEXT"),
]


def test_driver_calls_nest_under_the_runtime_call_that_made_them():
    tree = calls(EVENTS)
    assert [c["name"] for c in tree] == ["cudaSetDevice_v3020", "cuCtxGetCurrent"]
    runtime = tree[0]
    assert [c["name"] for c in runtime["children"]] == ["cuDevicePrimaryCtxRetain", "CONTEXT_CREATED",
                                                         "cuCtxSetCurrent", "cuMemAlloc_v2"]
    assert runtime["status"] == "cudaSuccess"
    assert runtime["children"][0]["status"] == "CUDA_SUCCESS" and runtime["children"][0]["context"] == 0x10
    assert tree[1]["thread"] == "worker" and tree[1]["parent"] is None


def test_nesting_is_per_thread():
    interleaved = [ev(0, "runtime", "cudaMalloc", "enter", thread="a"),
                   ev(1, "driver", "cuCtxGetCurrent", "exit", thread="b"),
                   ev(2, "driver", "cuMemAlloc_v2", "exit", thread="a"),
                   ev(3, "runtime", "cudaMalloc", "exit", thread="a")]
    tree = calls(interleaved)
    assert [c["name"] for c in tree[0]["children"]] == ["cuMemAlloc_v2"]
    assert tree[1]["name"] == "cuCtxGetCurrent" and tree[1]["thread"] == "b"


def test_only_context_keeps_context_calls_and_their_runtime_callers():
    kept = only_context(calls(EVENTS))
    assert [c["name"] for c in kept[0]["children"]] == ["cuDevicePrimaryCtxRetain", "CONTEXT_CREATED",
                                                         "cuCtxSetCurrent"]
    assert kept[1]["name"] == "cuCtxGetCurrent"


def test_tree_rendering_and_step_summary():
    text = render_tree(only_context(calls(EVENTS)))
    assert text.splitlines()[0] == "thread main"
    assert "    [CONTEXT_CREATED]  ctx 0x10" in text
    assert "cuCtxGetCurrent -> CUDA_ERROR_INVALID_CONTEXT" in text
    summary = summarize(EVENTS)
    assert summary[0].startswith("cudaSetDevice_v3020 > cuDevicePrimaryCtxRetain")


# ---------------------------------------------------------------- the activity-record tracer's events

from ctxlab.trace import CALLBACK_PREFIXES, Tracer, api_name, current_spans  # noqa: E402


def span(domain, name, start, end=None, thread="main", **extra):
    out = {"domain": domain, "name": name, "start": start, "thread": thread, **extra}
    if end is not None:
        out["end"] = end
    return out


SPANS = [
    span("runtime", "cudaSetDevice", 10, 50, status="cudaSuccess", context=0x10),
    span("driver", "cuDevicePrimaryCtxRetain", 12, 30, status="CUDA_SUCCESS", context=0),
    span("resource", "CONTEXT_CREATED", 20, context=0x10),
    span("driver", "cuCtxSetCurrent", 32, 40, status="CUDA_SUCCESS", context=0x10),
    span("driver", "cuCtxGetCurrent", 55, 56, status="CUDA_SUCCESS", context=0x10),
    span("driver", "cuCtxGetDevice_v2", 15, 16, thread="worker", status="CUDA_ERROR_INVALID_CONTEXT"),
]


def test_calls_nest_by_time_per_thread_whatever_order_the_records_came_in():
    tree = calls(list(reversed(SPANS)))
    assert [c["name"] for c in tree] == ["cudaSetDevice", "cuCtxGetDevice_v2", "cuCtxGetCurrent"]
    assert [c["name"] for c in tree[0]["children"]] == ["cuDevicePrimaryCtxRetain", "CONTEXT_CREATED",
                                                         "cuCtxSetCurrent"]
    assert all(c["parent"] == "cudaSetDevice" for c in tree[0]["children"])
    assert tree[1]["thread"] == "worker" and tree[1]["parent"] is None  # inside cudaSetDevice's time, other thread
    assert tree[2]["parent"] is None  # after cudaSetDevice returned
    text = render_tree(only_context(tree))
    assert "    [CONTEXT_CREATED]  ctx 0x10" in text and "cuCtxGetDevice_v2 -> CUDA_ERROR_INVALID_CONTEXT" in text
    assert summarize(SPANS)[0].startswith("cudaSetDevice  ctx 0x10 > cuDevicePrimaryCtxRetain, [CONTEXT_CREATED]")


def test_current_spans_follow_the_context_each_call_returned_with():
    spans = current_spans(SPANS + [span("driver", "cuCtxPopCurrent_v2", 60, 62, status="CUDA_SUCCESS", context=0),
                                   span("driver", "cuMemAlloc_v2", 70, 71, thread="worker", context=0x10)])
    main = [s for s in spans if s["thread"] == "main"]
    assert [(s["context"], s["start"], s["end"]) for s in main] == [(0x10, 32, 60)]  # until the pop began
    (worker,) = [s for s in spans if s["thread"] == "worker"]
    assert worker["start"] == 70 and worker["end"] == 71


def seen(name, start, end, context, tid=101):
    """What an exit callback keeps of a call."""
    return {"context": context, "context_uid": 1 if context else 0, "name": name, "tid": tid, "start": start,
            "end": end, "status": "CUDA_SUCCESS"}


def fake_tracer(exact=None, resources=()):
    """A Tracer fed activity rows by hand: the function names and statuses are looked up in caches we fill."""
    t = Tracer()
    t._kinds = {4: "driver", 5: "runtime"}
    t._fn_names = {(1, 1): "cudaSetDevice", (0, 2): "cuDevicePrimaryCtxRetain", (0, 3): "cuCtxSetCurrent",
                   (0, 4): "cuCtxGetApiVersion", (0, 5): "cuCtxGetDevice_v2"}
    t._status = {("runtime", 0): "cudaSuccess", ("driver", 0): "CUDA_SUCCESS",
                 ("driver", 201): "CUDA_ERROR_INVALID_CONTEXT"}
    t._names = {101: "MainThread", 202: "worker"}
    t._name_threads = lambda: None
    t._exact = {k: list(v) for k, v in (exact or {}).items()}
    t._resources = list(resources)
    return t


def test_records_become_events_with_exact_contexts_where_a_callback_saw_the_call_and_the_threads_elsewhere():
    t = fake_tracer(exact={("driver", 3): [seen("cuCtxSetCurrent", 33, 39, 0x10)],
                           ("driver", 2): [seen("cuDevicePrimaryCtxRetain", 13, 29, 0)]},
                    resources=[{"domain": "resource", "name": "CONTEXT_CREATED", "context": 0x10, "context_uid": 1,
                                "tid": 101, "start": 20}])
    # (kind, cbid, start, end, tid, correlation, return value): CUPTI's order, not the calls'
    t._take_rows([(4, 3, 32, 40, 101, 3, 0), (4, 2, 12, 30, 101, 2, 0), (5, 1, 10, 50, 101, 1, 0),
                  (4, 4, 45, 46, 101, 4, 0), (4, 5, 15, 16, 202, 5, 201)])
    events = t.drain()
    assert [e["name"] for e in events] == ["cudaSetDevice", "cuDevicePrimaryCtxRetain", "cuCtxGetDevice_v2",
                                           "CONTEXT_CREATED", "cuCtxSetCurrent", "cuCtxGetApiVersion"]
    by = {e["name"]: e for e in events}
    assert by["cuCtxSetCurrent"]["context"] == 0x10 and "inferred" not in by["cuCtxSetCurrent"]
    assert by["cuCtxGetApiVersion"]["context"] == 0x10 and by["cuCtxGetApiVersion"]["inferred"]
    assert by["cudaSetDevice"]["context"] == 0x10 and by["cudaSetDevice"]["context_uid"] == 1  # after its calls
    assert by["cuCtxGetDevice_v2"]["context"] == 0 and by["cuCtxGetDevice_v2"]["thread"] == "worker"
    assert by["cuCtxGetDevice_v2"]["status"] == "CUDA_ERROR_INVALID_CONTEXT"
    assert [e["seq"] for e in events] == list(range(6))
    assert t.drain() == []
    # the next drain goes on from the thread's last context
    t._take_rows([(4, 4, 60, 61, 101, 9, 0)])
    (later,) = t.drain()
    assert later["context"] == 0x10 and later["seq"] == 6


def test_a_callback_seen_before_its_record_waits_for_it():
    t = fake_tracer(exact={("driver", 3): [seen("cuCtxSetCurrent", 32, 40, 0x10, tid=202)]})
    t._flushed = (41, 101)  # flushed by another thread just after the call: the record may still come
    assert t.drain() == []
    t._take_rows([(4, 3, 32, 40, 202, 3, 0)])
    (event,) = t.drain()
    assert event["context"] == 0x10 and "inferred" not in event and "from" not in event


def test_calls_only_a_callback_saw_are_events_of_their_own_nested_in_the_runtime_call():
    # the driver calls the runtime makes inside cudaSetDevice get callbacks but no activity record
    # ... and share the runtime call's correlation id
    t = fake_tracer(exact={("driver", 1): [seen("cuDevicePrimaryCtxRetain", 12, 30, 0),
                                           seen("cuCtxSetCurrent", 32, 40, 0x10)]})
    t._flushed = (60, 101)  # flushed by the same thread after the calls returned: settled
    t._take_rows([(5, 1, 10, 50, 101, 1, 0)])
    events = t.drain()
    assert [(e["name"], e.get("from")) for e in events] == [("cudaSetDevice", None),
                                                             ("cuDevicePrimaryCtxRetain", "callback"),
                                                             ("cuCtxSetCurrent", "callback")]
    assert events[0]["context"] == 0x10 and events[0]["inferred"]  # after its cuCtxSetCurrent
    (tree,) = calls(events)
    assert [c["name"] for c in tree["children"]] == ["cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]


def test_runtime_names_lose_cuptis_version_suffix_and_queries_get_no_callback():
    assert api_name("runtime", "cudaSetDevice_v3020") == "cudaSetDevice"
    assert api_name("runtime", "cudaLaunchKernel_ptsz_v7000") == "cudaLaunchKernel_ptsz"
    assert api_name("driver", "cuCtxGetDevice_v2") == "cuCtxGetDevice_v2"
    for query in ("cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetApiVersion", "cuLaunchKernel", "cuCtxSynchronize"):
        assert not query.startswith(CALLBACK_PREFIXES)
    for change in ("cuCtxSetCurrent", "cuCtxPushCurrent_v2", "cuDevicePrimaryCtxRetain", "cuModuleLoadData",
                   "cuLibraryLoadData", "cuKernelGetFunction", "cuCtxCreate_v4"):
        assert change.startswith(CALLBACK_PREFIXES)


def test_a_tracer_selection_is_checked():
    import pytest

    with pytest.raises(ValueError):
        Tracer(calls="some")


def test_callbacks_of_calls_that_share_a_correlation_id_stay_apart():
    """What the exit callbacks of two driver calls made inside one runtime call keep (CUPTI gives both the
    runtime call's correlation id): two calls, each with its own times and context."""
    import threading
    from types import SimpleNamespace

    clock = iter(range(100, 200, 10))
    fake = SimpleNamespace(get_timestamp=lambda: next(clock))
    t = fake_tracer()
    t._cupti = fake
    t._domain_names = {1: "driver", 2: "runtime", 3: "resource"}
    tid = threading.get_native_id()
    t._names[tid] = "MainThread"

    def data(name, site, context):
        return SimpleNamespace(callback_site=site, correlation_id=1, context=context, context_uid=1 if context else 0,
                               function_name=name, function_return_value=0)

    for name, context in (("cuDevicePrimaryCtxRetain", 0), ("cuCtxSetCurrent", 0x10)):
        t._callback(None, 1, 0, data(name, 0, 0))
        t._callback(None, 1, 0, data(name, 1, context))
    t._flushed = (1000, tid)
    t._take_rows([(5, 1, 90, 200, tid, 1, 0)])
    events = t.drain()
    assert [(e["name"], e["start"], e["end"], e["context"]) for e in events] == [
        ("cudaSetDevice", 90, 200, 0x10), ("cuDevicePrimaryCtxRetain", 100, 110, 0),
        ("cuCtxSetCurrent", 120, 130, 0x10)]
    assert t.stats["callbacks"] == 2


def test_a_function_newer_than_this_cupti_is_named_by_its_id_not_an_error():
    """A runtime newer than CUPTI (13.3 beside CUPTI 13.0) has functions CUPTI cannot name: on the H200,
    cudaDeviceGetExecutionCtx's record made the tracer raise inside the traced scenario."""
    from types import SimpleNamespace

    def unknown(cbid):
        raise ValueError(f"{cbid} is not a valid runtime_api_trace_cbid")

    def no_name(domain, cbid):
        raise RuntimeError("ERROR_INVALID_PARAMETER (1)")

    t = fake_tracer()
    t._cupti = SimpleNamespace(driver_api_trace_cbid=unknown, runtime_api_trace_cbid=unknown,
                               CallbackDomain=SimpleNamespace(DRIVER_API=1, RUNTIME_API=2), get_callback_name=no_name)
    assert t._function("runtime", 548) == "runtime function #548 (unknown to this CUPTI)"
