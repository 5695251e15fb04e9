"""Which records of a long flight recording judging needs, and counts of the rest (folding).

A training loop repeats itself: each CuPy launch makes six driver queries beside the launch, each the same
as the last time. The audit judges the first query of each kind and the last launch of each run, and counts
the others; nothing a rule reads is in them:

- a **query** (``PURE_QUERIES``: it reads state, changes none, orders nothing) that returned success, kept no
  stack, no bytes and no flag, and is identical (thread, function, context, every kept parameter) to one
  kept before it, is folded: its first occurrence stands for it. Failing queries are always kept, and so is
  ``cuStreamQuery``/``cuEventQuery`` (a success is a host synchronisation).
- a **launch** (``names.KERNEL_LAUNCHES``) that returned success, identical (thread, function, context, kept parameters,
  kernel arguments' bytes, stack) to a later launch in a run of launches with nothing else kept between them,
  is folded into the last one of the run. Between two such launches nothing was allocated, freed, recorded,
  waited for or synchronised, so the later one touches the same memory on the same stream with the same
  ordering, and is the one every later operation is measured against. A launch on the NULL, legacy or
  per-thread stream synchronises implicitly with other streams' work, so a run ends where such a launch
  follows one on another stream (or context), or is followed by one. Events recorded apart from the records
  (a library allocator's allocations and frees, which the child notes) end a run where they fall.
- the last ``TAIL`` records of every thread are kept whole, for the crash and hang reports.

The kept launch says how many it stands for (``repeats``); the counts go by call and by thread.
Everything is worked out over numpy columns, a chunk of records at a time, so a recording of tens of millions
of records is read in memory bounded by a chunk and by what is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxlab.tracing import native
from ctxlab.tracing.fields import named_args
from ctxlab.tracing.names import KERNEL_LAUNCHES, api_name

TAIL = 64
# ``ctxlab trace`` shows every call of a recording up to this many records, and folds a longer one (``auto``)
AUTO_RECORDS = 1_000_000
CHUNK = 1 << 18  # records a pass reads at a time (27 MiB of them): bounds the columns made from them
# Calls that read state and change none (public names; prefixes cover _v2 forms). Their successes order
# nothing: cuStreamQuery and cuEventQuery are not here.
PURE_QUERIES = (
    "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuCtxGetFlags", "cuCtxGetApiVersion", "cuCtxGetLimit",
    "cuCtxGetCacheConfig", "cuCtxGetStreamPriorityRange", "cuStreamGetCtx", "cuStreamGetFlags",
    "cuStreamGetPriority", "cuStreamGetId", "cuFuncGetAttribute", "cuFuncGetParamInfo", "cuPointerGetAttribute",
    "cuDeviceGet", "cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString", "cuDevicePrimaryCtxGetState",
    "cudaGetDevice", "cudaGetDeviceCount", "cudaDeviceGetAttribute", "cudaPointerGetAttributes",
    "cudaStreamGetFlags", "cudaStreamGetPriority", "cudaFuncGetAttributes", "cudaDriverGetVersion",
    "cudaRuntimeGetVersion", "cudaGetLastError", "cudaPeekAtLastError",
)
KEEP, QUERY, LAUNCH = 0, 1, 2
_SPECIAL_STREAMS = 2  # 0 the NULL stream, 1 the legacy stream, 2 the per-thread stream: implicit order
_NOT_FLAGS = ~native.NESTED_IN_RUNTIME & 0xFFFF  # a launch made beneath the runtime's may still fold
_IDENTITY = ("tid", "domain", "cbid", "context", "context_uid", "a", "b", "c", "d", "e")


@dataclass
class Folded:
    """The records to keep (their indices, ascending), what each kept launch stands for, and the counts."""

    kept: Any  # numpy int64 array
    repeats: dict[int, int] = field(default_factory=dict)  # kept index -> identical launches folded into it
    by_call: dict[str, int] = field(default_factory=dict)
    by_thread: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """How many records were folded."""
        return sum(self.by_call.values())

    def as_dict(self) -> dict:
        """What a report says of the folding (empty when nothing was folded)."""
        if not self.total:
            return {}
        return {"calls": self.total, "by_call": dict(sorted(self.by_call.items(), key=lambda kv: -kv[1])),
                "tail_kept": TAIL}


def kind_of(domain: int, raw: str) -> tuple[int, int]:
    """(KEEP, QUERY or LAUNCH; the index of a launch's stream among a..e, or -1) for a function's raw name."""
    if domain not in (native.DOMAIN_DRIVER, native.DOMAIN_RUNTIME):
        return KEEP, -1
    runtime = domain == native.DOMAIN_RUNTIME
    name = api_name("runtime" if runtime else "driver", raw)
    if name.startswith(PURE_QUERIES):
        return QUERY, -1
    if name in KERNEL_LAUNCHES or name.removesuffix("_ptsz") in KERNEL_LAUNCHES:
        order = list(named_args(raw, (0, 1, 2, 3, 4), runtime=runtime))
        return (LAUNCH, order.index("stream")) if "stream" in order else (KEEP, -1)
    return KEEP, -1


def _mix(columns: list) -> Any:
    """A 64-bit hash of each row of equal-length uint64 columns (splitmix64 steps)."""
    import numpy as np

    h = np.full(len(columns[0]), 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in columns:
            h ^= col.astype(np.uint64, copy=False)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(29)
    return h


def fold(records, name_of: Callable[[int, int], str], blob_of: Callable[[int, int], bytes],
         done: Callable[[int], None] | None = None, breaks=None) -> Folded:
    """The records of a recording (numpy array of ``native.RECORD_DTYPE``) to keep. ``name_of(domain, cbid)``
    gives a function's raw name, ``blob_of(at, length)`` a record's kept bytes; ``done(i)`` is told when the
    records before ``i`` have been read, in each of the two passes (the caller may release their pages).
    ``breaks``: the sorted times (records' clock) of events recorded apart from the records, such as a library
    allocator's frees the child noted: a run of launches ends at each of them."""
    import numpy as np

    n = len(records)
    totals: dict[int, int] = {}
    for lo in range(0, n, CHUNK):
        tids, counts = np.unique(records["tid"][lo:lo + CHUNK], return_counts=True)
        for tid, count in zip(tids.tolist(), counts.tolist(), strict=True):
            totals[tid] = totals.get(tid, 0) + count
        if done is not None:
            done(min(n, lo + CHUNK))
    kinds: dict[int, tuple[int, int, bool]] = {}  # domain << 32 | cbid -> (kind, stream's index, per-thread)
    seen: set[int] = set()
    base = dict.fromkeys(totals, 0)
    out = Folded(kept=None)
    kept_parts: list = []
    launch_parts: list = []
    sig_parts: list = []
    stream_parts: list = []  # (stream, context) of each kept record, hashed
    special_parts: list = []  # its stream synchronises implicitly
    start_parts: list = []
    key_parts: list = []  # domain << 32 | cbid of each kept record
    tid_parts: list = []
    for lo in range(0, n, CHUNK):
        chunk = records[lo:lo + CHUNK]
        m = len(chunk)
        key = (chunk["domain"].astype(np.uint64) << np.uint64(32)) | chunk["cbid"].astype(np.uint64)
        keys, inverse = np.unique(key, return_inverse=True)
        table = []
        for k in keys.tolist():
            if k not in kinds:
                domain, cbid = k >> 32, k & 0xFFFFFFFF
                if domain == native.DOMAIN_RESOURCE:  # a resource record's name is never asked for
                    kinds[k] = (KEEP, -1, False)
                else:  # a _ptsz/_ptds launch's NULL stream is its thread's own, not the legacy stream
                    raw = name_of(domain, cbid)
                    kinds[k] = (*kind_of(domain, raw), _per_thread(raw))
            table.append(kinds[k])
        kind = np.array([t[0] for t in table], dtype=np.int8)[inverse]
        per_thread = np.array([t[2] for t in table], dtype=bool)[inverse]
        stream_at = np.array([t[1] for t in table], dtype=np.int8)[inverse]
        tail = _tail(chunk["tid"], base, totals)
        ok = (chunk["status"] == 0) & ~tail
        identity = _mix([chunk[f] for f in _IDENTITY])
        # queries: the first of each identity stays
        query = (kind == QUERY) & ok & (chunk["stack"] == 0) & (chunk["blob"] == 0) & (chunk["flags"] == 0)
        folded = np.zeros(m, dtype=bool)
        where = np.flatnonzero(query)
        if len(where):
            sigs, first = np.unique(identity[where], return_index=True)
            keep_first = np.zeros(len(where), dtype=bool)
            for i, sig in enumerate(sigs.tolist()):
                if sig not in seen:
                    seen.add(sig)
                    keep_first[first[i]] = True
            folded[where[~keep_first]] = True
            _count(out, key[folded], chunk["tid"][folded], name_of)
        # launches on a stream of their own: candidates for the runs folded below
        streams = np.zeros(m, dtype=np.uint64)
        for at, letter in enumerate("abcde"):
            pick = stream_at == at
            streams[pick] = chunk[letter][pick]
        launch = (kind == LAUNCH) & ok & ((chunk["flags"] & _NOT_FLAGS) == 0) & ~folded
        blobs = np.zeros(m, dtype=np.uint64)
        for i in np.flatnonzero(launch & (chunk["blob"] != 0)).tolist():
            blobs[i] = hash(blob_of(int(chunk["blob"][i]), int(chunk["blob_len"][i]))) & 0xFFFFFFFFFFFFFFFF
        signature = _mix([identity, chunk["stack"], chunk["flags"], blobs])
        kept_here = np.flatnonzero(~folded)
        kept_parts.append(kept_here + lo)
        launch_parts.append(launch[kept_here])
        key_parts.append(key[kept_here])
        tid_parts.append(chunk["tid"][kept_here])
        sig_parts.append(signature[kept_here])
        own = per_thread | (streams == 2)  # a thread's own stream: the thread is part of its name
        stream_parts.append(_mix([streams[kept_here], chunk["context"][kept_here], per_thread[kept_here],
                                  np.where(own, chunk["tid"], 0)[kept_here]]))
        start_parts.append(chunk["start"][kept_here])
        special_parts.append(streams[kept_here] <= _SPECIAL_STREAMS)
        if done is not None:
            done(lo + m)
    if not kept_parts:
        out.kept = np.zeros(0, dtype=np.int64)
        return out
    kept = np.concatenate(kept_parts)
    is_launch = np.concatenate(launch_parts)
    drop = _fold_runs(out, kept, is_launch, np.concatenate(sig_parts),
                      _runs(is_launch, np.concatenate(stream_parts), np.concatenate(special_parts),
                            np.concatenate(start_parts), breaks))
    _count(out, np.concatenate(key_parts)[drop], np.concatenate(tid_parts)[drop], name_of)
    out.kept = kept[~drop]
    return out


def _per_thread(raw: str) -> bool:
    """A function whose NULL stream is the calling thread's per-thread stream (``_ptsz``, ``_ptds`` forms)."""
    return "_ptsz" in raw or "_ptds" in raw


def _runs(is_launch, stream, special, starts, breaks):
    """A run number for each kept record: launches with nothing else between them share one, unless a launch on
    a stream that synchronises implicitly meets one on another stream (or context) beside it, or an event
    recorded apart (``breaks``) falls between two of them."""
    import numpy as np

    start = ~is_launch
    if breaks is not None and len(breaks) and len(is_launch) > 1:  # an event recorded apart between two
        before = np.searchsorted(breaks, starts, side="right")
        start[1:] |= before[1:] != before[:-1]
    if len(is_launch) > 1:
        changed = (stream[1:] != stream[:-1]) & (special[1:] | special[:-1])
        start[1:] |= is_launch[1:] & is_launch[:-1] & changed
    return np.cumsum(start)


def _tail(tids, base: dict[int, int], totals: dict[int, int]):
    """Which rows of a chunk are among the last TAIL records of their thread (``base``: each thread's rows in
    the chunks before, moved on past this one)."""
    import numpy as np

    threads, inverse, counts = np.unique(tids, return_inverse=True, return_counts=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    rank = np.empty(len(tids), dtype=np.int64)
    rank[order] = np.arange(len(tids)) - np.repeat(starts, counts)
    before = np.array([base[t] for t in threads.tolist()], dtype=np.int64)
    last = np.array([totals[t] - TAIL for t in threads.tolist()], dtype=np.int64)
    for t, c in zip(threads.tolist(), counts.tolist(), strict=True):
        base[t] += c
    return (before[inverse] + rank) >= last[inverse]


def _count(out: Folded, keys, tids, name_of: Callable[[int, int], str]) -> None:
    """Add folded records (their ``domain << 32 | cbid`` keys and threads) to the counts by call and thread."""
    import numpy as np

    if not len(keys):
        return
    for k, c in zip(*(a.tolist() for a in np.unique(keys, return_counts=True)), strict=True):
        domain = k >> 32
        name = api_name("runtime" if domain == native.DOMAIN_RUNTIME else "driver", name_of(domain, k & 0xFFFFFFFF))
        out.by_call[name] = out.by_call.get(name, 0) + c
    for t, c in zip(*(a.tolist() for a in np.unique(tids, return_counts=True)), strict=True):
        out.by_thread[t] = out.by_thread.get(t, 0) + c


def _fold_runs(out: Folded, kept, is_launch, signature, run) -> Any:
    """Among the kept records, each run of launches (``run``: its number): the last of each signature stays,
    standing for the others (``out.repeats``). Which of the kept records are dropped."""
    import numpy as np

    drop = np.zeros(len(kept), dtype=bool)
    if not is_launch.any():
        return drop
    where = np.flatnonzero(is_launch)
    key = _mix([signature[where], run[where].astype(np.uint64)])
    _keys, last_from_end, counts = np.unique(key[::-1], return_index=True, return_counts=True)
    last = len(where) - 1 - last_from_end
    stays = np.zeros(len(where), dtype=bool)
    stays[last] = True
    drop[where[~stays]] = True
    for i, c in zip(where[last].tolist(), counts.tolist(), strict=True):
        if c > 1:
            out.repeats[int(kept[i])] = c - 1
    return drop
