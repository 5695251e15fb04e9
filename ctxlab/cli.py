"""The ctxlab command line: one command per lab (migrate, refcount, lifecycle,
modules), trace, check for CI, and doctor, show and report merge.

Exit status: 0 when no documented claim fails, 1 when one does (or a scenario
crashed), 2 for a usage or environment problem (no GPU, bad device, bad file).
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time

import click

from ctxlab import __version__
from ctxlab.labs import LABS as _LAB_NAMES
from ctxlab.report import FORMATS

EXIT_FAILS = 1
EXIT_USAGE = 2


class CtxlabError(click.ClickException):
    """A user or environment problem: one line, exit status 2, no traceback."""

    exit_code = EXIT_USAGE


def domain_errors(fn):
    """Turn the errors a user can cause or meet into CtxlabError at the command boundary."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from ctxlab.cuda.environment import BadDevice, NoGpu
        from ctxlab.output import OutputError
        from ctxlab.record import ResultFileError

        try:
            return fn(*args, **kwargs)
        except NoGpu as exc:
            raise CtxlabError(f"no usable GPU: {exc} (ctxlab doctor shows what was found)") from None
        except (BadDevice, ResultFileError) as exc:
            raise CtxlabError(" ".join(str(exc).split())) from None
        except OutputError as exc:
            raise CtxlabError(f"cannot write output: {' '.join(str(exc).split())}") from None
        except OSError as exc:
            raise CtxlabError(f"cannot write output: {exc.strerror or exc}") from None

    return wrapper


class FiniteFloat(click.FloatRange):
    """A FloatRange that refuses NaN and infinities (Click's own lets NaN through every bound)."""

    name = "float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutputPath(click.ParamType):
    """Where a report goes: a file, a device or FIFO (written in place), or - for standard output."""

    name = "PATH"

    def convert(self, value, param, ctx):
        if value == "":
            self.fail("empty output path: give a file name, or - for standard output", param, ctx)
        return value


class ByteSize(click.ParamType):
    """A size such as 65536, 64K, 64M or 1G (powers of 1024)."""

    name = "SIZE"
    UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")  # 64M, 64MB and 64MiB alike
        unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
        number = text[: len(text) - len(unit)]
        if not number.isdigit() or int(number) <= 0:
            self.fail(f"{value!r} is not a size such as 65536, 64K, 64M or 1G", param, ctx)
        return int(number) * self.UNITS[unit]


class NameList(click.ParamType):
    """A comma-separated list with at least one name (an empty list is a mistake, not "all")."""

    name = "NAMES"

    def convert(self, value, param, ctx):
        if not [part for part in value.split(",") if part.strip()]:
            self.fail(f"{value!r} names nothing: give at least one name", param, ctx)
        return value


def device_option(fn):
    return click.option("--device", "-d", type=click.IntRange(min=0), default=0, show_default=True,
                        help="Index of the GPU to run on (as the driver numbers them).")(fn)


def trace_option(fn):
    return click.option("--trace", is_flag=True,
                        help="Attach to each step the driver calls and resource events it caused (CUPTI).")(fn)


OUTPUT_HELP = ("Write the report here instead of standard output (- is standard output; a file is replaced "
               "atomically and keeps its mode; a device or FIFO is written in place).")


def output_option(fn):
    return click.option("--output", "-o", type=OutputPath(), default=None, help=OUTPUT_HELP)(fn)


def output_options(fn):
    fn = output_option(fn)
    fn = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                      help="Report format: a human table, JSON (schema ctxlab/1), JUnit XML or Markdown.")(fn)
    return fn


def max_size_option(fn):
    from ctxlab.loading import DEFAULT_MAX_BYTES

    return click.option("--max-size", type=ByteSize(), default=f"{DEFAULT_MAX_BYTES // 2**20}M", show_default=True,
                        help="Refuse result files larger than this (e.g. 64M, 1G): they are read whole.")(fn)


def emit(runs, fmt: str, output: str | None) -> None:
    """Render the runs in ``fmt`` and write them to ``output`` (standard output when None or -)."""
    from ctxlab.output import STDOUT, write_output
    from ctxlab.report import render

    target = output or STDOUT
    write_output(target, render(runs, fmt))
    if target != STDOUT:
        say(f"wrote {fmt} report to {target}")


def say(message: str) -> None:
    click.echo(message, err=True)


class HandoffProgress:
    """Progress of a long relay: a bar on a terminal, a line a second elsewhere."""

    def __init__(self):
        self.bar = None
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.tty:
            if self.bar is None:
                from rich.progress import Progress

                self.bar = Progress(transient=True)
                self.bar.start()
                self.task = self.bar.add_task("handoffs", total=total)
            self.bar.update(self.task, completed=done, total=total)
            if done >= total:
                self.bar.stop()
                self.bar = None
        elif time.monotonic() - self.last >= 1.0 or done >= total:
            self.last = time.monotonic()
            say(f"  handoffs {done}/{total}")


def prepare(device: int, output: str | None, trace: bool = False) -> None:
    """Check what can be checked before a long run: the device exists, the output is writable,
    CUPTI can be loaded when tracing is asked for."""
    from ctxlab.cuda.environment import require_device
    from ctxlab.record import check_writable

    if output:
        check_writable(output)
    require_device(device)
    if trace:
        from ctxlab.trace import TraceUnavailable, require_cupti

        try:
            require_cupti()
        except TraceUnavailable as exc:
            raise CtxlabError(str(exc)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctxlab")
def cli():
    """ctxlab: experiments that show how CUDA contexts really behave.

    Each lab runs real CUDA on this machine's GPU from real host threads, states
    the documented claims it checks with their sources, records what the driver
    did, and gives a verdict per claim: holds, fails, changed, observed or
    skipped. Exit status 1 means a documented promise failed; 2 a usage or
    environment problem.
    """


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="A human table, or the findings as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@output_option
@domain_errors
def doctor(fmt: str, as_json: bool, output: str | None):
    """Show the driver, runtimes, GPUs and libraries ctxlab would use.

    Creates no context: the primary contexts' state is reported as found.
    Exits 2 (after printing) when something ctxlab needs is missing.
    """
    from ctxlab.cuda.environment import doctor as find
    from ctxlab.output import STDOUT, check_writable, write_output

    if output:
        check_writable(output)
    report = find()
    if as_json or fmt == "json":
        write_output(output or STDOUT, json.dumps(report, indent=2) + "\n")
    elif output and output != STDOUT:
        import io

        from rich.console import Console

        buffer = io.StringIO()
        _print_doctor(report, Console(file=buffer, width=120, color_system=None))
        write_output(output, buffer.getvalue())
    else:
        _print_doctor(report)
    if report["missing"]:
        raise SystemExit(EXIT_USAGE)


def _print_doctor(report: dict, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    drv = report["driver"]
    table = Table(title=f"ctxlab {report['ctxlab'] or __version__} on {report['hostname']} (Python {report['python']})")
    table.add_column("component")
    table.add_column("status")
    table.add_column("details", overflow="fold")
    for key in ("driver", "cupy", "cuda_bindings", "nvrtc", "cupti"):
        part = report[key]
        details = {k: v for k, v in part.items() if k not in ("ok", "problem", "devices")}
        status = "[green]ok[/]" if part["ok"] else "[red]missing[/]"
        table.add_row(key, status, _once(f"{key}: {part['problem']}").removeprefix(f"{key}: ") if part.get("problem")
                      else ", ".join(f"{k} {v}" for k, v in details.items()))
    table.add_row("CUDA_MODULE_LOADING", "", str(report["CUDA_MODULE_LOADING"] or "(unset)"))
    console.print(table)
    if drv.get("ok"):
        gpus = Table(title="GPUs")
        for column in ("index", "name", "compute capability", "memory", "primary context"):
            gpus.add_column(column)
        for dev in drv["devices"]:
            gpus.add_row(str(dev["index"]), dev["name"], dev["compute_capability"],
                         f"{dev['memory_bytes'] / 2**30:.1f} GiB",
                         "active" if dev["primary_context_active"] else "inactive")
        console.print(gpus)
    for line in report["missing"]:
        console.print(Text.assemble(("missing", "red"), f" {_once(line)}"), highlight=False)


def _once(line: str) -> str:
    """'cupti: cupti: X' as 'cupti: X': the probe's message may already name its part."""
    part, _, problem = line.partition(": ")
    return f"{part}: {problem.removeprefix(part + ': ')}" if problem else line


@cli.command()
@click.argument("file", type=click.Path())
@output_options
@click.option("--check", "gate", is_flag=True,
              help="Exit 1 when a recorded claim fails or errs, or a scenario crashed (as the run did).")
@max_size_option
@domain_errors
def show(file: str, fmt: str, output: str | None, gate: bool, max_size: int):
    """Render a recorded result FILE (JSON, schema ctxlab/1) as a report.

    Result files are data from other machines and are treated as untrusted: any
    file that is not a valid result is refused with one line and exit status 2.
    Exits 0 after rendering, or with --check 1 when the recorded run failed.
    """
    from ctxlab.gate import any_fails
    from ctxlab.loading import load_runs

    runs = load_runs(file, max_size)
    emit(runs, fmt, output)
    if gate and any_fails(runs):
        raise SystemExit(EXIT_FAILS)


def lab_exit(runs) -> None:
    if any(run.failed for run in runs):
        raise SystemExit(EXIT_FAILS)


def run_lab(module, options: dict, fmt: str, output: str | None, **kwargs) -> None:
    """What every lab command does: check, run, report, exit with the verdicts' status."""
    prepare(options["device"], output, options.get("trace", False))
    result = module.run(options, progress=say, **kwargs)
    emit([result], fmt, output)
    lab_exit([result])


@cli.command()
@device_option
@click.option("--threads", "-t", type=click.IntRange(1, 1024), default=4, show_default=True,
              help="Host threads that take turns holding the context.")
@click.option("--rounds", "-r", type=click.IntRange(1, 1_000_000), default=3, show_default=True,
              help="How many times the context goes round all threads.")
@click.option("--context", "context", type=click.Choice(["primary", "created", "both"]), default="both",
              show_default=True, help="Which context travels: the runtime's primary one, one from cuCtxCreate, or both.")
@click.option("--timeout", type=FiniteFloat(0.1, 3600), default=30.0, show_default=True,
              help="Seconds a single handoff may take before the run stops, naming the thread and step.")
@trace_option
@output_options
@domain_errors
def migrate(device, threads, rounds, context, timeout, trace, fmt, output):
    """Hand a context between host threads; check that state moves with it.

    Thread 1 allocates with CuPy, writes a __device__ global and makes a
    stream; every thread in turn pushes the context, verifies pointers,
    global, stream and values, updates them, pops and hands over. Also: one
    context current on two threads, a thread without the context, CuPy's
    caches under a second context, and a cross-context dereference, each in
    its own process.
    """
    from ctxlab.labs import migrate as lab

    if threads * rounds > 10_000_000:
        raise CtxlabError(f"--threads x --rounds = {threads * rounds:,} handoffs is more than 10,000,000")
    options = {"device": device, "threads": threads, "rounds": rounds, "context": context, "timeout": timeout,
               "trace": trace}
    run_lab(lab, options, fmt, output, on_handoff_progress=HandoffProgress())


@cli.command()
@device_option
@trace_option
@output_options
@domain_errors
def refcount(device, trace, fmt, output):
    """Show what keeps a context alive and what release and reset destroy.

    Each scenario runs in its own process: the runtime's own references to
    the primary context, releasing without a retain, cudaDeviceReset under
    CuPy, cuDevicePrimaryCtxReset, cuCtxAttach/cuCtxDetach and cuCtxDestroy
    on a created context, and whether cudaThreadExit still exists.
    """
    from ctxlab.labs import refcount as lab

    run_lab(lab, {"device": device, "trace": trace}, fmt, output)


@cli.command()
@device_option
@trace_option
@output_options
@domain_errors
def lifecycle(device, trace, fmt, output):
    """Show when and by which calls the runtime creates its context, and how to get its handle.

    Each sequence runs in a fresh process: import and first calls (in a new
    interpreter), cudaFree(0), cudaInitDevice, a cuCtxCreate context made first,
    the handle through cuCtxGetCurrent, a new host thread, and device flags
    before and after activation. --trace shows the driver calls beneath.
    """
    from ctxlab.labs import lifecycle as lab

    run_lab(lab, {"device": device, "trace": trace}, fmt, output)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--only", type=click.Choice(["context", "all"]), default="context", show_default=True,
              help="context: only calls that touch contexts and modules (cuCtx*, cuDevicePrimaryCtx*, cuModule*, "
                   "cuLibrary*, cuKernel*) and resource events; all: every call.")
@click.option("--thread", "thread_name", default=None, help="Show only the host thread with this name.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="A tree per thread, or the raw ordered events as JSON.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write the trace here instead of standard output.")
@click.option("-c", "code", default=None, help="Trace this Python code.")
@click.option("-m", "module", default=None, help="Trace this module, run as a script (like python -m).")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@domain_errors
def trace(only, thread_name, fmt, output, code, module, script_args):
    """Run a Python program under CUPTI and show the driver calls beneath its runtime calls.

    \b
      ctxlab trace --only context -- examples/first_context.py [ARGS]
      ctxlab trace -c "import cupy; cupy.arange(3).sum()"
      ctxlab trace -m mypackage.tool [ARGS]

    The program's own output and exit status pass through; the trace follows it.
    """
    from ctxlab.trace import TraceUnavailable
    from ctxlab.tracing_cli import run_traced

    chosen = [x for x in (code, module, script_args[0] if script_args else None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one program: a SCRIPT (after --), -c CODE or -m MODULE")
    if output:
        from ctxlab.record import check_writable

        check_writable(output)
    try:
        status = run_traced(code=code, module=module, argv=list(script_args), only=only, thread=thread_name,
                            fmt=fmt, output=output, echo=click.echo)
    except TraceUnavailable as exc:
        raise CtxlabError(str(exc)) from None
    except FileNotFoundError as exc:
        raise CtxlabError(f"script not found: {exc.filename}") from None
    raise SystemExit(status)


@cli.command()
@device_option
@trace_option
@output_options
@domain_errors
def modules(device, trace, fmt, output):
    """Show how and when modules are loaded into a context.

    Each scenario runs in a fresh process: the same module under
    CUDA_MODULE_LOADING=EAGER, LAZY and unset (witnessed by CUPTI's
    MODULE_LOADED and by device memory), one module in two contexts, a
    context-independent library (cuLibraryLoadData) in two contexts, nvcc's
    registration stub and a library built with it (needs nvcc), and CuPy's
    kernel cache under another context.
    """
    from ctxlab.labs import modules as lab

    run_lab(lab, {"device": device, "trace": trace}, fmt, output)


def parse_devices(text: str) -> list[int]:
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
@click.option("--devices", default="0", show_default=True,
              help="GPUs to run the labs on: 'all' or a list such as 0,1.")
@click.option("--only", type=NameList(), default=None,
              help=f"Run only these labs (comma-separated): {', '.join(_LAB_NAMES)}.")
@click.option("--timeout", type=FiniteFloat(1, 3600), default=300.0, show_default=True,
              help="Seconds a lab's scenario may run before it is killed and reported as that lab's error.")
@click.option("--jobs", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Labs run side by side (labs that need the GPU alone still run one at a time).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Format of the report --output gets: table (default), json (every run), junit or markdown "
                   "(the CI summary).")
@output_option
@click.option("--json", "json_path", type=OutputPath(), default=None,
              help="Also write all results as JSON here (as --format json --output PATH).")
@click.option("--junit", "junit_path", type=OutputPath(), default=None, help="Also write JUnit XML here.")
@click.option("--markdown", "markdown_path", type=OutputPath(), default=None,
              help="Also write the summary for a CI step summary here (e.g. $GITHUB_STEP_SUMMARY).")
@click.option("--baseline", type=click.Path(), default=None,
              help="A recorded check JSON to compare with: every verdict or observed outcome that differs is drift.")
@click.option("--fail-on-drift", is_flag=True, help="Exit 1 when anything drifted from --baseline.")
@max_size_option
@domain_errors
def check(devices, only, timeout, jobs, fmt, output, json_path, junit_path, markdown_path, baseline, fail_on_drift,
          max_size):
    """Run every lab, isolated, and report for CI: exit 1 when a documented claim fails or a lab errors.

    One line per lab as it ends, then the table (or --format to --output).
    --json, --junit and --markdown write further reports; all are written, or
    none. Exit status: 0 when no claim fails and every lab ran, 1 otherwise (or
    on drift with --fail-on-drift), 2 for usage or environment problems such as
    no GPU.
    """
    from ctxlab.check import drift, run_check
    from ctxlab.labs import LABS
    from ctxlab.loading import load_runs
    from ctxlab.output import check_outputs, write_outputs
    from ctxlab.report.escape import one_line
    from ctxlab.report.text import verdict_counts

    names = list(LABS)
    if only:
        names = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in names if n not in LABS]
        if unknown or not names:
            raise click.BadParameter(f"unknown lab(s) {', '.join(unknown) or only!r}: choose from {', '.join(LABS)}",
                                     param_hint="--only")
    if fail_on_drift and not baseline:
        raise click.UsageError("--fail-on-drift needs --baseline")
    reports = [(kind, path) for kind, path in (("json", json_path), ("junit", junit_path),
                                               ("markdown", markdown_path)) if path]
    if output or fmt or not reports:  # the table goes to standard output unless only report files were named
        reports.insert(0, (fmt or "table", output or "-"))
    check_outputs([path for _, path in reports])
    base = load_runs(baseline, max_size) if baseline else None
    chosen = parse_devices(devices)

    def line(run):
        counts = ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts(run).items()))
        errors = f", {len(run.errors)} error(s)" if run.errors else ""
        say(f"{run.lab} on GPU {run.options.get('device', '?')}: {counts or 'no claims'}{errors} ({run.seconds:.2f} s)")

    t0 = time.perf_counter()
    runs = run_check(names, chosen, timeout=timeout, jobs=jobs, progress=line)
    drifted = drift(runs, base) if base is not None else None
    say(f"check: {len(runs)} lab run(s) in {time.perf_counter() - t0:.2f} s")
    write_outputs(check_reports(runs, drifted, reports))
    for d in drifted or ():
        was = f" (was {d['was']})" if "was" in d else ""
        say(one_line(f"drift: {d['claim']}: {d['change']}: now {d['now']}{was}"))
    if any(run.failed for run in runs) or (fail_on_drift and drifted):
        raise SystemExit(EXIT_FAILS)


def check_reports(runs, drifted, reports: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(path, text) for each report check writes: json holds every run, markdown is the CI summary."""
    from ctxlab.record import dumps
    from ctxlab.report import render
    from ctxlab.report.summary import summary_markdown

    def text(fmt: str) -> str:
        if fmt == "json":
            return dumps(runs, as_list=True) + "\n"
        if fmt == "markdown":
            return summary_markdown(runs, drifted)
        return render(runs, fmt)

    return [(path, text(fmt)) for fmt, path in reports]


@cli.group()
def report():
    """Combine recorded results."""


@report.command()
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["markdown", "html"]), default=None,
              help="Format of the matrix --output gets: markdown (default) or a standalone HTML page.")
@output_option
@click.option("--markdown", "markdown_path", type=OutputPath(), default=None,
              help="Also write the matrix as Markdown here.")
@click.option("--html", "html_path", type=OutputPath(), default=None, help="Also write the matrix as HTML here.")
@max_size_option
@domain_errors
def merge(files, fmt, output, markdown_path, html_path, max_size):
    """One matrix of claims against runners from the results of several runners.

    A column is one runner and device (hostname, device index, GPU UUID where
    recorded, driver, runtime); files that share that key stay separate columns,
    marked duplicate. Result files are data from other machines and are treated
    as untrusted. Exit status 1 when any cell fails or errs; all outputs are
    written, or none.
    """
    from ctxlab.loading import load_runs
    from ctxlab.output import check_outputs, write_outputs
    from ctxlab.report.merge import failing, render_html, render_markdown

    reports = [(kind, path) for kind, path in (("markdown", markdown_path), ("html", html_path)) if path]
    if output or fmt or not markdown_path:  # the Markdown goes to standard output unless it went to a file
        reports.insert(0, (fmt or "markdown", output or "-"))
    check_outputs([path for _, path in reports])
    loaded = [(path, load_runs(path, max_size)) for path in files]
    render = {"markdown": render_markdown, "html": render_html}
    write_outputs([(path, render[kind](loaded)) for kind, path in reports])
    if failing(loaded):
        raise SystemExit(EXIT_FAILS)


def main():
    cli(prog_name="ctxlab")


if __name__ == "__main__":
    main()
