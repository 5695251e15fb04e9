"""Help texts built when they are shown: ``audit``'s lists every rule, and importing the rules for every
``ctxlab --help`` would cost start-up time; and what a command group called alone says (``ctxlab``,
``ctxlab report``): one line naming its commands, exit status 2 as for any usage error, not a screen of
help nobody asked for."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import click

from ctxlab.cli.types import EXIT_USAGE, OneLineCommand, OneLineGroup

AUDIT_HELP = """Run a Python program under the tracer and report CUDA context hazards.

\b
  ctxlab audit -- examples/hazards/no_context.py [ARGS]
  ctxlab audit --format sarif -o audit.sarif -m mypackage.tool [ARGS]
  ctxlab audit -c "import cupy; cupy.arange(3).sum()"
  ctxlab audit --pin --timeout 120 -- train.py

\b
Rules (severity, the lab claim that demonstrates the hazard: ctxlab claims):
{rules}

The program runs in a child process. ctxlab's C callback records every
driver and runtime call it makes (function, thread, exact context,
status, the parameters the rules follow, the user's Python stack of the
context functions, launches, failing calls and the first call of each
kind) into shared memory as it happens; this process replays the calls
into a model of each thread's CUDA state and judges, whatever the end:
an exit, an exception, os._exit, a crash (a signal: faulthandler's
stacks of every thread are kept) or a hang (--timeout, --stall: each
thread's call in progress and Python stack). Every failing call is a
finding with the state it met, unless a library made it on purpose and
handled it (a successful call around it, or the probe catalogue): those
are listed apart as probes. Each finding names the rule, its severity,
the host thread, the user's file:line, the calls involved and the claim.
What the rules cannot see: a call made on a thread whose stack could not
be taken carries no Python stack (its location is the thread's last call
that had one, marked approximate); pointers stored in device memory are
not followed. Children forked after CUDA initialised are watched through
os.register_at_fork: the first call into a CUDA library module there is
reported (fork-after-init).

\b
Exit status: 3 when a hazard of severity error is found, 0 otherwise
(warnings and info do not change it), 2 for a usage or environment
problem (no program, missing CUPTI, an output that cannot be written).
The program's own exit status is reported apart, in the report and on
standard error, never as the audit's exit status.
"""


def audit_help() -> str:
    """audit's help text, with the rules listed."""
    from ctxlab.audit.rules.catalogue import RULES

    rules = "\n".join(f"  {r.id} ({r.severity}, {r.claim}): {r.title}" for r in RULES)
    return AUDIT_HELP.format(rules=rules)


class LazyHelpCommand(OneLineCommand):
    """A command whose help text is built when it is shown: ``audit``'s lists the rules, and importing them
    for every ``ctxlab --help`` would cost start-up time (the short help in the command list is given)."""

    def __init__(self, *args: Any, help_text: Callable[[], str], **kwargs: Any):
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


def commands_line(ctx: click.Context) -> str:
    """What a group called alone says: its path, its commands, and where the help is."""
    group = ctx.command
    names = [] if not isinstance(group, click.Group) else [
        n for n in group.list_commands(ctx) if (command := group.get_command(ctx, n)) is not None
        and not command.hidden]
    path = ctx.command_path
    return f"{path} needs a command, one of: {', '.join(names)} (try '{path} --help')"


class GroupAlone(click.UsageError):
    """A command group called without a command: one line on standard error, exit status 2."""

    exit_code = EXIT_USAGE

    def __init__(self, ctx: click.Context):
        super().__init__(commands_line(ctx), ctx)

    def show(self, file: IO[Any] | None = None) -> None:
        """``Error: ctxlab report needs a command, one of: merge (try 'ctxlab report --help')``."""
        from ctxlab.report.escape import shown

        click.echo(f"Error: {shown(self.format_message())}", file=file, err=file is None)


class CommandsGroup(OneLineGroup):
    """The top command group: called alone, or with one of its groups alone, it names their commands in one
    line (Click would print the whole help and exit 2; Click 8.2+ raises NoArgsIsHelpError for it)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse as OneLineGroup does; no command at all is GroupAlone."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            raise GroupAlone(exc.ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a group under this one called alone is GroupAlone."""
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError as exc:
            raise GroupAlone(exc.ctx) from None
