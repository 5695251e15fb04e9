"""What every ctxlab command shares at its boundary: one-line errors and the option types Click validates.

Every error a user can cause ends in one line on standard error, ``Error: ...``, with exit status 2:
Click's own usage errors too (its usage line, hint and blank line are folded into that line), and every
text that line quotes from the user (a file name, an option's value) goes through ``escape.shown``, so
an escape sequence in it is written out, never obeyed.
"""

from __future__ import annotations

import errno
import functools
import math
import sys
from collections.abc import Callable
from typing import IO, Any, TypeVar

import click

EXIT_FAILS = 1
EXIT_USAGE = 2
MAX_BYTES_ACCEPTED = 2**40  # --max-size: a result file is read whole into memory; 1024G is already absurd

F = TypeVar("F", bound=Callable[..., Any])


def _shown(text: object) -> str:
    from ctxlab.report.escape import shown

    return shown(text)


class CtxlabError(click.ClickException):
    """A user or environment problem: one line, exit status 2, no traceback."""

    exit_code = EXIT_USAGE

    def show(self, file: IO[Any] | None = None) -> None:
        """``Error: <message>`` on one line, control characters written out."""
        click.echo(f"Error: {_shown(self.format_message())}", file=file, err=file is None)


class OneLineUsageError(click.UsageError):
    """Click's usage error as one line: ``Error: <message> (try 'ctxlab CMD --help')``."""

    def __init__(self, original: click.UsageError):
        super().__init__(original.format_message(), original.ctx)
        setattr(self, "exit_code", original.exit_code)  # noqa: B010 (a class variable in newer Click)

    def show(self, file: IO[Any] | None = None) -> None:
        """The error and the hint on one line, control characters written out."""
        message = _shown(self.format_message())
        ctx = self.ctx
        if ctx is not None and ctx.command.get_help_option(ctx) is not None:
            message += f" (try '{_shown(ctx.command_path)} --help')"
        click.echo(f"Error: {message}", file=file, err=file is None)


def _with_context(exc: click.UsageError, ctx: click.Context) -> click.UsageError:
    if exc.ctx is None:  # Click's parser raises some (an option without its value) without one: the hint needs it
        exc.ctx = ctx
    return exc


class OneLineCommand(click.Command):
    """A command whose usage errors always know their command (for the hint ``OneLineGroup`` folds in)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse as Click does; a usage error is given this command's context."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _with_context(exc, ctx) from None


# What writing to standard output can meet (a full disk, a quota, a file too large, a device gone): one line,
# exit status 2, however far the command got. EPIPE (the reader went away) ends it quietly with 141 instead.
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ENXIO})


def output_failure(exc: OSError) -> BaseException | None:
    """What a failed write to standard output or error ends the command with, or None for another OSError
    (one that names a file is a file's, not the output's)."""
    from ctxlab.interrupts import reader_gone

    if exc.errno == errno.EPIPE:
        return reader_gone()
    if exc.errno in OUTPUT_ERRNOS and exc.filename is None:
        return CtxlabError(f"cannot write output: -: {exc.strerror or exc}")
    return None


def flush_output() -> None:
    """Standard output's last bytes out before the process ends: a failure is the command's, said in one line
    with status 2 (or, for a reader gone, 141), never Python's "Exception ignored" at exit."""
    stream = sys.stdout
    if stream is None or getattr(stream, "closed", False):  # started with it closed: said so already
        return
    try:
        stream.flush()
    except ValueError:  # closed under it
        return
    except OSError as exc:
        failure = output_failure(exc)
        if isinstance(failure, CtxlabError):
            try:
                failure.show()
            except OSError:
                pass
            raise SystemExit(failure.exit_code) from None
        if failure is not None:
            raise failure from None
        raise


class OneLineGroup(click.Group):
    """The command group whose every usage error, its subcommands' included, shows as one line."""

    command_class = OneLineCommand
    group_class = type  # subgroups are OneLineGroups too

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse as Click does; a usage error is given this group's context."""
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise _with_context(exc, ctx) from None

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse the group's own options; a usage error becomes one line."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # no command at all: Click shows the help, as it should
        except click.UsageError as exc:
            raise OneLineUsageError(exc) from None
        except OSError as exc:  # --help or --version written to a full disk or a closed pipe
            failure = output_failure(exc)
            if failure is None:
                raise
            raise failure from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list with each command's whole first sentence (Click cuts them at 45 characters)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        """Run the command line with ``ctxlab.interrupts``' endings: a signal or a reader that went away ends
        it quietly with the shell's status (130, 143, 141) once its cleanup ran. Without ``args`` it is this
        process's own command line, and the process ends with it."""
        from ctxlab.interrupts import handling_signals

        with handling_signals(process_exit=args is None):
            try:
                return super().main(args, *rest, **kwargs)
            finally:
                flush_output()

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a usage error while parsing it (or raised by it) becomes one line."""
        from ctxlab.interrupts import EXIT_INTERRUPTED, Ended, reader_gone

        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # before Click's own handler makes it "Aborted!" and status 1
            raise Ended(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            raise reader_gone() from None
        except OSError as exc:  # a write to standard output (a command's --help, its echo) that failed
            failure = output_failure(exc)
            if failure is None:
                raise
            raise failure from None
        except (click.exceptions.NoArgsIsHelpError, OneLineUsageError):
            raise
        except click.UsageError as exc:
            raise OneLineUsageError(exc) from None
        except click.ClickException as exc:
            if isinstance(exc, CtxlabError):
                raise
            error = CtxlabError(exc.format_message())
            setattr(error, "exit_code", exc.exit_code)  # noqa: B010 (a class variable in newer Click)
            raise error from None


def no_gpu_line(exc: object) -> str:
    """The one line every command gives on a machine without a usable GPU."""
    return f"no usable GPU: {exc} (ctxlab doctor shows what was found)"


def domain_errors(fn: F) -> F:
    """Turn the errors a user can cause or meet into CtxlabError at the command boundary."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ctxlab.cuda.environment import BadDevice, NoGpu
        from ctxlab.errors import OptionError
        from ctxlab.labs import UnknownLab
        from ctxlab.output import OutputError
        from ctxlab.records.model import ResultFileError
        from ctxlab.tracing.tracer import TraceUnavailable

        try:
            return fn(*args, **kwargs)
        except NoGpu as exc:
            raise CtxlabError(no_gpu_line(exc)) from None
        except OptionError as exc:  # the line naming the command-line option, not the Python parameter
            raise CtxlabError(" ".join(exc.cli.split())) from None
        except (BadDevice, ResultFileError, UnknownLab, TraceUnavailable) as exc:
            raise CtxlabError(" ".join(str(exc).split())) from None
        except BrokenPipeError:  # a reader of standard output or error went away: stop quietly
            from ctxlab.interrupts import reader_gone

            raise reader_gone() from None
        except OutputError as exc:
            raise CtxlabError(f"cannot write output: {' '.join(str(exc).split())}") from None
        except OSError as exc:
            raise CtxlabError(f"cannot write output: {exc.strerror or exc}") from None

    return wrapper  # type: ignore[return-value]


class FiniteFloat(click.FloatRange):
    """A FloatRange that refuses NaN and infinities (Click's own lets NaN through every bound)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Parse a finite number within the bounds; NaN and infinities are refused."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class OutputPath(click.ParamType):
    """Where a report goes: a file, a device or FIFO (written in place), or - for standard output."""

    name = "PATH"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Accept any path but the empty one (- means standard output)."""
        if value == "":
            self.fail("empty output path: give a file name, or - for standard output", param, ctx)
        return value


class ResultPath(click.ParamType):
    """A result file to read: any path but the empty one (it is opened, size-checked and validated later)."""

    name = "FILE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Refuse the empty path here, where the option can be named."""
        if value == "":
            self.fail("empty file name: give the path of a result file (JSON, schema ctxlab/1)", param, ctx)
        return value


class ByteSize(click.ParamType):
    """A size such as 65536, 64K, 64M or 1G (powers of 1024), at most 1024G (``least``/``most`` and what the
    size is of, for the message, where an option bounds something else than a result file)."""

    name = "SIZE"
    UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}

    def __init__(self, least: int = 1, most: int = MAX_BYTES_ACCEPTED,
                 too_large: str = "is more than the 1024G a result file may be (it is read whole)") -> None:
        self.least, self.most, self.too_large = least, most, too_large

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The size in bytes; an int passes through, a number with a K, M or G suffix is scaled."""
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")  # 64M, 64MB and 64MiB alike
        unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
        number = text[: len(text) - len(unit)]
        if not number.isascii() or not number.isdigit() or len(number) > 20 or int(number) <= 0:
            self.fail(f"{value!r} is not a size such as 65536, 64K, 64M or 1G", param, ctx)
        size = int(number) * self.UNITS[unit]
        if size > self.most:
            self.fail(f"{value!r} {self.too_large}", param, ctx)
        if size < self.least:
            self.fail(f"{value!r} is less than the {self.least // 2**20}M it must be at least", param, ctx)
        return size


class NameList(click.ParamType):
    """A comma-separated list with at least one name (an empty list is a mistake, not "all")."""

    name = "NAMES"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Accept the list as given once it names at least one thing."""
        if not [part for part in value.split(",") if part.strip()]:
            self.fail(f"{value!r} names nothing: give at least one name", param, ctx)
        return value
