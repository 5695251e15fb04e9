"""The commands that run a user's program in this process, trace and audit, and what they share: one program
to run, why the tracer cannot start, and the exit that ends them once their report is out."""

from __future__ import annotations

import os
import sys

import click

from ctxlab.cli.help import LazyHelpCommand, audit_help
from ctxlab.cli.options import former_name, output_option, program_options, run_limits
from ctxlab.cli.report import say
from ctxlab.cli.types import CtxlabError, OneLineCommand, domain_errors, no_gpu_line


def one_program(code: str | None, module: str | None, script_args: tuple, output: str | None,
                timeout: float | None = None) -> None:
    """trace and audit run exactly one program (a SCRIPT, -c CODE or -m MODULE) and check --output and the
    program itself first; --timeout 0 is said at once (no limit)."""
    chosen = [x for x in (code, module, script_args[0] if script_args else None) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one program: a SCRIPT (after --), -c CODE or -m MODULE")
    if code is None and module is None and os.path.isdir(script_args[0]):
        raise CtxlabError(f"{script_args[0]}: is a directory, not a Python script (give the script's file, "
                          "or -m MODULE)")
    if output:
        from ctxlab.output import check_writable

        check_writable(output)
    program_errors(code, module, script_args[0] if script_args else None)
    if timeout == 0:
        say("--timeout 0: no time limit (--stall still stops a program stuck inside a CUDA call)")


def program_errors(code: str | None, module: str | None, script: str | None) -> None:
    """The program's own mistakes, said before any GPU work: a script that is missing or does not compile,
    code given with -c that does not compile, a -m module that cannot be found (its top-level package; a
    submodule is looked up by the program's own import, as Python does)."""
    import importlib.util

    if script is not None:
        try:
            with open(script, "rb") as handle:
                source = handle.read()
        except FileNotFoundError:
            raise CtxlabError(f"script not found: {script}") from None
        except OSError as exc:
            raise CtxlabError(f"{script}: cannot read ({exc.strerror or exc})") from None
        _compiles(source, script)
    elif code is not None:
        _compiles(code.encode("utf-8", "surrogatepass"), "-c")
    elif module is not None:
        import importlib.machinery

        top = module.split(".")[0]
        try:  # python -m looks in the working directory first
            found = (importlib.util.find_spec(top) or importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
                     if top.isidentifier() else None)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise CtxlabError(f"-m {module}: no module named {top!r} (on this Python's path: {sys.executable})")


def _compiles(source: bytes, name: str) -> None:
    try:
        compile(source, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{name}:{exc.lineno}" if exc.lineno else name
        raise CtxlabError(f"{where}: {type(exc).__name__}: {exc.msg} (the program does not compile)") from None
    except ValueError as exc:  # a NUL byte in the source
        raise CtxlabError(f"{name}: {exc} (the program does not compile)") from None


def tracer_unavailable(exc: Exception) -> CtxlabError:
    """Why trace or audit cannot run: the no-GPU line every command gives where there is no GPU (CUPTI
    cannot subscribe without one), else what the tracer said."""
    from ctxlab.cuda.environment import NoGpu, device_count

    try:
        count = device_count()
    except NoGpu as none:
        return CtxlabError(no_gpu_line(none))
    except Exception:  # the driver broke in some other way: what the tracer said is the better line
        count = 1
    if count == 0:
        return CtxlabError(no_gpu_line("the driver reports no GPU"))
    return CtxlabError(" ".join(str(exc).split()))


class ProgramRan(SystemExit):
    """trace and audit end with this once their report is out: the user's program ran in this process."""


@click.command(cls=OneLineCommand, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--show", "only", type=click.Choice(["context", "all"]), default="context", show_default=True,
              help="Which calls the table shows: context shows only calls that touch contexts and modules (cuCtx*, "
                   "cuDevicePrimaryCtx*, cuModule*, cuLibrary*, cuKernel*) and resource events; all: every call. "
                   "JSON and Perfetto output always hold every call.")
@click.option("--calls", "calls_mode", type=click.Choice(["context", "all"]), default="context", show_default=True,
              help="Which calls carry the user's Python stack. Every driver and runtime call is recorded either "
                   "way, by ctxlab's C callback, with its exact context. context: the functions that make, bind or "
                   "load into a context, failing calls and the resource events; all: every call (a stack walk per "
                   "call: slower on small launches).")
@click.option("--thread", "thread_name", default=None, help="Show only the host thread with this name.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "perfetto"]), default="table", show_default=True,
              help="A tree per thread, the ordered calls as JSON, or Chrome/Perfetto trace-event JSON (open it in "
                   "ui.perfetto.dev or chrome://tracing: a track per thread, a track per context).")
@former_name("--only", "--show", "only", click.Choice(["context", "all"]))
@output_option
@program_options("Trace")
@domain_errors
@run_limits
def trace(only, calls_mode, thread_name, fmt, output, timeout, stall, record_limit, code, module, script_args):
    """Run a Python program under CUPTI and show the driver calls beneath its runtime calls.

    \b
      ctxlab trace --show all -- examples/first_context.py [ARGS]
      ctxlab trace -c "import cupy; cupy.arange(3).sum()"
      ctxlab trace --format perfetto -o trace.json -m mypackage.tool [ARGS]

    The program's own output and exit status pass through; the trace follows it,
    and a line on standard error says how many calls were recorded and how long
    the program ran. The program picks its GPUs itself: every context on every
    device is traced. It runs in a child process whose calls reach the trace
    through shared memory, so a program that crashes or hangs still shows
    every call up to then.
    """
    from ctxlab.cli.tracing import run_traced
    from ctxlab.tracing.tracer import TraceUnavailable

    one_program(code, module, script_args, output, timeout)
    try:
        status = run_traced(code=code, module=module, argv=list(script_args), only=only, thread=thread_name,
                            fmt=fmt, output=output, echo=click.echo, calls_mode=calls_mode, err=say,
                            timeout=timeout, stall=stall, record_limit=record_limit)
    except TraceUnavailable as exc:
        raise tracer_unavailable(exc) from None
    except FileNotFoundError as exc:
        raise CtxlabError(f"script not found: {exc.filename}") from None
    raise ProgramRan(status)


@click.command(cls=LazyHelpCommand, help_text=audit_help,
             short_help="Run a Python program under the tracer and report CUDA context hazards.",
             context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--format", "fmt", type=click.Choice(["table", "json", "junit", "sarif"]), default="table",
              show_default=True,
              help="A table for people, JSON (schema ctxlab-audit/1), JUnit XML (a test case per rule) or SARIF "
                   "2.1.0 (for code scanning: results at the user's file:line).")
@click.option("--pin", is_flag=True, default=False,
              help="When a kernel faulted (a sticky error), run the program again with launches serialised "
                   "(CUDA_LAUNCH_BLOCKING=1) and name the launch that faulted.")
@run_limits
@output_option
@program_options("Audit")
@domain_errors
def audit(fmt, pin, timeout, stall, record_limit, output, code, module, script_args):
    """Audit a Python program for CUDA context hazards (the help text is AUDIT_HELP with the rules)."""
    from ctxlab.audit.report import render, summary_line
    from ctxlab.audit.run import audit_program
    from ctxlab.output import STDOUT, write_output
    from ctxlab.report.escape import one_line
    from ctxlab.tracing.tracer import TraceUnavailable

    one_program(code, module, script_args, output, timeout)
    try:
        result = audit_program(code=code, module=module, argv=list(script_args), timeout=timeout, stall=stall,
                               pin=pin, record_limit=record_limit)
    except TraceUnavailable as exc:
        raise tracer_unavailable(exc) from None
    except FileNotFoundError as exc:
        raise CtxlabError(f"script not found: {exc.filename}") from None
    sys.stdout.flush()
    target = output or STDOUT
    from ctxlab.report.screen import screen_for

    write_output(target, render(result, fmt, screen_for(sys.stdout if target == STDOUT else None)))
    if target != STDOUT:
        say(f"wrote the {fmt} report to {target}")
    say(one_line(summary_line(result)))
    raise ProgramRan(result.exit_code)
