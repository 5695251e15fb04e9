"""One line and an exit status from a recorded result, for the fleet recipes under fleet/.

    python3 -m ctxlab.fleet_status RESULT.json [--max-age SECONDS] [--limit CHARS]

Exit status, as a Kubernetes Node Problem Detector custom plugin reads it: 0 every claim holds (or is
what was observed), 1 a problem (a claim fails or errs, a scenario broke, or the node could not run at
all), 2 unknown (the file is missing, unreadable, not a result, or older than ``--max-age``). The line
(standard output) is what NPD shows as the condition's message and what the Slurm health check gives
as the drain reason: ``ctxlab: ...``, plain ASCII-safe text without quotes, at most ``--limit`` characters.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ctxlab.records.environment_error import is_environment_error
from ctxlab.records.model import LabResult
from ctxlab.records.schema import FAILING

OK, PROBLEM, UNKNOWN = 0, 1, 2


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
    if failing or broke:
        parts = []
        if failing:
            parts.append(f"fails: {failing[0]}" + (f" (+{len(failing) - 1} more)" if len(failing) > 1 else ""))
        if broke:
            parts.append(f"broke: {broke[0]}" + (f" (+{len(broke) - 1} more)" if len(broke) > 1 else ""))
        return PROBLEM, "ctxlab: " + "; ".join(parts)
    claims = sum(len(run.claims) for run in runs)
    gpus = sorted({str(run.environment.get("gpu", "?")) for run in runs})
    return OK, f"ctxlab: ok: {claims} claims on {', '.join(gpus)}, none fails"


def clean(line: str, limit: int) -> str:
    """The line as a drain reason or condition message can hold it: one line, no quotes or backslashes."""
    from ctxlab.report.escape import one_line

    text = one_line(line).replace('"', "'").replace("\\", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    """The command line: print the line, return the status."""
    parser = argparse.ArgumentParser(prog="python3 -m ctxlab.fleet_status", description=__doc__.splitlines()[0])
    parser.add_argument("result")
    parser.add_argument("--max-age", type=float, default=None, help="seconds after which the file is stale")
    parser.add_argument("--limit", type=int, default=240, help="characters of the line at most")
    args = parser.parse_args(argv)
    from ctxlab.records.files import load_runs
    from ctxlab.records.model import ResultFileError

    try:
        age = time.time() - os.stat(args.result).st_mtime
        runs = load_runs(args.result)
    except (OSError, ResultFileError) as exc:
        print(clean(f"ctxlab: unknown: {exc}", args.limit))
        return UNKNOWN
    if args.max_age is not None and age > args.max_age:
        print(clean(f"ctxlab: unknown: {args.result} is {age:.0f} s old (more than {args.max_age:.0f})",
                    args.limit))
        return UNKNOWN
    status, line = status_line(runs)
    print(clean(line, max(20, args.limit)))
    return status


if __name__ == "__main__":
    sys.exit(main())
