"""Folding a flight recording (ctxlab/tracing/fold.py): which records judging keeps, on synthetic records of
``RECORD_DTYPE`` checked against a plain-Python reading of the module's rules (queries, runs of launches,
special streams, each thread's tail, chunks), then on a recording the real C callback wrote, read and judged."""

import ctypes
import os
import shutil
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.tracing import fold as fold_module
from ctxlab.tracing import native
from ctxlab.tracing.fold import KEEP, LAUNCH, QUERY, fold, kind_of

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

DTYPE = native.__getattr__("RECORD_DTYPE")
D, R, RES = native.DOMAIN_DRIVER, native.DOMAIN_RUNTIME, native.DOMAIN_RESOURCE
CTX, CTX2 = 0x1000, 0x2000
# cbid -> (domain, raw name, public name, kind, field holding a launch's stream)
TABLE = {
    1: (D, "cuCtxGetCurrent", "cuCtxGetCurrent", QUERY, None),
    2: (D, "cuCtxGetDevice", "cuCtxGetDevice", QUERY, None),
    3: (D, "cuStreamQuery", "cuStreamQuery", KEEP, None),
    4: (D, "cuEventQuery", "cuEventQuery", KEEP, None),
    5: (D, "cuLaunchKernel", "cuLaunchKernel", LAUNCH, "b"),
    6: (D, "cuMemFree_v2", "cuMemFree_v2", KEEP, None),
    7: (D, "cuLaunchKernel_ptsz", "cuLaunchKernel_ptsz", LAUNCH, "b"),
    8: (R, "cudaLaunchKernel_v7000", "cudaLaunchKernel", LAUNCH, "e"),
    9: (R, "cudaGetDevice_v3020", "cudaGetDevice", QUERY, None),
    10: (R, "cudaStreamQuery_v3020", "cudaStreamQuery", KEEP, None),
}
NAMES = {(dom, cbid): raw for cbid, (dom, raw, *_rest) in TABLE.items()}
BLOBS = {1: b"\x01" * 16, 2: b"\x02" * 16, 3: b"\x01" * 16}  # 3 holds the same bytes as 1, elsewhere
IDENTITY = ("tid", "domain", "cbid", "context", "context_uid", "a", "b", "c", "d", "e")


def name_of(domain, cbid):
    assert domain != RES, "a resource record's name is never asked for"
    return NAMES.get((domain, cbid), "")


def blob_of(at, length):
    return BLOBS[at][:length]


def rows(*specs):
    """Records from dicts (missing fields: thread 1, context CTX, success, no stack, bytes or flag)."""
    out = np.zeros(len(specs), dtype=DTYPE)
    for i, spec in enumerate(specs):
        values = {"tid": 1, "context": CTX, "context_uid": 7, "start": 10 * i, "end": 10 * i + 5,
                  "correlation": i + 1, "domain": TABLE[spec.get("cbid", 1)][0], **spec}
        if values.get("blob"):
            values.setdefault("blob_len", len(BLOBS[values["blob"]]))
        for key, value in values.items():
            out[i][key] = value
    return out


def query(cbid=1, **kw):
    return {"cbid": cbid, "a": CTX, **kw}


def launch(kernel=0xA, stream=5, **kw):
    return {"cbid": 5, "a": kernel, "b": stream, "c": 0x100000001, **kw}


def rt_launch(stream=5, grid=0x10001, **kw):
    return {"cbid": 8, "a": grid, "b": 0x100000020, "c": 1, "e": stream, **kw}


def free(**kw):
    return {"cbid": 6, "a": 0xBEEF, **kw}


def run(*specs, **kw):
    return fold(rows(*specs), name_of, blob_of, **kw)


def kept(*specs):
    return run(*specs).kept.tolist()


@pytest.fixture()
def untailed(monkeypatch):
    """No tail kept whole: the rules alone decide (the tail has its own tests)."""
    monkeypatch.setattr(fold_module, "TAIL", 0)


# ---------------------------------------------------------------- which function is what


@pytest.mark.parametrize("cbid", sorted(TABLE))
def test_kind_of_sorts_real_names_into_queries_launches_and_the_rest(cbid):
    domain, raw, _public, kind, letter = TABLE[cbid]
    assert kind_of(domain, raw) == (kind, "abcde".index(letter) if letter else -1)


@pytest.mark.parametrize("domain, raw", [
    (D, "cuLaunchHostFunc"), (D, "cuGraphLaunch"), (D, "cuStreamSynchronize"), (D, "cuEventQuery"),
    (R, "cudaLaunchKernelExC_v11060"),  # a launch whose stream is not kept: judged whole
    (RES, "cuCtxGetCurrent"), (4, "cuLaunchKernel")])
def test_kind_of_keeps_what_is_neither_a_pure_query_nor_a_launch_with_its_stream(domain, raw):
    assert kind_of(domain, raw) == (KEEP, -1)


@pytest.mark.parametrize("domain, raw, expected", [
    (D, "cuLaunchKernelEx", (LAUNCH, 1)), (D, "cuLaunchCooperativeKernel_ptsz", (LAUNCH, 1)),
    (R, "cudaLaunchKernel_ptsz_v7000", (LAUNCH, 4)), (D, "cuPointerGetAttributes", (QUERY, -1)),
    (R, "cudaGetDeviceCount_v3020", (QUERY, -1)), (D, "cuStreamGetCtx_ptsz", (QUERY, -1))])
def test_kind_of_covers_variants_by_prefix_and_suffix(domain, raw, expected):
    assert kind_of(domain, raw) == expected


# ---------------------------------------------------------------- queries


def test_identical_successful_queries_fold_into_the_first_counted_by_call_and_thread(untailed):
    got = run(*[query()] * 5, *[query(cbid=9, a=0)] * 3, *[query(tid=2)] * 2)
    assert got.kept.tolist() == [0, 5, 8] and got.repeats == {}
    assert got.by_call == {"cuCtxGetCurrent": 5, "cudaGetDevice": 2}  # the runtime's public name
    assert got.by_thread == {1: 6, 2: 1} and got.total == 7


@pytest.mark.parametrize("change", [{"status": 201}, {"stack": 3}, {"blob": 1},
                                    {"flags": native.NESTED_IN_RUNTIME}, {"flags": native.NO_EXIT},
                                    {"flags": native.BLOB_DROPPED}])
def test_a_query_that_failed_or_kept_a_stack_bytes_or_a_flag_is_kept(untailed, change):
    assert kept(query(), query(**change), query(**change)) == [0, 1, 2]


@pytest.mark.parametrize("change", [{"tid": 2}, {"context": CTX2}, {"context_uid": 8}, {"a": 1}, {"b": 1},
                                    {"c": 1}, {"d": 1}, {"e": 1}, {"cbid": 2}])
def test_a_query_differing_in_any_identity_field_is_kept_and_folds_only_with_its_own(untailed, change):
    got = run(query(), query(**change), query(), query(**change))
    assert got.kept.tolist() == [0, 1] and got.total == 2


@pytest.mark.parametrize("cbid", [3, 4, 10])
def test_stream_and_event_queries_are_never_folded(untailed, cbid):
    assert kept(*[{"cbid": cbid, "a": 0x5000}] * 4) == [0, 1, 2, 3]


def test_a_query_after_a_failing_one_is_still_kept_once(untailed):
    assert kept(query(status=201), query(), query()) == [0, 1]


# ---------------------------------------------------------------- launches


def test_a_run_of_identical_launches_keeps_its_last_with_how_many_it_stands_for(untailed):
    got = run(*[launch()] * 5)
    assert got.kept.tolist() == [4] and got.repeats == {4: 4} and got.by_call == {"cuLaunchKernel": 4}


def test_folded_queries_between_launches_do_not_break_the_run(untailed):
    got = run(query(), launch(), query(), launch(), query(), launch())
    assert got.kept.tolist() == [0, 5] and got.repeats == {5: 2}
    assert got.by_call == {"cuCtxGetCurrent": 2, "cuLaunchKernel": 2} and got.by_thread == {1: 4}


@pytest.mark.parametrize("between", [free(), query(a=0x77), {"cbid": 3, "a": 5}, launch(status=700),
                                     launch(flags=native.NO_EXIT), launch(flags=native.BLOB_DROPPED),
                                     launch(tid=2, flags=native.NO_EXIT), {"cbid": 1, "domain": RES}])
def test_anything_kept_between_two_identical_launches_breaks_the_run(untailed, between):
    got = run(launch(), between, launch())
    assert got.kept.tolist() == [0, 1, 2] and got.repeats == {} and got.total == 0


def test_a_failing_launch_is_kept_and_ends_the_run_before_it(untailed):
    got = run(launch(), launch(), launch(status=700), launch(status=700))
    assert got.kept.tolist() == [1, 2, 3] and got.repeats == {1: 1}


def test_launches_beneath_the_runtime_still_fold(untailed):
    nested = launch(flags=native.NESTED_IN_RUNTIME)
    got = run(nested, rt_launch(), nested, rt_launch(), nested, rt_launch())
    assert got.kept.tolist() == [4, 5] and got.repeats == {4: 2, 5: 2}
    assert got.by_call == {"cuLaunchKernel": 2, "cudaLaunchKernel": 2}
    assert kept(launch(), nested) == [0, 1]  # the flag is part of what makes two launches identical


def test_launches_with_other_argument_bytes_are_not_folded_together(untailed):
    asked = []

    def blobs(at, length):
        asked.append((at, length))
        return BLOBS[at][:length]

    got = fold(rows(launch(blob=1), launch(blob=2), launch(blob=3), launch()), name_of, blobs)
    assert got.kept.tolist() == [1, 2, 3] and got.repeats == {2: 1}  # 1 and 3 hold the same bytes
    assert sorted(asked) == [(1, 16), (2, 16), (3, 16)]
    assert kept(launch(blob=1), launch(blob=1, blob_len=8)) == [0, 1]  # fewer bytes: other arguments


@pytest.mark.parametrize("change", [{"kernel": 0xB}, {"stream": 7}, {"stack": 4}, {"tid": 2}, {"context": CTX2},
                                    {"context_uid": 8}, {"c": 0x200000001}, {"d": 9}, {"e": 9}])
def test_launches_differing_in_identity_or_stack_each_keep_their_last(untailed, change):
    got = run(launch(), launch(**change), launch(), launch(**change))
    assert got.kept.tolist() == [2, 3] and got.repeats == {2: 1, 3: 1}


def test_launches_with_the_same_stack_fold(untailed):
    assert run(launch(stack=4), launch(stack=4)).repeats == {1: 1}


def test_interleaved_pairs_fold_into_the_last_of_each(untailed):
    a, b = launch(kernel=0xA), launch(kernel=0xB, stream=7)
    got = run(a, b, a, b, a, b)
    assert got.kept.tolist() == [4, 5] and got.repeats == {4: 2, 5: 2}


# ---------------------------------------------------------------- streams that synchronise implicitly


@pytest.mark.parametrize("special", [0, 1, 2])
def test_launches_on_one_special_stream_fold_among_themselves(untailed, special):
    a, b = launch(kernel=0xA, stream=special), launch(kernel=0xB, stream=special)
    got = run(a, b, a, b)
    assert got.kept.tolist() == [2, 3] and got.repeats == {2: 1, 3: 1}


@pytest.mark.parametrize("special", [0, 1, 2])
@pytest.mark.parametrize("other", [{"stream": 5}, {"context": CTX2}, "another special"])
def test_a_run_ends_where_a_special_stream_launch_meets_another_stream(untailed, special, other):
    if other == "another special":
        other = {"stream": (special + 1) % 3}
    here = launch(kernel=0xA, stream=special)
    there = launch(kernel=0xB, **{"stream": special, **other})
    assert kept(here, there, here) == [0, 1, 2]  # a special launch followed by one elsewhere, and back
    assert kept(there, here, there) == [0, 1, 2]


def test_launches_on_ordinary_streams_and_contexts_share_a_run(untailed):
    assert run(launch(stream=5), launch(kernel=0xB, stream=7), launch(stream=5)).repeats == {2: 1}
    assert run(launch(), launch(context=CTX2), launch()).repeats == {2: 1}


def test_a_runtime_launch_is_on_the_stream_of_its_last_kept_parameter(untailed):
    # its first parameter (the grid) is no stream: a launch on the NULL stream between two on stream 5
    assert kept(launch(), rt_launch(stream=0), launch()) == [0, 1, 2]
    assert kept(rt_launch(stream=0, grid=0), launch(stream=0), rt_launch(stream=0, grid=0)) == [1, 2]
    assert kept(launch(stream=0), rt_launch(stream=5, grid=0), launch(stream=0)) == [0, 1, 2]


def test_the_per_thread_null_stream_and_the_legacy_one_are_different_streams(untailed):
    per_thread = {**launch(kernel=0xA, stream=0), "cbid": 7}  # cuLaunchKernel_ptsz on handle 0
    legacy = launch(kernel=0xB, stream=0)  # cuLaunchKernel on handle 0
    assert kept(launch(stream=5), legacy, launch(stream=5)) == [0, 1, 2]  # a blocking stream: the run ends
    assert kept(per_thread, legacy, per_thread) == [0, 1, 2]  # the per-thread stream is blocking too


def test_the_per_thread_streams_of_two_threads_are_two_streams(untailed):
    mine, theirs = launch(kernel=0xA, stream=2), launch(kernel=0xB, stream=2, tid=2)
    assert kept(mine, theirs, mine) == [0, 1, 2]
    assert kept(mine, launch(kernel=0xB, stream=2), mine) == [1, 2]  # one thread's own stream: the run goes on


def test_an_event_noted_apart_between_two_identical_launches_breaks_the_run(untailed):
    """A library allocator's free the child noted (not a record) at 15, between the launches at 10 and 20."""
    specs = (launch(), launch(), launch())
    assert run(*specs).kept.tolist() == [2]
    assert run(*specs, breaks=np.array([15], dtype=np.uint64)).kept.tolist() == [1, 2]
    assert run(*specs, breaks=np.array([0, 25], dtype=np.uint64)).kept.tolist() == [2]  # none between


# ---------------------------------------------------------------- each thread's tail


def test_the_last_tail_records_of_each_thread_are_never_folded():
    tail = fold_module.TAIL
    loop = [r for _ in range(100) for r in (query(), launch())]
    got = run(*loop)
    assert got.kept.tolist() == [0, *range(200 - tail - 1, 200)]  # launch 199 - tail stands for the rest
    assert got.repeats == {200 - tail - 1: 99 - tail // 2} and got.total == 200 - tail - 2
    # two threads interleaved; thread 2 ends early: each keeps its own last records
    specs = [query(tid=2) if i % 3 == 0 and i < 240 else query(tid=1) for i in range(300)]
    got = run(*specs)
    by_tid = {t: [i for i, s in enumerate(specs) if s["tid"] == t] for t in (1, 2)}
    want = sorted(by_tid[1][:1] + by_tid[1][-tail:] + by_tid[2][:1] + by_tid[2][-tail:])
    assert got.kept.tolist() == want
    assert got.by_thread == {1: len(by_tid[1]) - tail - 1, 2: len(by_tid[2]) - tail - 1}


def test_as_dict_is_empty_when_nothing_folded_and_counts_otherwise(untailed):
    assert run().as_dict() == {} and run().kept.tolist() == []
    assert run(query(), launch(), free()).as_dict() == {}
    got = run(*[query()] * 4, *[launch()] * 3).as_dict()
    assert got == {"calls": 5, "by_call": {"cuCtxGetCurrent": 3, "cuLaunchKernel": 2}, "tail_kept": 0}
    assert list(got["by_call"]) == ["cuCtxGetCurrent", "cuLaunchKernel"]  # most folded first
    assert list(run(*[query()] * 2, *[launch()] * 4).as_dict()["by_call"]) == ["cuLaunchKernel", "cuCtxGetCurrent"]


# ---------------------------------------------------------------- chunks, and the rules in plain Python


def reference(records, tail):
    """The module docstring's rules, one record at a time: (kept, repeats, by_call, by_thread)."""
    rs = [dict(zip(DTYPE.names, row, strict=True)) for row in records.tolist()]
    total, seen_of = Counter(r["tid"] for r in rs), Counter()
    in_tail = []
    for r in rs:
        seen_of[r["tid"]] += 1
        in_tail.append(seen_of[r["tid"]] > total[r["tid"]] - tail)
    kind = [TABLE[r["cbid"]][3] if r["domain"] != RES else KEEP for r in rs]
    ok = [r["status"] == 0 and not in_tail[i] for i, r in enumerate(rs)]
    seen, folded = set(), set()
    for i, r in enumerate(rs):
        if kind[i] == QUERY and ok[i] and not (r["stack"] or r["blob"] or r["flags"]):
            ident = tuple(r[f] for f in IDENTITY)
            if ident in seen:
                folded.add(i)
            seen.add(ident)
    live = [i for i in range(len(rs)) if i not in folded]
    runs: list[list[int]] = []
    previous = None
    for i in live:
        r = rs[i]
        if not (kind[i] == LAUNCH and ok[i] and not r["flags"] & ~native.NESTED_IN_RUNTIME):
            previous = None
            continue
        stream = (r[TABLE[r["cbid"]][4]], r["context"])
        if previous is None or (stream != previous and (stream[0] <= 2 or previous[0] <= 2)):
            runs.append([])
        runs[-1].append(i)
        previous = stream
    repeats, dropped = {}, []
    for one in runs:
        groups: dict[tuple, list[int]] = {}
        for i in one:
            r = rs[i]
            blob = blob_of(r["blob"], r["blob_len"]) if r["blob"] else None
            groups.setdefault((*(r[f] for f in IDENTITY), r["stack"], r["flags"], blob), []).append(i)
        for members in groups.values():
            dropped += members[:-1]
            if len(members) > 1:
                repeats[members[-1]] = len(members) - 1
    gone = sorted(folded | set(dropped))
    by_call = Counter(TABLE[rs[i]["cbid"]][2] for i in gone)
    return sorted(set(live) - set(dropped)), repeats, dict(by_call), dict(Counter(rs[i]["tid"] for i in gone))


def outcome(got):
    return got.kept.tolist(), got.repeats, got.by_call, got.by_thread


record = st.fixed_dictionaries({
    "make": st.sampled_from(["query", "query", "query2", "launch", "launch", "launch", "rt_launch", "free",
                             "stream_query", "resource"]),
    "kernel": st.sampled_from([0xA, 0xB]), "stream": st.sampled_from([0, 0, 1, 2, 5, 5, 7]),
    "tid": st.sampled_from([1, 1, 2]), "context": st.sampled_from([CTX, CTX, CTX2]),
    "status": st.sampled_from([0] * 6 + [201]), "flags": st.sampled_from([0] * 6 + [1, 2, 4]),
    "stack": st.sampled_from([0] * 6 + [3]), "blob": st.sampled_from([0, 0, 0, 1, 2, 3]),
})


def make(r):
    common = {k: r[k] for k in ("tid", "context", "status", "flags", "stack")}
    kind = r["make"]
    if kind.startswith("query"):
        return query(cbid=1 if kind == "query" else 9, **common, **({"blob": r["blob"]} if r["blob"] == 2 else {}))
    if kind == "launch":
        return launch(kernel=r["kernel"], stream=r["stream"], blob=r["blob"], **common)
    if kind == "rt_launch":
        return rt_launch(stream=r["stream"], **common)
    if kind == "resource":
        return {"cbid": 1, "domain": RES, "tid": r["tid"], "context": r["context"]}
    return {"cbid": 6 if kind == "free" else 3, "a": r["stream"], **common}


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=60), st.sampled_from([0, 3]), st.sampled_from([1, 7, 16]))
def test_folding_follows_its_rules_whatever_the_sequence_and_chunk(specs, tail, chunk):
    records = rows(*(make(r) for r in specs))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fold_module, "TAIL", tail)
        whole = fold(records, name_of, blob_of)
        mp.setattr(fold_module, "CHUNK", chunk)
        done = []
        chunked = fold(records, name_of, blob_of, done.append)
    assert outcome(chunked) == outcome(whole) == reference(records, tail)
    assert done == 2 * [min(lo + chunk, len(records)) for lo in range(0, len(records), chunk)]  # two passes
    kept_list = whole.kept.tolist()
    assert kept_list == sorted(set(kept_list)) and whole.kept.dtype.kind == "i"
    assert len(kept_list) + whole.total == len(records)
    rs = [dict(zip(DTYPE.names, row, strict=True)) for row in records.tolist()]
    kept_set = set(kept_list)
    launches = 0
    for i in set(range(len(rs))) - kept_set:
        r = rs[i]
        assert r["domain"] != RES
        if TABLE[r["cbid"]][3] == QUERY:
            assert any(j < i and all(rs[j][f] == r[f] for f in IDENTITY) and not rs[j]["status"]
                       and not (rs[j]["stack"] or rs[j]["blob"] or rs[j]["flags"]) for j in kept_set), (i, r)
        else:
            assert TABLE[r["cbid"]][3] == LAUNCH and r["status"] == 0
            launches += 1
    assert sum(whole.repeats.values()) == launches and set(whole.repeats) <= kept_set
    for tid in {r["tid"] for r in rs}:  # each thread's last records are all kept
        mine = [i for i, r in enumerate(rs) if r["tid"] == tid]
        assert set(mine[max(0, len(mine) - tail):]) <= kept_set


def test_a_small_chunk_gives_what_one_chunk_gives_and_tells_what_was_read(untailed, monkeypatch):
    specs = [query(), launch(), query(), launch(blob=1), launch(blob=3), free(), *[query(tid=2)] * 5,
             launch(stream=0), launch(stream=0), launch(), query(cbid=9, a=0), query(cbid=9, a=0), launch()] * 3
    whole = run(*specs)
    monkeypatch.setattr(fold_module, "CHUNK", 7)
    done = []
    chunked = run(*specs, done=done.append)
    assert outcome(chunked) == outcome(whole) and whole.total > 20
    assert done == 2 * [*range(7, len(specs), 7), len(specs)]  # each of the two passes, a chunk at a time


# ---------------------------------------------------------------- a recording the C callback wrote

HAS_CC = bool(os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc"))
# callback ids of this file's own, named in names.json as the reader reads them; a CuPy-like launch loop
CALLS = {3001: "cuCtxGetCurrent", 3002: "cuCtxGetDevice", 3003: "cuStreamGetCtx", 3004: "cuFuncGetAttribute",
         3005: "cuLaunchKernel", 3006: "cuStreamSynchronize"}
LOOP = (3001, 3002, 3003, 3004, 3001, 3002, 3005)
ROUNDS = 300  # launches, kernels A and B in turn on stream 0x5000; a stream synchronisation every 100


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """The loop's records, written by the C callback into a flight recording: (folder, calls written)."""
    from tests.fake_cupti import Call, open_recording

    if not HAS_CC:
        pytest.skip("no C compiler here: ctxlab's CUPTI callback is built from C")
    folder = str(tmp_path_factory.mktemp("flight"))
    lib, _files = open_recording(folder, {"driver": {str(cbid): name for cbid, name in CALLS.items()}}, 1 << 13)
    lib.ctxlab_set_field(D, 3005, native.ENTER, 0, 0, 0, 8)  # cuLaunchKernel's function (a) and stream (b)
    lib.ctxlab_set_field(D, 3005, native.ENTER, 40, 0, 0, 8)
    params = {cbid: b"\0" * 64 for cbid in CALLS}
    kernels = [(0xA0 + k).to_bytes(8, "little") + b"\0" * 32 + (0x5000).to_bytes(8, "little") + b"\0" * 16
               for k in range(2)]
    count = 0
    lib.ctxlab_set_active(1)
    try:
        for i in range(ROUNDS):
            for cbid in LOOP + ((3006,) if i % 100 == 99 else ()):
                count += 1
                c = Call(count, params=kernels[i % 2] if cbid == 3005 else params[cbid])
                lib.ctxlab_callback(None, D, cbid, ctypes.byref(c.enter))
                lib.ctxlab_callback(None, D, cbid, ctypes.byref(c.exit))
    finally:
        lib.ctxlab_set_active(0)
        lib.ctxlab_flight_close()
        lib.ctxlab_reset()
    return folder, count


def test_a_recorded_launch_loop_is_read_folded_into_few_events(recording):
    from ctxlab.tracing.flight import read_flight
    from ctxlab.tracing.recorder import FlightFiles

    folder, count = recording
    assert count == ROUNDS * len(LOOP) + ROUNDS // 100
    whole = read_flight(FlightFiles(folder), fold_records=False)
    assert len(whole.events) == count and whole.folded == {} and "folded" not in whole.counts
    got = read_flight(FlightFiles(folder), fold_records=True)
    calls = [e for e in got.events if e["domain"] in ("driver", "runtime")]
    assert len(got.events) < count // 10 and got.counts["records"] == count
    assert got.folded["calls"] + len(calls) == count == got.counts["folded"] + len(calls)
    assert got.folded["tail_kept"] == fold_module.TAIL and got.folded_by_thread == {
        calls[0]["tid"]: got.folded["calls"]}
    by_correlation = {e["correlation"]: e for e in whole.events}  # each kept event is the one recorded
    for e in calls:
        assert {**e, "thread": 0} == {**by_correlation[e["correlation"]], "thread": 0, **(
            {"repeats": e["repeats"]} if "repeats" in e else {})}
    launches = [e for e in calls if e["name"] == "cuLaunchKernel"]
    assert sum(1 + e.get("repeats", 0) for e in launches) == ROUNDS
    assert got.folded["by_call"]["cuLaunchKernel"] == sum(e.get("repeats", 0) for e in launches)
    # the first hundred launches, A and B in turn, end at a synchronisation: the last A and B stand for them
    first = [e for e in launches if e["correlation"] <= 100 * len(LOOP)]
    assert [(e["args"]["function"], e["args"]["stream"], e["repeats"]) for e in first] == [
        (0xA0, 0x5000, 49), (0xA1, 0x5000, 49)]
    assert {e["name"] for e in calls[:4]} == {CALLS[c] for c in LOOP[:4]}  # the first query of each kind


def test_the_audit_of_a_folded_recording_counts_every_call_written(recording):
    from ctxlab.audit.run import judge_run
    from ctxlab.tracing.flight import read_flight
    from ctxlab.tracing.recorder import FlightFiles
    from ctxlab.tracing.supervise import Ending, Supervised

    folder, count = recording
    flight = read_flight(FlightFiles(folder), fold_records=True)
    result = judge_run("loop", Supervised(ending=Ending("exit", 0), flight=flight, result={}, notes=[]), [])
    assert result.stats["api_calls"] == count and result.stats["folded"]["calls"] > 0
    assert result.stats["folded"] == flight.folded and result.stats["launch_records"]["driver"] == ROUNDS
    assert sum(t["calls"] for t in result.threads) == count


def test_trace_reads_a_recording_whole_up_to_its_bound_and_folded_past_it(recording, monkeypatch):
    """``auto`` (how ``ctxlab trace`` reads): every call of a recording of up to AUTO_RECORDS records, the fold
    past that bound."""
    from ctxlab.tracing import flight
    from ctxlab.tracing.recorder import FlightFiles

    folder, count = recording
    monkeypatch.setattr(flight, "AUTO_RECORDS", count)
    assert len(flight.read_flight(FlightFiles(folder), fold_records="auto").events) == count
    monkeypatch.setattr(flight, "AUTO_RECORDS", count - 1)
    got = flight.read_flight(FlightFiles(folder), fold_records="auto")
    assert len(got.events) < count and got.folded["calls"] + len(got.events) == count
