"""What ``ctxlab check`` adds for fleets: ``--openmetrics PATH``, and the environment-error record.

A node that cannot run (no driver, no usable GPU, a device that does not exist, CUPTI missing) still writes
the report files it was asked for (``--json``, ``--openmetrics``, ``--junit``, ``--markdown``, and
``--output`` when it names a file) from one environment-error record
(``ctxlab.records.environment_error``), then exits 2 with the one line it always gave: the fleet sees the
node instead of losing it. Standard output gets nothing, and standard error only that line; when the record
could not be written (a full disk, a directory gone), the line says so too, since the fleet will then not
see the node.
"""

from __future__ import annotations

import datetime
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from ctxlab.cli.types import CtxlabError, OutputPath, no_gpu_line

F = TypeVar("F", bound=Callable[..., Any])

OPENMETRICS_HELP = ("Also write the run as OpenMetrics text here, for node_exporter's textfile collector "
                    "(written atomically; a node that cannot run writes ctxlab_up 0 and its reason).")
# check's report options and the registered format each writes (--markdown: the CI step summary)
REPORT_OPTIONS = (("json", "json_path"), ("openmetrics", "openmetrics_path"), ("junit", "junit_path"),
                  ("summary", "markdown_path"))


def openmetrics_option(fn: F) -> F:
    """Add --openmetrics PATH: the metrics file a textfile collector reads."""
    return click.option("--openmetrics", "openmetrics_path", type=OutputPath(), default=None,
                        help=OPENMETRICS_HELP)(fn)


def _environment_exceptions() -> tuple[type[BaseException], ...]:
    from ctxlab.cuda.environment import BadDevice, NoGpu
    from ctxlab.tracing.tracer import TraceUnavailable

    return (NoGpu, BadDevice, TraceUnavailable)


def line_for(exc: BaseException) -> str:
    """The one line the command prints for this environment problem (without ``Error:``)."""
    if type(exc).__name__ == "NoGpu":
        return no_gpu_line(exc)
    return " ".join(str(exc).split())


def record_reports(options: dict[str, Any]) -> list[tuple[str, str]]:
    """(format, path) of every report check was asked for: each file, and standard output when its format is one
    a machine reads (json, junit, openmetrics, markdown: ``check --format openmetrics > node.prom`` gets
    ``ctxlab_up 0``); a table on standard output is the one line on standard error already."""
    from ctxlab.output import STDOUT

    reports = [(kind, options[key]) for kind, key in REPORT_OPTIONS if options.get(key)]
    fmt, output = options.get("fmt") or "table", options.get("output")
    if (output and output != STDOUT) or fmt != "table":
        reports.insert(0, (fmt, output or STDOUT))
    return reports


def check_reports(runs: list, drifted: list[dict] | None, reports: list[tuple[str, str]], steps: bool = False,
                  full: bool = False, declared: Mapping | None = None) -> list[tuple[str, Any]]:
    """(path, text) for each report check writes, each format from the one registry (the same bytes show
    writes for the same runs): json every run, summary the CI step summary with the drift, openmetrics the
    textfile collector's metrics, held to what the catalogue ``declared`` of the labs selected."""
    from ctxlab.cli.report import render_for

    return [(path, render_for(runs, fmt, path, steps, full, drifted, declared)) for fmt, path in reports]


def write_environment_record(exc: BaseException, options: dict[str, Any], started: str,
                             seconds: float) -> str | None:
    """Write the environment-error record to every report file check was asked for (all or none, as every
    output); None when written (or none was asked for), else why it was not."""
    from ctxlab.cuda.environment_error import environment_error_run
    from ctxlab.output import OutputError, write_outputs

    reports = record_reports(options)
    if not reports:
        return None
    devices = options.get("devices")
    asked: dict[str, Any] = {"devices": devices, "only": options.get("only")}
    if isinstance(devices, str) and devices.strip().isdigit():
        asked["device"] = int(devices.strip())
    run = environment_error_run(exc, line_for(exc), options=asked, started=started, seconds=seconds)
    try:
        write_outputs(check_reports([run], None, reports))
    except OutputError as failed:
        return " ".join(str(failed).split())
    return None


def records_environment_errors(fn: F) -> F:
    """Wrap check: on an environment problem, write the environment-error record, then raise it as before."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except _environment_exceptions() as exc:
            unwritten = write_environment_record(exc, kwargs, started, time.perf_counter() - t0)
            if unwritten is not None:  # the environment's line first, as always; then what the fleet will miss
                raise CtxlabError(f"{line_for(exc)}; the environment-error record was not written either: "
                                  f"{unwritten}") from None
            raise

    return wrapper  # type: ignore[return-value]


def fleet_check(fn: F) -> F:
    """check's fleet additions in one decorator (under ``domain_errors``): --openmetrics PATH, and the
    environment-error record written before an environment problem is raised."""
    return openmetrics_option(records_environment_errors(fn))
