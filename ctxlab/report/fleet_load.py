"""Reading a fleet's result files for ``report merge``: fast, and bounded in memory.

Each file is read and validated in full, as ``ctxlab show`` reads it (``ctxlab.records.files.load_runs``),
and each checked run made straight into what a merge shows (``lean_from_dict``, no full record first): the
environment, each claim's id, kind and verdict (the evidence only for ``observed`` claims, whose outcome the
fleet view compares), whether the lab broke, its flags, and a node's environment error. Observations, traces,
statements and sources are dropped, and repeated strings are shared, so a thousand files of half a megabyte
each take tens of megabytes, not gigabytes. Python's cycle collector is off while they are read (they hold no
cycles). With many files, child processes read them side by side (``jobs``, default: CTXLAB_MERGE_JOBS or the
cores, at most 8); the first file that cannot be read, in the order given, is the one refused.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ctxlab.defaults import DEFAULT_MAX_BYTES
from ctxlab.records.model import ClaimResult, LabResult

PARALLEL_FROM = 48  # fewer files are read in this process: starting children costs more than it saves
MAX_JOBS = 8


def lean(run: LabResult, shared: dict[str, str] | None = None) -> LabResult:
    """The run as a merge needs it: no observations, trace, statements or sources; strings shared."""
    pool = shared if shared is not None else {}

    def keep(text: str) -> str:
        return pool.setdefault(text, text)

    claims = tuple(ClaimResult(id=keep(c.id), statement="", source="", verdict=keep(c.verdict),
                               evidence=c.evidence if c.verdict == "observed" else "", kind=keep(c.kind))
                   for c in run.claims)
    errors = tuple({"scenario": str(e.get("scenario", "")), "kind": str(e.get("kind", "")),
                    "message": str(e.get("message", ""))[:500]} for e in run.errors)
    env = {keep(str(k)): keep(v) if isinstance(v, str) else v for k, v in run.environment.items()}
    return LabResult(lab=keep(run.lab), started=run.started, seconds=run.seconds, environment=env,
                     options={k: v for k, v in run.options.items() if k in ("device", "devices")},
                     observations=(), claims=claims, errors=errors, flags=tuple(run.flags),
                     environment_error=dict(run.environment_error))


def lean_from_dict(data: dict, shared: dict[str, str]) -> LabResult:
    """``lean(LabResult.from_dict(data), shared)`` for a run object the shape rules and the schema passed,
    without first making the records a merge drops (a file's hundreds of observations, each claim's
    statement and source). What it skips cannot raise on such an object: its observations, trace, metrics,
    timings, views and isolation are checked lists and objects, each claim's fields strings."""
    keep = shared.setdefault
    claims = []
    for c in data["claims"]:
        verdict = c["verdict"]
        claims.append(ClaimResult(id=keep(c["id"], c["id"]), statement="", source="", verdict=keep(verdict, verdict),
                                  evidence=c["evidence"] if verdict == "observed" else "",
                                  kind=keep(kind := c.get("kind", "observation"), kind)))
    errors = tuple({"scenario": str(e.get("scenario", "")), "kind": str(e.get("kind", "")),
                    "message": str(e.get("message", ""))[:500]} for e in data.get("errors", ()))
    env = {keep(key := str(k), key): keep(v, v) if isinstance(v, str) else v for k, v in data["environment"].items()}
    options = dict(data.get("options", {}))
    return LabResult(lab=keep(data["lab"], data["lab"]), started=data["started"], seconds=float(data["seconds"]),
                     environment=env, options={k: v for k, v in options.items() if k in ("device", "devices")},
                     observations=(), claims=tuple(claims), errors=errors, flags=tuple(data.get("flags", ())),
                     environment_error=dict(data.get("environment_error", {})))


def _read(args: tuple[str, int, str], shared: dict[str, str] | None = None) -> list[LabResult]:
    """The lean runs of one file, its strings shared with those of the files read before it into ``shared``."""
    from ctxlab.records.files import load_runs

    path, max_bytes, hint = args
    pool: dict[str, str] = {} if shared is None else shared
    return load_runs(path, max_bytes, limit_hint=hint, build=lambda run: lean_from_dict(run, pool))


def default_jobs() -> int:
    """CTXLAB_MERGE_JOBS where set to a whole number, else the cores this process may use, at most ``MAX_JOBS``."""
    wanted = os.environ.get("CTXLAB_MERGE_JOBS", "").strip()
    if wanted.isdigit() and int(wanted) > 0:
        return min(64, int(wanted))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_JOBS, cores))


def _context():
    import multiprocessing

    # fork: the children need nothing but this module, and start in milliseconds; elsewhere the default
    return multiprocessing.get_context("fork") if sys.platform == "linux" else multiprocessing.get_context()


@contextmanager
def _no_cycle_collector() -> Iterator[None]:
    """Python's cycle collector off for the while: a decoded file is a tree of hundreds of thousands of
    objects and its records hold no cycles either, so reference counting frees all of it, and the collector
    would only walk them again and again (a sixth of the time of reading a fleet's files). Back on after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_for_merge(files: Sequence[str], max_bytes: int = DEFAULT_MAX_BYTES, limit_hint: str = "max_bytes raises it",
                   jobs: int | None = None) -> list[tuple[str, list[LabResult]]]:
    """(path, lean runs) for each file in order; ResultFileError for the first file, in order, that is refused.
    The readers it starts are forked with the cycle collector off, as this process reads with it off."""
    with _no_cycle_collector():
        return _load(files, max_bytes, limit_hint, jobs)


def _load(files: Sequence[str], max_bytes: int, limit_hint: str, jobs: int | None) -> list[tuple[str, list[LabResult]]]:
    jobs = jobs or default_jobs()
    tasks = [(os.fspath(path), max_bytes, limit_hint) for path in files]
    shared: dict[str, str] = {}
    if jobs <= 1 or len(tasks) < PARALLEL_FROM:
        return [(task[0], _read(task, shared)) for task in tasks]
    from functools import partial

    from ctxlab.report.fleet_readers import read_in_children

    # Each reader shares strings across the files it reads (its own copy of the pool), so that a chunk's are
    # sent once; this process shares them across every file, whichever reader read it.
    read = partial(_read, shared={})
    return [(task[0], [lean(run, shared) for run in runs])
            for task, runs in zip(tasks, read_in_children(read, tasks, jobs, _context()), strict=True)]
