"""The tracer's nesting and filtering on a real trace recorded on an H200
(`ctxlab trace --format json -- examples/first_context.py`)."""

from ctxlab.trace import by_thread, calls, only_context, render_tree
from tests.conftest import recorded


def tree():
    return only_context(calls(recorded("first_context.trace.json")["events"]))


def names(items):
    return [c["name"] for c in items]


def test_cudaSetDevice_retains_the_primary_context_and_creates_it():
    main = by_thread(tree())["MainThread"]
    set_device = next(c for c in main if c["name"] == "cudaSetDevice")
    children = names(set_device["children"])
    assert "cuDevicePrimaryCtxRetain" in children and "CONTEXT_CREATED" in children
    assert children.index("cuDevicePrimaryCtxRetain") < children.index("CONTEXT_CREATED")


def test_the_worker_thread_binds_the_same_context_at_its_first_runtime_call():
    threads = by_thread(tree())
    created = next(c for c in threads["MainThread"] if c["name"] == "cudaSetDevice")["children"]
    context = next(c["context"] for c in created if c["name"] == "CONTEXT_CREATED")
    worker = threads["worker"]
    first_bind = next(c for c in worker if c["name"] == "cudaMalloc")
    binds = [c for c in first_bind["children"] if c["name"] == "cuCtxSetCurrent"]
    assert binds and binds[0]["context"] == context
    assert not any(c["name"] == "CONTEXT_CREATED" for c in worker)  # no new context on the worker


def test_modules_are_loaded_on_the_worker_at_first_kernel_use():
    worker = by_thread(tree())["worker"]
    flat = [n for c in worker for n in [c["name"], *names(c.get("children", ()))]]
    assert "MODULE_LOADED" in flat and "cuLibraryLoadData" in flat
    assert "MODULE_LOADED" not in [c["name"] for c in by_thread(tree())["MainThread"]]


def test_rendering_the_recorded_trace():
    text = render_tree(tree())
    assert text.startswith("thread MainThread\n")
    assert "    [CONTEXT_CREATED]  ctx 0x" in text


# ---------------------------------------------------------------- Tracer 2.0's records from the H200

def test_the_recorded_perfetto_traces_have_their_tracks():
    from tests.tracing.test_trace_perfetto import check_perfetto

    for name, threads in (("first_context.perfetto.json", {"MainThread", "worker"}),
                          ("torch_train_step.perfetto.json", {"MainThread", "torch-worker"})):
        doc = recorded(name)
        check_perfetto(doc)
        named = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
                 and e["pid"] == 1}
        assert threads <= named, (name, named)
        contexts = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"
                    and e["args"]["name"].startswith("context ")}
        assert len(contexts) == 1, contexts  # one primary context, current on the threads that used it
        holders = {e["args"]["thread"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "context"}
        assert threads <= holders


def test_the_recorded_overhead_is_within_the_goal():
    default, every = recorded("trace_overhead.json"), recorded("trace_overhead-calls-all.json")
    assert default["calls"] == "context" and default["ratio"] <= 1.5
    assert default["callbacks_per_run"] < 10 <= default["records_per_run"]  # records, not Python calls
    assert every["calls"] == "all" and every["ratio"] > default["ratio"]


def test_the_default_selection_sees_the_context_calls_beneath_runtime_calls_by_their_callbacks():
    events = recorded("first_context.trace.json")["events"]
    threads = by_thread(calls(events))
    set_device = next(c for c in threads["MainThread"] if c["name"] == "cudaSetDevice")
    beneath = [c for c in set_device["children"] if c["domain"] == "driver"]
    # the C callback sees every driver call the runtime makes beneath its own (on the H200: the bind, the
    # retain, and the runtime's own queries of the current context and its device)
    assert {"cuCtxSetCurrent", "cuDevicePrimaryCtxRetain"} <= set(names(beneath))
    assert all(c.get("from") == "callback" for c in beneath)
    assert all(c.get("from") is None for c in set_device.get("children", ()) if c["domain"] == "resource")
    launches = [c for c in threads["worker"] if c["name"].startswith("cuLaunchKernel")]
    # each launch carries the context current at its call, read by the callback (no longer inferred)
    assert launches and all(c["context"] == set_device["context"] and "inferred" not in c for c in launches)
