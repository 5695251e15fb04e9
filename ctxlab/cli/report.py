"""How the commands write: reports through the one output writer, fitted to the screen they land on, and
status lines on standard error with whatever they quote written out (``escape.shown``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from ctxlab.report.screen import Screen, screen_for

if TYPE_CHECKING:
    from ctxlab.output import Text


def say(message: str) -> None:
    """Write a status line to standard error, so standard output carries only the report."""
    from ctxlab.report.escape import shown

    click.echo(shown(message), err=True)


def screen_of(output: str | None) -> Screen:
    """The screen a report to ``output`` is fitted to: standard output's terminal (its width, colour unless
    NO_COLOR), or for a file, a pipe or a device plain text at COLUMNS or 80 columns."""
    if output in (None, "-"):
        return screen_for(sys.stdout)
    return screen_for(None)


def write_report(text: Text, output: str | None, what: str) -> None:
    """Write ``text`` to ``output`` through the one writer (standard output when None or -); say where."""
    from ctxlab.output import STDOUT, write_output

    target = output or STDOUT
    write_output(target, text)
    if target != STDOUT:
        say(f"wrote {what} to {target}")


def render_for(runs: Sequence[Any], fmt: str, output: str | None, steps: bool = False, full: bool = False,
               drifted: list[dict] | None = None, declared: Mapping | None = None) -> Text:
    """The runs in ``fmt`` from the one registry (``ctxlab.report.formats``): the table fitted to the screen
    ``output`` lands on; the formats that stream as they are written (a large report is never held whole)."""
    from ctxlab.report.formats import View, write

    return write(list(runs), fmt, View(screen=screen_of(output), steps=steps, full=full, drifted=drifted,
                                       declared=declared))


def emit(runs: Sequence[Any], fmt: str, output: str | None, steps: bool = False, full: bool = False) -> None:
    """Render the runs in ``fmt`` and write them to ``output`` (standard output when None or -)."""
    write_report(render_for(runs, fmt, output, steps, full), output, f"{fmt} report")


class HandoffProgress:
    """Progress of a long relay: a bar on a terminal, a line a second elsewhere."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.task: Any = None
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
