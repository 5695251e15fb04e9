"""The options several ctxlab commands share, each with one meaning and one help text everywhere."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ctxlab.cli.types import ByteSize, FiniteFloat, OutputPath, ResultPath
from ctxlab.report import FORMATS

F = TypeVar("F", bound=Callable[..., Any])

OUTPUT_HELP = ("Write the report here instead of standard output (- is standard output; a file is replaced "
               "atomically and keeps its mode; a device or FIFO is written in place).")
STEPS_HELP = ("Also show the step tables and the timeline of every observation (the table only; after the "
              "claims). Without it the table shows the claims and a closing summary.")
FULL_HELP = "Show every statement and evidence sentence whole (the table cuts them to fit the terminal)."


def device_option(fn: F) -> F:
    """Add --device: which GPU a command runs on."""
    return click.option("--device", "-d", type=click.IntRange(0, 1023), default=0, show_default=True,
                        metavar="N", help="Index of the GPU to run on (as the driver numbers them).")(fn)


def trace_option(fn: F) -> F:
    """Add --trace: attach the CUPTI driver calls and resource events to each step."""
    return click.option("--trace", is_flag=True,
                        help="Attach to each step the driver calls and resource events it caused (CUPTI).")(fn)


def output_option(fn: F) -> F:
    """Add --output: where the report goes (standard output by default)."""
    return click.option("--output", "-o", type=OutputPath(), default=None, help=OUTPUT_HELP)(fn)


def repeats_option(fn: F) -> F:
    """Add --repeats: how many fresh-process runs each undefined-behaviour scenario gets."""
    from ctxlab.defaults import DEFAULT_REPEATS

    return click.option("--repeats", type=click.IntRange(1, 100), default=DEFAULT_REPEATS, show_default=True,
                        help="Runs of each scenario in undefined-behaviour territory (use after release, reset or "
                             "destroy), each in a fresh process; its claims judge the distribution of outcomes.")(fn)


def table_options(fn: F) -> F:
    """Add --steps and --full: what the human table shows beyond the claims and the summary."""
    fn = click.option("--full", is_flag=True, help=FULL_HELP)(fn)
    return click.option("--steps", is_flag=True, help=STEPS_HELP)(fn)


def output_options(fn: F) -> F:
    """Add --format, --output, --steps and --full: the report's format, where it goes, what the table shows."""
    fn = table_options(fn)
    fn = output_option(fn)
    fn = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                      help="Report format: a human table, JSON (schema ctxlab/1), JUnit XML, Markdown or OpenMetrics "
                           "(for Prometheus).")(fn)
    return fn


def program_options(verb: str) -> Callable[[F], F]:
    """The program trace and audit run: -c CODE, -m MODULE, or a SCRIPT and its arguments."""
    def decorate(fn: F) -> F:
        fn = click.argument("script_args", nargs=-1, type=click.UNPROCESSED)(fn)
        fn = click.option("-m", "module", default=None,
                          help=f"{verb} this module, run as a script (like python -m).")(fn)
        return click.option("-c", "code", default=None, help=f"{verb} this Python code.")(fn)

    return decorate


def run_limits(fn: F) -> F:
    """Add --timeout and --stall: when trace and audit stop a program that hangs (0: never); and
    --record-limit: the disk the flight recording may take."""
    from ctxlab.tracing.recorder import RECORD_LIMIT_LEAST
    from ctxlab.tracing.supervise import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S

    fn = click.option("--record-limit", type=ByteSize(least=RECORD_LIMIT_LEAST,
                                                      too_large="is more than 1024G (give less, or leave the "
                                                                "option out: half the free disk is the default)"),
                      default=None, metavar="SIZE",
                      help="The most disk the flight recording may take (e.g. 512M, 4G; at least 1M). Default: "
                           "half the free space where it lies, at most about 4.4G. Calls past it are not "
                           "recorded; the report says how many, and judges what was.")(fn)
    fn = click.option("--stall", type=FiniteFloat(0, 864000), default=DEFAULT_STALL_S, show_default=True,
                      metavar="SECONDS",
                      help="Stop the program when a thread has been inside one CUDA call this long while no CUDA "
                           "call returned anywhere; every thread's stack and call is reported. 0: never.")(fn)
    return click.option("--timeout", type=FiniteFloat(0, 864000), default=DEFAULT_TIMEOUT_S,
                        show_default=True, metavar="SECONDS",
                        help="Stop the program after this long (its threads' calls and stacks are reported, "
                             "then it is killed). 0: no limit.")(fn)


def max_size_option(fn: F) -> F:
    """Add --max-size: the largest result file a command will read."""
    from ctxlab.defaults import DEFAULT_MAX_BYTES

    return click.option("--max-size", type=ByteSize(), default=f"{DEFAULT_MAX_BYTES // 2**20}M", show_default=True,
                        help="Refuse result files larger than this (e.g. 64M, 1G; at most 1024G): they are read "
                             "whole.")(fn)


def former_name(old: str, new: str, param: str, type_: Any) -> Callable[[F], F]:
    """Keep ``old``, an option's former spelling, as a hidden alias of ``new`` (whose value is the
    command's ``param``): it gives ``param`` its value, with a note on standard error; both at once is a
    usage error. The alias has ``new``'s type, so it refuses what ``new`` refuses, naming itself."""
    dest = f"former_{param}"

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(dest, None)
            if value is not None:
                ctx = click.get_current_context()
                if ctx.get_parameter_source(param) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(f"{old} is the former name of {new}: give {new} only")
                from ctxlab.cli.report import say

                say(f"note: {ctx.command_path}'s {old} is now {new} ({old} still works)")
                kwargs[param] = value
            return fn(*args, **kwargs)

        return click.option(old, dest, type=type_, default=None, hidden=True,
                            help=f"Former name of {new}.")(wrapper)  # type: ignore[return-value]

    return decorate


OVERWRITE_INPUT_HELP = ("Let an output replace a result file this command reads (without it, naming one of them as "
                        "an output is refused: a slip of -o would destroy the record).")


def _named(value: Any) -> list[str]:
    return [v for v in (value if isinstance(value, (tuple, list)) else (value,)) if v]


def _same_file(a: str, b: str) -> bool:
    from ctxlab.output import file_identity

    if a != "-" and b != "-" and os.path.realpath(a) == os.path.realpath(b):
        return True
    mine, theirs = file_identity(a), file_identity(b)
    return mine is not None and mine == theirs


def refuse_input_as_output(ctx: click.Context) -> None:
    """A usage error when an output option (``OutputPath``) names a file a ``ResultPath`` parameter reads."""
    inputs = [path for p in ctx.command.params if isinstance(p.type, ResultPath)
              for path in _named(ctx.params.get(p.name or ""))]
    for param in ctx.command.params:
        if not isinstance(param.type, OutputPath):
            continue
        for output in _named(ctx.params.get(param.name or "")):
            for source in inputs:
                if _same_file(output, source):
                    also = "" if output == source else f" ({source})"
                    raise click.BadParameter(f"{output!r} is a result file this command reads{also}: give "
                                             "--overwrite-input to replace it", ctx=ctx, param=param)


def overwrite_input_option(fn: F) -> F:
    """Add --overwrite-input: without it, an output that is one of the command's input files is a usage error."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.pop("overwrite_input", False):
            refuse_input_as_output(click.get_current_context())
        return fn(*args, **kwargs)

    return click.option("--overwrite-input", "overwrite_input", is_flag=True,
                        help=OVERWRITE_INPUT_HELP)(wrapper)  # type: ignore[return-value]
