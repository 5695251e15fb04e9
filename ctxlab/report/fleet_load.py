"""Reading a fleet's result files for ``report merge``: fast, and bounded in memory.

Each file is read and validated in full, as ``ctxlab show`` reads it (``ctxlab.loading.load_runs``), then
cut down at once to what a merge shows: the environment, each claim's id, kind and verdict (the evidence
only for ``observed`` claims, whose outcome the fleet view compares), whether the lab broke, its flags,
and a node's environment error. Observations, traces, statements and sources are dropped, and repeated
strings are shared, so a thousand files of half a megabyte each take tens of megabytes, not gigabytes.
With many files, child processes read them side by side (``jobs``, default: CTXLAB_MERGE_JOBS or the cores,
at most 8); the
first file that cannot be read, in the order given, is the one refused.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

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


def _read(args: tuple[str, int, str]) -> list[LabResult]:
    from ctxlab.records.files import load_runs

    path, max_bytes, hint = args
    shared: dict[str, str] = {}
    return [lean(run, shared) for run in load_runs(path, max_bytes, limit_hint=hint)]


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


def load_for_merge(files: Sequence[str], max_bytes: int = DEFAULT_MAX_BYTES, limit_hint: str = "max_bytes raises it",
                   jobs: int | None = None) -> list[tuple[str, list[LabResult]]]:
    """(path, lean runs) for each file in order; ResultFileError for the first file, in order, that is refused."""
    jobs = jobs or default_jobs()
    tasks = [(os.fspath(path), max_bytes, limit_hint) for path in files]
    shared: dict[str, str] = {}
    if jobs <= 1 or len(tasks) < PARALLEL_FROM:
        return [(task[0], _read(task)) for task in tasks]
    from ctxlab.report.fleet_readers import read_in_children

    return [(task[0], [lean(run, shared) for run in runs])  # share strings across files too
            for task, runs in zip(tasks, read_in_children(_read, tasks, jobs, _context()), strict=True)]
