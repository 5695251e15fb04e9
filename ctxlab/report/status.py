"""One line and an exit status from a recorded result, for the fleet recipes (``ctxlab status``, fleet/).

Exit status, as a Kubernetes Node Problem Detector custom plugin reads it: 0 every claim holds (or is what was
observed), 1 a problem (a claim fails or errs, a scenario broke, fewer claims were judged than the run's level
promises on the node, or the node could not run at all), 2 unknown
(the file is missing, unreadable, not a result, or older than the age allowed). The line is what NPD shows as
the condition's message and what the Slurm health check gives as the drain reason: ``ctxlab: ...``, plain
ASCII-safe text without quotes, at most a given number of characters.
"""

from __future__ import annotations

import os
import time

from ctxlab.records.environment_error import is_environment_error
from ctxlab.records.model import LabResult
from ctxlab.records.promise import unkept
from ctxlab.records.schema import FAILING
from ctxlab.report.escape import one_line

OK, PROBLEM, UNKNOWN = 0, 1, 2
MIN_LIMIT = 20  # the shortest line asked for: enough for "ctxlab: fails: ..."


def status_line(runs: list[LabResult]) -> tuple[int, str]:
    """(exit status, line) for the runs of one result file."""
    unable = [run for run in runs if is_environment_error(run)]
    if unable:
        error = unable[0].environment_error
        return PROBLEM, f"ctxlab: cannot run: {error.get('reason', '?')}: {error.get('message', '')}"
    if not runs:
        return UNKNOWN, "ctxlab: the result holds no runs"
    failing = [c.id for run in runs for c in run.claims if c.verdict in FAILING]
    broke = [f"{run.lab} ({', '.join(sorted({str(e.get('kind', '?')) for e in run.errors}))})"
             for run in runs if run.errors]
    short = unkept(runs)  # an empty run, or one short of what its level promises here
    if failing or broke or short:
        parts = []
        if failing:
            parts.append(f"fails: {failing[0]}" + (f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""))
        if broke:
            parts.append(f"broke: {broke[0]}" + (f" (+{len(broke) - 1} more)" if len(broke) > 1 else ""))
        if short:
            parts.append(short)
        return PROBLEM, "ctxlab: " + "; ".join(parts)
    claims = sum(len(run.claims) for run in runs)
    gpus = sorted({str(run.environment.get("gpu", "?")) for run in runs})
    return OK, f"ctxlab: ok: {claims} claims on {', '.join(gpus)}, none fails"


def clean(line: str, limit: int) -> str:
    """The line as a drain reason or condition message can hold it: one line, no quotes or backslashes."""
    text = one_line(line).replace('"', "'").replace("\\", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def status_of(path: str, max_age: float | None = None, limit: int = 240, max_bytes: int | None = None,
              limit_hint: str | None = None) -> tuple[int, str]:
    """(exit status, cleaned line) for the result file at ``path``: unknown when it cannot be read, is larger
    than ``max_bytes`` (``limit_hint`` says how to raise it), or is older than ``max_age`` seconds."""
    from ctxlab.defaults import DEFAULT_MAX_BYTES
    from ctxlab.records.files import LIMIT_HINT, load_runs
    from ctxlab.records.model import ResultFileError

    limit = max(MIN_LIMIT, limit)
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError as exc:  # as show and merge say it: the path, then why
        return UNKNOWN, clean(f"ctxlab: unknown: {path or repr(path)}: cannot read ({exc.strerror or exc})", limit)
    try:
        runs = load_runs(path, DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
                         limit_hint=limit_hint or LIMIT_HINT)
    except (OSError, ResultFileError) as exc:
        return UNKNOWN, clean(f"ctxlab: unknown: {exc}", limit)
    if max_age is not None and age > max_age:
        return UNKNOWN, clean(f"ctxlab: unknown: {path} is {age:.0f} s old (more than {max_age:.0f})", limit)
    status, line = status_line(runs)
    return status, clean(line, limit)
