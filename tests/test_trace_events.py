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
