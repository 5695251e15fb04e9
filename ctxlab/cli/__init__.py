"""The ctxlab command line: one command per lab of the registry (``ctxlab.labs.LABS``, built by
``cli.labs``), trace, audit, check for CI, status for fleets, and doctor, claims, show and report merge.

Exit status: 0 when no documented claim fails, 1 when one does (or a scenario
crashed), 2 for a usage or environment problem (no GPU, bad device, bad file),
3 from audit when it finds a hazard of severity error; 129, 130 and 143 when ended by SIGHUP, SIGINT or
SIGTERM (quietly, after cleanup: ``ctxlab.interrupts``), 141 when the reader of standard output went away.
"""

from __future__ import annotations

import json
import os
import sys
import time

import click

from ctxlab.cli.fleet import REPORT_OPTIONS, check_reports, fleet_check
from ctxlab.cli.help import CommandsGroup
from ctxlab.cli.labs import lab_commands
from ctxlab.cli.merge import report
from ctxlab.cli.options import (
    device_option,
    max_size_option,
    output_option,
    output_options,
    overwrite_input_option,
    repeats_option,
    table_options,
    trace_option,
)
from ctxlab.cli.program import ProgramRan, audit, trace
from ctxlab.cli.report import HandoffProgress, emit, render_for, say, screen_of, write_report
from ctxlab.cli.status import status
from ctxlab.cli.types import (
    EXIT_FAILS,
    EXIT_USAGE,
    CtxlabError,
    FiniteFloat,
    NameList,
    OutputPath,
    ResultPath,
    domain_errors,
)
from ctxlab.labs import LABS as _LAB_NAMES
from ctxlab.report import FORMATS
from ctxlab.version import __version__

__all__ = ["cli", "main", "CtxlabError", "ProgramRan", "EXIT_FAILS", "EXIT_USAGE", "device_option", "trace_option",
           "repeats_option", "HandoffProgress", "say", "emit"]

@click.group(name="ctxlab", cls=CommandsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctxlab")
def cli():
    """ctxlab: experiments that show how CUDA contexts really behave.

    Each lab runs real CUDA on this machine's GPU from real host threads, states
    the documented claims it checks with their sources, records what the driver
    did, and gives a verdict per claim: holds, fails, changed, observed,
    skipped or error. Exit status 1 means a documented promise failed, a claim
    could not be judged (error) or a scenario broke; 2 a usage or environment
    problem. `ctxlab claims` lists every claim without a GPU.
    """


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="A human table, or the findings as JSON.")
@output_option
@click.option("--json", "json_path", type=OutputPath(), default=None,
              help="Also write the findings as JSON here (as check's --json PATH).")
@domain_errors
def doctor(fmt: str, output: str | None, json_path: str | None) -> None:
    """Show the driver, runtimes, GPUs and libraries ctxlab would use.

    \b
      ctxlab doctor
      ctxlab doctor --format json -o doctor.json

    Creates no context: the primary contexts' state is reported as found.
    Exits 2 (after printing) when something ctxlab needs is missing.
    """
    import ctxlab.api
    from ctxlab.output import STDOUT, check_outputs, write_outputs
    from ctxlab.report.doctor import render_doctor

    target = output or STDOUT
    outputs = [(fmt, target), *([("json", json_path)] if json_path else [])]
    check_outputs([path for _, path in outputs])
    report = ctxlab.api.doctor()
    text = {"json": json.dumps(report, indent=2) + "\n",
            "table": render_doctor(report, screen_of(target), __version__)}
    write_outputs([(path, text[kind]) for kind, path in outputs])
    if report["missing"]:
        raise SystemExit(EXIT_USAGE)


@cli.command()
@click.argument("file", type=ResultPath())
@output_options
@click.option("--html", "html_path", type=OutputPath(), default=None,
              help="Also write a self-contained HTML page: a timeline of threads by contexts, step by step.")
@click.option("--check", "gate", is_flag=True,
              help="Exit 1 when a recorded claim fails or errs, or a scenario crashed (as the run did).")
@max_size_option
@overwrite_input_option
@domain_errors
def show(file: str, fmt: str, output: str | None, steps: bool, full: bool, html_path: str | None, gate: bool,
         max_size: int) -> None:
    """Render a recorded result FILE (JSON, schema ctxlab/1) as a report.

    \b
      ctxlab show labs/results/check.json
      ctxlab show labs/results/migrate.json --steps --html migrate.html
      ctxlab show run.json --check --format junit -o run.xml

    The table shows every lab's claims (verdict, id, statement, evidence),
    its figures and errors, and a closing summary; --steps adds the step
    tables and timelines; --html writes the timeline page besides (the
    report still goes to -o, or standard output). Result files are data from other machines and are
    treated as untrusted: any file that is not a valid result is refused with
    one line and exit status 2. Exits 0 after rendering, or with --check 1
    when the recorded run failed. Every output is written, or none.
    """
    from ctxlab.output import STDOUT, check_outputs, write_outputs
    from ctxlab.records.files import load_runs

    reports = [(fmt, output or STDOUT)]  # with --html too, as report merge does: the page is written besides
    if html_path:
        reports.append(("html", html_path))
    check_outputs([path for _, path in reports])
    runs = load_runs(file, max_size, limit_hint="--max-size raises it")
    texts: list = []  # (path, text or its chunks: output.Text)
    for kind, path in reports:
        if kind == "html":
            from ctxlab.report.timeline import render_html

            texts.append((path, render_html(runs)))
        else:
            texts.append((path, render_for(runs, kind, path, steps, full)))
    write_outputs(texts)
    for kind, path in reports:
        if path != STDOUT:
            say(f"wrote the timeline to {path}" if kind == "html" else f"wrote {kind} report to {path}")
    if gate and any(run.failed for run in runs):
        raise SystemExit(EXIT_FAILS)


def lab_exit(runs) -> None:
    """Exit with status 1 when any run failed; return otherwise."""
    if any(run.failed for run in runs):
        raise SystemExit(EXIT_FAILS)


def run_lab(name: str, fmt: str, output: str | None, on_progress=None, steps: bool = False, full: bool = False,
            **options) -> None:
    """What every lab command does: check the output path, run through the API, report, exit by the verdicts."""
    import ctxlab.api
    from ctxlab.output import check_writable

    check_writable(output or "-")
    result = ctxlab.api.run(name, progress=say, on_progress=on_progress, **options)
    emit([result], fmt, output, steps, full)
    lab_exit([result])


@cli.command()
@click.option("--lab", "lab_names", multiple=True, help="Only this lab's claims (repeat for several).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True, help="A table, JSON, or Markdown.")
@output_option
@domain_errors
def claims(lab_names, fmt, output):
    """List the claims the labs judge: id, statement, source, kind, and the scenarios that decide each.

    \b
      ctxlab claims
      ctxlab claims --lab migrate --lab peer
      ctxlab claims --format json -o claims.json

    Kinds: promise (current documentation promises it: holds or fails), old-text
    (what the old documentation said: holds or changed), observation (nothing
    promised: recorded as observed). Needs no GPU.
    """
    import ctxlab.api
    from ctxlab.claim import catalogue
    from ctxlab.report.catalogue import render_catalogue

    entries = catalogue(ctxlab.api.claims(lab_names or None))
    write_report(render_catalogue(entries, fmt, screen_of(output)), output, f"{len(entries)} claims")


def parse_devices(text: str) -> list[int]:
    """The device indices that ``--devices`` names ('all' or a list such as 0,1), sorted, each checked to exist."""
    from ctxlab.cuda.environment import device_count, require_device

    if text == "all":
        return list(range(device_count()))
    try:
        devices = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"{text!r}: give 'all' or indices such as 0,1", param_hint="--devices") from None
    if not devices or any(d < 0 for d in devices):
        raise click.BadParameter(f"{text!r}: give 'all' or indices such as 0,1", param_hint="--devices")
    for device in devices:
        require_device(device)
    return devices


@cli.command()
@click.option("--devices", "-d", default="0", show_default=True, metavar="all|N,N",
              help="GPUs to run the labs on: 'all' or a list such as 0,1.")
@click.option("--only", type=NameList(), default=None,
              help=f"Run only these labs (comma-separated): {', '.join(_LAB_NAMES)}.")
@click.option("--timeout", type=FiniteFloat(1, 3600), default=300.0, show_default=True,
              help="Seconds a lab's scenario may run before it is killed and reported as that lab's error.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Child processes at once, over every lab's scenarios (default: the CPU cores, at most 8: "
                   "the driver makes contexts one process at a time); scenarios "
                   "that need the GPU alone still run one at a time.")
@repeats_option
@click.option("--level", type=click.IntRange(1, 3), default=3, show_default=True, metavar="1|2|3",
              help="How much to judge, as dcgmi diag -r has it: 1 node health in seconds (the promises a context "
                   "handoff rests on: for a Slurm HealthCheckProgram or a node_exporter timer), 2 every documented "
                   "claim with each scenario once, 3 everything with undefined-behaviour scenarios repeated. "
                   "Claims above the level read unjudged.")
@click.option("--isolation", type=click.Choice(("batched", "each")), default="batched", show_default=True,
              help="batched: scenarios that do not need a fresh process share one child per lab, checked clean "
                   "between two (no thread left, no context but a primary one current, no sticky error, the "
                   "primary context as the first left it), the rest re-run in fresh children if not; each: one "
                   "child per scenario.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None, show_default="table",
              help="Format of the report --output gets (as show writes it): table, json (every run), junit, "
                   "markdown (the whole report), summary (the CI step summary, with the drift) or openmetrics "
                   "(for node_exporter's textfile collector).")
@output_option
@table_options
@click.option("--json", "json_path", type=OutputPath(), default=None,
              help="Also write all results as JSON here (as --format json --output PATH).")
@click.option("--junit", "junit_path", type=OutputPath(), default=None, help="Also write JUnit XML here.")
@click.option("--markdown", "markdown_path", type=OutputPath(), default=None,
              help="Also write the summary for a CI step summary here (e.g. $GITHUB_STEP_SUMMARY).")
@click.option("--baseline", type=ResultPath(), default=None,
              help="A recorded check JSON to compare with: every verdict or observed outcome that differs is drift; "
                   "its timings also order the scenarios longest first.")
@click.option("--fail-on-drift", is_flag=True, help="Exit 1 when anything drifted from --baseline.")
@click.option("--profile", is_flag=True,
              help="Print when each scenario's child process started and ended, what it waited for, and the "
                   "critical path (standard error).")
@max_size_option
@overwrite_input_option
@domain_errors
@fleet_check
def check(devices, only, timeout, jobs, repeats, level, isolation, fmt, output, steps, full, json_path, junit_path,
          markdown_path, baseline, fail_on_drift, profile, max_size, openmetrics_path=None):
    """Run every lab, isolated, and report for CI: exit 1 when a documented claim fails or a lab errors,
    or when fewer claims were judged than the level promises on this machine (none at all, or a promised
    one missing, left unjudged, or skipped for a reason neither the run's own record nor the node's software
    accounts for).

    \b
      ctxlab check
      ctxlab check --level 1 --openmetrics /var/lib/node_exporter/ctxlab.prom
      ctxlab check --only refcount,modules -d all
      ctxlab check --json r.json --junit r.xml --markdown "$GITHUB_STEP_SUMMARY"
      ctxlab check --baseline labs/results/check.json --fail-on-drift

    One line per lab as it ends, then the table (or --format to --output).
    --json, --junit and --markdown write further reports; all are written, or
    none. Exit status: 0 when no claim fails, every lab ran and the run judged
    what its level promises here, 1 otherwise (or on drift with
    --fail-on-drift), 2 for usage or environment problems such as no GPU.

    Every child pays for its own contexts, and the driver makes contexts one
    process at a time: that bounds check's time. So scenarios that need no
    fresh process share one child per lab (--isolation batched, checked clean
    between two); first-context sequences, undefined-behaviour repeats, fork
    and anything that may leave a sticky error keep a process of their own.
    CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue per context instead of
    8) makes each context about half as costly; check does not set it for
    you, and each run records the driver variables it was given.
    """
    import ctxlab.api
    from ctxlab.labs import UnknownLab
    from ctxlab.output import check_outputs, write_outputs
    from ctxlab.records.files import load_runs
    from ctxlab.records.promise import unkept
    from ctxlab.report.escape import one_line
    from ctxlab.report.summary import drift_line
    from ctxlab.suite import changes, declared, profile_lines, progress_line, select_labs

    try:
        names = select_labs(only)
    except UnknownLab as exc:
        raise click.BadParameter(str(exc), param_hint="--only") from None
    if fail_on_drift and not baseline:
        raise click.UsageError("--fail-on-drift needs --baseline")
    if click.get_current_context().get_parameter_source("repeats") is click.core.ParameterSource.DEFAULT:
        repeats = None  # each lab's own; below level 3 every scenario runs once
    ctxlab.api.refuse_repeats_below_full(level, repeats)  # before looking for a GPU: a usage error first
    paths = {"json_path": json_path, "openmetrics_path": openmetrics_path, "junit_path": junit_path,
             "markdown_path": markdown_path}
    reports = [(kind, paths[key]) for kind, key in REPORT_OPTIONS if paths[key]]  # kind: a registered format
    if output or fmt or not reports:  # the table goes to standard output unless only report files were named
        reports.insert(0, (fmt or "table", output or "-"))
    check_outputs([path for _, path in reports])
    base = load_runs(baseline, max_size, limit_hint="--max-size raises it") if baseline else None
    chosen = parse_devices(devices)
    t0 = time.perf_counter()
    schedule: list = []
    runs = ctxlab.api.check(names, chosen, timeout=timeout, jobs=jobs, repeats=repeats, baseline=base,
                            progress=lambda run: say(progress_line(run)), schedule=schedule, isolation=isolation,
                            level=level)
    drifted = changes(base, runs) if base is not None else None
    say(f"check: {len(runs)} lab run(s) at level {level} in {time.perf_counter() - t0:.2f} s")
    if profile:
        for line in profile_lines(schedule):
            say(line)
    promised = declared(names, chosen, level)  # only the labs selected promise, each on every GPU given
    write_outputs(check_reports(runs, drifted, reports, steps, full, promised))
    for d in drifted or ():
        say(one_line(f"drift: {drift_line(d)}"))
    short = unkept(runs, promised)  # an empty or short run is not a healthy one: the fleet must not read it so
    if short is not None:
        say(one_line(f"check: {short}"))
    if any(run.failed for run in runs) or (fail_on_drift and drifted) or short is not None:
        raise SystemExit(EXIT_FAILS)


for _command in (trace, audit, report, status):  # commands defined beside their helpers
    cli.add_command(_command)
# One command per lab of the registry, its options its options dataclass's (cli/labs.py); each runs through run_lab,
# looked up when it runs.
for _lab_command in lab_commands(lambda *args, **kwargs: run_lab(*args, **kwargs)):
    cli.add_command(_lab_command)


def main():
    """The console entry point: run the ctxlab command group."""
    try:
        cli(prog_name="ctxlab")
    except ProgramRan as done:
        # The report is written; the program's libraries may crash in their own exit handlers when the
        # program destroyed a context under them (seen: CuPy after a primary context was released to zero),
        # which would replace the status with a signal. End here, with the status the report gave.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(done.code or 0))


if __name__ == "__main__":
    main()
