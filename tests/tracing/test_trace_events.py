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


# ---------------------------------------------------------------- the tracer's events (times, not sites)

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


def test_a_function_newer_than_this_cupti_is_named_by_its_id_not_an_error():
    """A runtime newer than CUPTI (13.3 beside CUPTI 13.0) has functions CUPTI cannot name: on the H200,
    cudaDeviceGetExecutionCtx's record made the tracer raise inside the traced scenario."""
    from types import SimpleNamespace

    def unknown(cbid):
        raise ValueError(f"{cbid} is not a valid runtime_api_trace_cbid")

    def no_name(domain, cbid):
        raise RuntimeError("ERROR_INVALID_PARAMETER (1)")

    t = Tracer()
    t._cupti = SimpleNamespace(driver_api_trace_cbid=unknown, runtime_api_trace_cbid=unknown,
                               CallbackDomain=SimpleNamespace(DRIVER_API=1, RUNTIME_API=2), get_callback_name=no_name)
    assert t._function("runtime", 548) == "runtime function #548 (unknown to this CUPTI)"
