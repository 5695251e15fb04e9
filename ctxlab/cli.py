"""The ctxlab command line: one command per lab (migrate, refcount, lifecycle,
modules, interop, peer), trace, audit, check for CI, and doctor, show and report merge.

Exit status: 0 when no documented claim fails, 1 when one does (or a scenario
crashed), 2 for a usage or environment problem (no GPU, bad device, bad file),
3 from audit when it finds a hazard of severity error.
"""

from __future__ import annotations

import functools
import json
import math
import os
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
        from ctxlab.lab import OptionError
        from ctxlab.labs import UnknownLab
        from ctxlab.output import OutputError
        from ctxlab.record import ResultFileError
        from ctxlab.trace import TraceUnavailable

        try:
            return fn(*args, **kwargs)
        except NoGpu as exc:
            raise CtxlabError(f"no usable GPU: {exc} (ctxlab doctor shows what was found)") from None
        except (BadDevice, ResultFileError, OptionError, UnknownLab, TraceUnavailable) as exc:
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
        """Parse a finite number within the bounds; NaN and infinities are refused."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutputPath(click.ParamType):
    """Where a report goes: a file, a device or FIFO (written in place), or - for standard output."""

    name = "PATH"

    def convert(self, value, param, ctx):
        """Accept any path but the empty one (- means standard output)."""
        if value == "":
            self.fail("empty output path: give a file name, or - for standard output", param, ctx)
        return value


class ByteSize(click.ParamType):
    """A size such as 65536, 64K, 64M or 1G (powers of 1024)."""

    name = "SIZE"
    UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}

    def convert(self, value, param, ctx):
        """The size in bytes; an int passes through, a number with a K, M or G suffix is scaled."""
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
        """Accept the list as given once it names at least one thing."""
        if not [part for part in value.split(",") if part.strip()]:
            self.fail(f"{value!r} names nothing: give at least one name", param, ctx)
        return value


def device_option(fn):
    """Add --device: which GPU a command runs on."""
    return click.option("--device", "-d", type=click.IntRange(min=0), default=0, show_default=True,
                        help="Index of the GPU to run on (as the driver numbers them).")(fn)


def trace_option(fn):
    """Add --trace: attach the CUPTI driver calls and resource events to each step."""
    return click.option("--trace", is_flag=True,
                        help="Attach to each step the driver calls and resource events it caused (CUPTI).")(fn)


OUTPUT_HELP = ("Write the report here instead of standard output (- is standard output; a file is replaced "
               "atomically and keeps its mode; a device or FIFO is written in place).")


def output_option(fn):
    """Add --output: where the report goes (standard output by default)."""
    return click.option("--output", "-o", type=OutputPath(), default=None, help=OUTPUT_HELP)(fn)


def repeats_option(fn):
    """Add --repeats: how many fresh-process runs each undefined-behaviour scenario gets."""
    from ctxlab.defaults import DEFAULT_REPEATS

    return click.option("--repeats", type=click.IntRange(1, 100), default=DEFAULT_REPEATS, show_default=True,
                        help="Runs of each scenario in undefined-behaviour territory (use after release, reset or "
                             "destroy), each in a fresh process; its claims judge the distribution of outcomes.")(fn)


def lab_options(fn):
    """What every lab command takes: the GPU, tracing, repeats, the report's format and file."""
    return device_option(trace_option(repeats_option(output_options(fn))))


def program_options(verb: str):
    """The program trace and audit run: -c CODE, -m MODULE, or a SCRIPT and its arguments."""
    def decorate(fn):
        fn = click.argument("script_args", nargs=-1, type=click.UNPROCESSED)(fn)
        fn = click.option("-m", "module", default=None,
                          help=f"{verb} this module, run as a script (like python -m).")(fn)
        return click.option("-c", "code", default=None, help=f"{verb} this Python code.")(fn)

    return decorate


def output_options(fn):
    """Add --format and --output: the report's format and where it goes."""
    fn = output_option(fn)
    fn = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                      help="Report format: a human table, JSON (schema ctxlab/1), JUnit XML or Markdown.")(fn)
    return fn


def max_size_option(fn):
    """Add --max-size: the largest result file a command will read."""
    from ctxlab.defaults import DEFAULT_MAX_BYTES

    return click.option("--max-size", type=ByteSize(), default=f"{DEFAULT_MAX_BYTES // 2**20}M", show_default=True,
                        help="Refuse result files larger than this (e.g. 64M, 1G): they are read whole.")(fn)


def write_report(text: str, output: str | None, what: str) -> None:
    """Write ``text`` to ``output`` through the one writer (standard output when None or -); say where."""
    from ctxlab.output import STDOUT, write_output

    target = output or STDOUT
    write_output(target, text)
    if target != STDOUT:
        say(f"wrote {what} to {target}")


def emit(runs, fmt: str, output: str | None) -> None:
    """Render the runs in ``fmt`` and write them to ``output`` (standard output when None or -)."""
    from ctxlab.report import render

    write_report(render(runs, fmt), output, f"{fmt} report")


def say(message: str) -> None:
    """Write a status line to standard error, so standard output carries only the report."""
    click.echo(message, err=True)


class HandoffProgress:
    """Progress of a long relay: a bar on a terminal, a line a second elsewhere."""

    def __init__(self):
        self.bar = None
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        """Show ``done`` of ``total`` handoffs: update the bar, or print a line at most once a second."""
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
    did, and gives a verdict per claim: holds, fails, changed, observed,
    skipped or error. Exit status 1 means a documented promise failed, a claim
    could not be judged (error) or a scenario broke; 2 a usage or environment
    problem. `ctxlab claims` lists every claim without a GPU.
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
@click.option("--html", "html_path", type=OutputPath(), default=None,
              help="Also write a self-contained HTML page: a timeline of threads by contexts, step by step.")
@click.option("--check", "gate", is_flag=True,
              help="Exit 1 when a recorded claim fails or errs, or a scenario crashed (as the run did).")
@max_size_option
@domain_errors
def show(file: str, fmt: str, output: str | None, html_path: str | None, gate: bool, max_size: int):
    """Render a recorded result FILE (JSON, schema ctxlab/1) as a report.

    Result files are data from other machines and are treated as untrusted: any
    file that is not a valid result is refused with one line and exit status 2.
    Exits 0 after rendering, or with --check 1 when the recorded run failed.
    """
    from ctxlab.loading import load_runs

    runs = load_runs(file, max_size)
    if html_path:
        from ctxlab.output import write_outputs
        from ctxlab.report.timeline import render_html

        write_outputs([(html_path, render_html(runs))])
        say(f"wrote the timeline to {html_path}")
        if not output and fmt == "table":
            if gate and any(run.failed for run in runs):
                raise SystemExit(EXIT_FAILS)
            return
    emit(runs, fmt, output)
    if gate and any(run.failed for run in runs):
        raise SystemExit(EXIT_FAILS)


def lab_exit(runs) -> None:
    """Exit with status 1 when any run failed; return otherwise."""
    if any(run.failed for run in runs):
        raise SystemExit(EXIT_FAILS)


def run_lab(name: str, fmt: str, output: str | None, on_progress=None, **options) -> None:
    """What every lab command does: check the output path, run through the API, report, exit by the verdicts."""
    import ctxlab.api

    if output:
        from ctxlab.record import check_writable

        check_writable(output)
    result = ctxlab.api.run(name, progress=say, on_progress=on_progress, **options)
    emit([result], fmt, output)
    lab_exit([result])


@cli.command()
@click.option("--threads", "-t", type=click.IntRange(1, 1024), default=4, show_default=True,
              help="Host threads that take turns holding the context.")
@click.option("--rounds", "-r", type=click.IntRange(1, 1_000_000), default=3, show_default=True,
              help="How many times the context goes round all threads.")
@click.option("--context", "context", type=click.Choice(["primary", "created", "green", "both", "all"]),
              default="both", show_default=True,
              help="Which context travels: the runtime's primary one, one from cuCtxCreate, a green context (an SM "
                   "partition, with its own scenarios), both (primary and created) or all three.")
@click.option("--timeout", type=FiniteFloat(0.1, 3600), default=30.0, show_default=True,
              help="Seconds a single handoff may take before the run stops, naming the thread and step.")
@lab_options
@domain_errors
def migrate(threads, rounds, context, timeout, fmt, output, **common):
    """Hand a context between host threads; check that state moves with it.

    Thread 1 allocates with CuPy, writes a __device__ global and makes a
    stream; every thread in turn pushes the context, verifies pointers,
    global, stream and values, updates them, pops and hands over. Also: one
    context current on two threads, a thread without the context, CuPy's
    caches under a second context (repeated), and a cross-context dereference,
    each in its own process. With --context green (or all): the same relay of
    a green context, and that context current on two threads at once
    (repeated), the SMs its kernels ran on, which context owns its memory, and
    CuPy under it.
    """
    run_lab("migrate", fmt, output, on_progress=HandoffProgress(), threads=threads, rounds=rounds, context=context,
            timeout=timeout, **common)


@cli.command()
@lab_options
@domain_errors
def refcount(fmt, output, **common):
    """Show what keeps a context alive and what release and reset destroy.

    Each scenario runs in its own process: the runtime's own references to
    the primary context, releasing without a retain, cudaDeviceReset under
    CuPy, cuDevicePrimaryCtxReset, cuCtxAttach/cuCtxDetach and cuCtxDestroy
    on a created context, and whether cudaThreadExit still exists. Scenarios
    that use data after a release, reset or destroy run --repeats times.
    """
    run_lab("refcount", fmt, output, **common)


@cli.command()
@lab_options
@domain_errors
def interop(fmt, output, **common):
    """Show whether CuPy, PyTorch, JAX, Numba and cuda.core share one context, and what survives fork.

    Each library alone in a fresh process (the context it leaves current, its
    allocation's context, a fresh thread's first use, the primary-context
    references it holds), all of them together, DLPack and
    __cuda_array_interface__ exchanges between pairs (same pointer, owning
    context, stream order, a worker thread), each library under a cuCtxCreate
    or green context, each teardown (device reset, primary release or reset,
    cuCtxDestroy) against every library's data (repeated), a child made by fork
    or by each multiprocessing start method (repeated), CUDA IPC handles in a
    spawned child, and which context owns VMM and pool memory. A missing
    library is skipped.
    """
    run_lab("interop", fmt, output, **common)


@cli.command()
@lab_options
@domain_errors
def peer(fmt, output, **common):
    """Show whether peer access between two GPUs belongs to a context and follows it to another thread.

    Runs on --device and the next GPU. A context enables access toward a
    context on the other GPU (twice), moves to another thread, and there copies
    and reads the other GPU's memory; kernels of contexts without access
    (repeated), a primary context reset of either GPU, and each thread's
    current device. Needs 2 GPUs: on one, every claim is skipped with why.
    """
    run_lab("peer", fmt, output, **common)


@cli.command()
@lab_options
@domain_errors
def lifecycle(fmt, output, **common):
    """Show when and by which calls the runtime creates its context, and how to get its handle.

    Each sequence runs in a fresh process: import and first calls (in a new
    interpreter that has imported nothing), cudaFree(0), cudaInitDevice, a
    cuCtxCreate context made first, the handle through cuCtxGetCurrent, a new
    host thread, and device flags before and after activation. --trace shows
    the driver calls beneath.
    """
    run_lab("lifecycle", fmt, output, **common)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--only", type=click.Choice(["context", "all"]), default="context", show_default=True,
              help="For the table: context shows only calls that touch contexts and modules (cuCtx*, "
                   "cuDevicePrimaryCtx*, cuModule*, cuLibrary*, cuKernel*) and resource events; all: every call. "
                   "JSON and Perfetto output always hold every call.")
@click.option("--calls", "calls_mode", type=click.Choice(["context", "all"]), default="context", show_default=True,
              help="What gets a Python callback. context: the functions that make, bind or load into a context, "
                   "and the resource events; every other call is recorded by CUPTI's activity buffers and shows the "
                   "context its thread had current (cheap: about 1x on small CuPy launches on an H200); of the driver "
                   "calls the runtime makes inside its own calls, only those functions are seen. all: every driver "
                   "and runtime call, the runtime's queries beneath its calls too, each with its exact context "
                   "handle; costs a Python call per API call (tens of times slower on small launches).")
@click.option("--thread", "thread_name", default=None, help="Show only the host thread with this name.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "perfetto"]), default="table", show_default=True,
              help="A tree per thread, the ordered calls as JSON, or Chrome/Perfetto trace-event JSON (open it in "
                   "ui.perfetto.dev or chrome://tracing: a track per thread, a track per context).")
@output_option
@program_options("Trace")
@domain_errors
def trace(only, calls_mode, thread_name, fmt, output, code, module, script_args):
    """Run a Python program under CUPTI and show the driver calls beneath its runtime calls.

    \b
      ctxlab trace --only context -- examples/first_context.py [ARGS]
      ctxlab trace -c "import cupy; cupy.arange(3).sum()"
      ctxlab trace --format perfetto -o trace.json -m mypackage.tool [ARGS]

    The program's own output and exit status pass through; the trace follows it,
    and a line on standard error says how many calls were recorded and how long
    the program ran. The program picks its GPUs itself: every context on every
    device is traced.
    """
    from ctxlab.trace import TraceUnavailable
    from ctxlab.tracing_cli import run_traced

    one_program(code, module, script_args, output)
    try:
        status = run_traced(code=code, module=module, argv=list(script_args), only=only, thread=thread_name,
                            fmt=fmt, output=output, echo=click.echo, calls_mode=calls_mode, err=say)
    except TraceUnavailable as exc:
        raise CtxlabError(str(exc)) from None
    except FileNotFoundError as exc:
        raise CtxlabError(f"script not found: {exc.filename}") from None
    raise ProgramRan(status)


AUDIT_HELP = """Run a Python program under the tracer and report CUDA context hazards.

\b
  ctxlab audit -- examples/hazards/no_context.py [ARGS]
  ctxlab audit --format sarif -o audit.sarif -m mypackage.tool [ARGS]
  ctxlab audit -c "import cupy; cupy.arange(3).sum()"

\b
Rules (severity, the lab claim that demonstrates the hazard: ctxlab claims):
{rules}

Each finding names the rule, its severity, the host thread, the user's
file:line, the driver and runtime calls involved and the claim. What the
rules see: every driver and runtime call the program makes (CUPTI activity
records: function, thread, time, status), the context functions and
resource events (a Python callback each: exact context handle and the
user's Python stack), and a few rarely called functions the rules judge
(cuMemAlloc, cuCtxSynchronize, cudaDeviceReset). What they cannot see: a
call with only an activity record (a kernel launch, most runtime calls)
carries no Python stack; its location is the uncaught exception that
named its status, or else the thread's last call that had a stack (marked
approximate); the driver calls the runtime makes beneath its own calls are
seen only for the context functions; pointers passed to kernels are not
inspected. Children forked after CUDA initialised are watched through
os.register_at_fork: the first call into a CUDA library module there is
reported (fork-after-init).

\b
Exit status: 3 when a hazard of severity error is found, 0 otherwise
(warnings and info do not change it), 2 for a usage or environment
problem (no program, missing CUPTI, an output that cannot be written).
The program's own exit status is reported apart, in the report and on
standard error, never as the audit's exit status.
"""


def _audit_help() -> str:
    from ctxlab.audit.rules import RULES

    rules = "\n".join(f"  {r.id} ({r.severity}, {r.claim}): {r.title}" for r in RULES)
    return AUDIT_HELP.format(rules=rules)


class LazyHelpCommand(click.Command):
    """A command whose help text is built when it is shown: ``audit``'s lists the rules, and importing them
    for every ``ctxlab --help`` would cost start-up time (the short help in the command list is given)."""

    def __init__(self, *args, help_text, **kwargs):
        self._help_text = help_text
        self._help: str | None = None
        super().__init__(*args, **kwargs)

    @property
    def help(self) -> str | None:
        """The help text, built the first time it is asked for."""
        if self._help is None:
            self._help = self._help_text()
        return self._help

    @help.setter
    def help(self, value: str | None) -> None:
        pass  # click offers the function's docstring: the help is help_text's


@cli.command(cls=LazyHelpCommand, help_text=_audit_help,
             short_help="Run a Python program under the tracer and report CUDA context hazards.",
             context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--format", "fmt", type=click.Choice(["table", "json", "junit", "sarif"]), default="table",
              show_default=True,
              help="A table for people, JSON (schema ctxlab-audit/1), JUnit XML (a test case per rule) or SARIF "
                   "2.1.0 (for code scanning: results at the user's file:line).")
@output_option
@program_options("Audit")
@domain_errors
def audit(fmt, output, code, module, script_args):
    """Audit a Python program for CUDA context hazards (the help text is AUDIT_HELP with the rules)."""
    from ctxlab.audit.report import render, summary_line
    from ctxlab.audit.run import audit_program
    from ctxlab.output import STDOUT, write_output
    from ctxlab.report.escape import one_line

    one_program(code, module, script_args, output)
    try:
        result = audit_program(code=code, module=module, argv=list(script_args))
    except FileNotFoundError as exc:
        raise CtxlabError(f"script not found: {exc.filename}") from None
    sys.stdout.flush()
    target = output or STDOUT
    write_output(target, render(result, fmt))
    if target != STDOUT:
        say(f"wrote the {fmt} report to {target}")
    say(one_line(summary_line(result)))
    raise ProgramRan(result.exit_code)


@cli.command()
@lab_options
@domain_errors
def modules(fmt, output, **common):
    """Show how and when modules are loaded into a context.

    Each scenario runs in a fresh process: the same module under
    CUDA_MODULE_LOADING=EAGER, LAZY and unset (witnessed by CUPTI's
    MODULE_LOADED and by device memory), one module in two contexts, a
    context-independent library (cuLibraryLoadData) in two contexts, nvcc's
    registration stub and a library built with it (needs nvcc), and CuPy's
    kernel cache under another context (repeated).
    """
    run_lab("modules", fmt, output, **common)


@cli.command()
@click.option("--lab", "lab_names", multiple=True, help="Only this lab's claims (repeat for several).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True, help="A table, JSON, or Markdown.")
@output_option
@domain_errors
def claims(lab_names, fmt, output):
    """List the claims the labs judge: id, statement, source, kind, and the scenarios that decide each.

    Kinds: promise (current documentation promises it: holds or fails), old-text
    (what the old documentation said: holds or changed), observation (nothing
    promised: recorded as observed). Needs no GPU.
    """
    import ctxlab.api
    from ctxlab.claim import catalogue
    from ctxlab.report.catalogue import render_catalogue

    entries = catalogue(ctxlab.api.claims(lab_names or None))
    write_report(render_catalogue(entries, fmt), output, f"{len(entries)} claims")


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
@click.option("--devices", default="0", show_default=True,
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
              help="A recorded check JSON to compare with: every verdict or observed outcome that differs is drift; "
                   "its timings also order the scenarios longest first.")
@click.option("--fail-on-drift", is_flag=True, help="Exit 1 when anything drifted from --baseline.")
@click.option("--profile", is_flag=True,
              help="Print when each scenario's child process started and ended, what it waited for, and the "
                   "critical path (standard error).")
@max_size_option
@domain_errors
def check(devices, only, timeout, jobs, repeats, fmt, output, json_path, junit_path, markdown_path, baseline,
          fail_on_drift, profile, max_size):
    """Run every lab, isolated, and report for CI: exit 1 when a documented claim fails or a lab errors.

    One line per lab as it ends, then the table (or --format to --output).
    --json, --junit and --markdown write further reports; all are written, or
    none. Exit status: 0 when no claim fails and every lab ran, 1 otherwise (or
    on drift with --fail-on-drift), 2 for usage or environment problems such as
    no GPU.

    Each scenario runs in a fresh process, and the driver makes contexts one at
    a time: that bounds check's time. CUDA_DEVICE_MAX_CONNECTIONS=1 (one
    hardware queue per context instead of 8) makes each context about half as
    costly and check about twice as fast; check does not set it for you, and
    each run records the driver variables it was given.
    """
    import ctxlab.api
    from ctxlab.loading import load_runs
    from ctxlab.output import check_outputs, write_outputs
    from ctxlab.report.escape import one_line
    from ctxlab.report.summary import drift_line
    from ctxlab.suite import drift, profile_lines, progress_line, select_labs

    try:
        names = select_labs(only)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--only") from None
    if fail_on_drift and not baseline:
        raise click.UsageError("--fail-on-drift needs --baseline")
    reports = [(kind, path) for kind, path in (("json", json_path), ("junit", junit_path),
                                               ("markdown", markdown_path)) if path]
    if output or fmt or not reports:  # the table goes to standard output unless only report files were named
        reports.insert(0, (fmt or "table", output or "-"))
    check_outputs([path for _, path in reports])
    base = load_runs(baseline, max_size) if baseline else None
    chosen = parse_devices(devices)
    t0 = time.perf_counter()
    schedule: list = []
    runs = ctxlab.api.check(names, chosen, timeout=timeout, jobs=jobs, repeats=repeats, baseline=base,
                            progress=lambda run: say(progress_line(run)), schedule=schedule)
    drifted = drift(runs, base) if base is not None else None
    say(f"check: {len(runs)} lab run(s) in {time.perf_counter() - t0:.2f} s")
    if profile:
        for line in profile_lines(schedule):
            say(line)
    write_outputs(check_reports(runs, drifted, reports))
    for d in drifted or ():
        say(one_line(f"drift: {drift_line(d)}"))
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


def one_program(code: str | None, module: str | None, script_args: tuple, output: str | None) -> None:
    """trace and audit run exactly one program (a SCRIPT, -c CODE or -m MODULE) and check --output first."""
    chosen = [x for x in (code, module, script_args[0] if script_args else None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one program: a SCRIPT (after --), -c CODE or -m MODULE")
    if output:
        from ctxlab.output import check_writable

        check_writable(output)


class ProgramRan(SystemExit):
    """trace and audit end with this once their report is out: the user's program ran in this process."""


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
