"""The Perfetto (Chrome trace-event JSON) export: its structure, on events shaped as the tracer makes them."""

import json

from ctxlab.cli.tracing import render
from ctxlab.report.perfetto import to_perfetto

US = 1000  # ns


def ev(domain, name, start, end=None, thread="MainThread", tid=11, **extra):
    out = {"domain": domain, "name": name, "start": start * US, "thread": thread, "tid": tid, **extra}
    if end is not None:
        out["end"] = end * US
    return out


EVENTS = [
    ev("runtime", "cudaSetDevice", 10, 50, correlation=1, status="cudaSuccess", context=0xA0, context_uid=1,
       inferred=True),
    ev("driver", "cuDevicePrimaryCtxRetain", 12, 30, correlation=2, status="CUDA_SUCCESS", context=0, context_uid=0),
    ev("resource", "CONTEXT_CREATED", 20, context=0xA0, context_uid=1),
    ev("driver", "cuCtxSetCurrent", 32, 40, correlation=3, status="CUDA_SUCCESS", context=0xA0, context_uid=1),
    ev("driver", "cuCtxGetDevice_v2", 60, 61, thread="worker", tid=22, correlation=4,
       status="CUDA_ERROR_INVALID_CONTEXT", context=0, inferred=True),
    ev("runtime", "cudaMalloc", 70, 90, thread="worker", tid=22, correlation=5, status="cudaSuccess", context=0xA0,
       context_uid=1, inferred=True),
    ev("driver", "cuCtxSetCurrent", 72, 75, thread="worker", tid=22, correlation=6, status="CUDA_SUCCESS",
       context=0xA0, context_uid=1),
    ev("driver", "cuLaunchKernel", 100, 101, correlation=7, status="CUDA_SUCCESS", context=0xA0, context_uid=1,
       inferred=True),
]


def check_perfetto(doc: dict) -> None:
    """What ui.perfetto.dev and chrome://tracing need, and what ctxlab promises to put there."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    json.dumps(doc)
    by_track: dict = {}
    for e in doc["traceEvents"]:
        assert e["ph"] in ("M", "X", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index")
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] > 0
            by_track.setdefault((e["pid"], e["tid"]), []).append(e)
            if e["cat"] in ("driver", "runtime"):
                assert "status" in e["args"] and "correlation" in e["args"]
                if "context" in e["args"]:
                    assert e["args"]["context"].startswith("0x")
            else:
                assert e["cat"] == "context" and e["args"]["thread"] and e["args"]["context"].startswith("0x")
        else:
            assert e["s"] == "t" and e["cat"] == "resource"
    named = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(by_track) <= named  # every track has a name
    for track, slices in by_track.items():  # slices on one track nest; none overlaps another partly
        stack = []
        for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
            end = e["ts"] + e["dur"]
            while stack and stack[-1] <= e["ts"] + 1e-6:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-6, (track, e)
            stack.append(end)


def test_structure():
    doc = to_perfetto(EVENTS, program="first_context.py")
    check_perfetto(doc)
    assert doc["otherData"]["schema"] == "ctxlab-perfetto/1"


def test_a_track_per_host_thread_with_calls_nested_and_resources_as_instants():
    doc = to_perfetto(EVENTS)
    threads = {e["args"]["name"]: e["tid"] for e in doc["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 1}
    assert threads == {"MainThread": 11, "worker": 22}
    main = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 1 and e["tid"] == 11]
    outer = next(e for e in main if e["name"] == "cudaSetDevice")
    inner = next(e for e in main if e["name"] == "cuDevicePrimaryCtxRetain")
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert outer["args"]["context_id"] == 1 and outer["args"]["status"] == "cudaSuccess"
    failed = next(e for e in doc["traceEvents"] if e["name"] == "cuCtxGetDevice_v2")
    assert failed["args"]["status"] == "CUDA_ERROR_INVALID_CONTEXT" and "context" not in failed["args"]
    (created,) = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert created["name"] == "CONTEXT_CREATED" and created["tid"] == 11 and created["args"]["context"] == "0xa0"
    assert created["ts"] == 10.0  # microseconds from the first event


def test_a_track_per_context_shows_which_threads_had_it_current_and_when():
    doc = to_perfetto(EVENTS)
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    (ctx_pid,) = [pid for pid, name in processes.items() if name.startswith("context ")]
    assert processes[ctx_pid] == "context 1 (0xa0)"
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == ctx_pid]
    holders = {e["args"]["thread"]: (e["ts"], e["ts"] + e["dur"]) for e in spans}
    assert set(holders) == {"MainThread", "worker"}
    assert holders["MainThread"][0] == 22.0  # from cuCtxSetCurrent's start (32 us - 10 us)
    # from its cuCtxSetCurrent to the end of the trace: nothing took it off the worker
    assert holders["worker"] == (62.0, 91.0)


def test_cli_render_writes_perfetto_json():
    doc = json.loads(render(EVENTS, "perfetto", "prog.py"))
    check_perfetto(doc)
    assert doc["otherData"]["program"] == "prog.py"
    raw = json.loads(render(EVENTS, "json", "prog.py", stats={"records": 7}))
    assert raw["schema"] == "ctxlab-trace/2" and raw["stats"] == {"records": 7} and len(raw["events"]) == len(EVENTS)


def test_a_context_id_seen_as_0_while_the_context_was_made_is_named_by_the_later_one():
    made = ("CONTEXT_CREATED", "cuCtxSetCurrent")
    early = [dict(e, context_uid=0) if e["name"] in made and e["thread"] == "MainThread" else e for e in EVENTS]
    doc = to_perfetto(early)
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert "context 1 (0xa0)" in names
    created = next(e for e in doc["traceEvents"] if e["ph"] == "i")
    assert created["args"]["context_id"] == 1
