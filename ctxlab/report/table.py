"""The human report, with rich: the verdicts first, then figures, errors and the step timelines.

Every text from the record reaches rich as ``Text`` after ``escape.terminal``: a
result file from another machine can neither send escape sequences to the
terminal nor have ``[bold]`` in its data read as markup.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ctxlab.record import LabResult
from ctxlab.report.escape import terminal
from ctxlab.report.text import (
    VERDICT_STYLE,
    cell,
    context_label,
    environment_line,
    figure,
    lab_views,
    short,
    verdict_counts,
)


def t(value, style: str = "") -> Text:
    """Record data as inert rich text."""
    return Text(terminal(value), style=style)


def step_table(run: LabResult, what: str, fields: tuple[str, ...]) -> Table:
    """One row per observation of a kind, its value's fields as columns (the lab's VIEWS)."""
    table = Table(title=t(f"{run.lab}: {what}"), expand=False)
    for column in ("scenario", "thread", "step", "context", *fields):
        table.add_column(t(column.replace("_", " ")), overflow="fold")
    for obs in run.observations:
        if obs.what != what:
            continue
        value = obs.value if isinstance(obs.value, dict) else {}
        table.add_row(t(obs.scenario or ""), t(obs.thread), t(obs.step), t(context_label(obs)),
                      *(t(cell(value.get(f), f)) for f in fields))
        for event in obs.events:
            table.add_row("", "", "  trace", t(short(event, 120)), *([""] * len(fields)), style="dim")
    return table


def timeline(run: LabResult, skip: frozenset[str] | set[str] = frozenset()) -> Table:
    """Every observation whose kind is not in ``skip``, in the order recorded, with its trace events under it."""
    table = Table(title=t(f"{run.lab}: timeline"), show_lines=False, expand=False)
    for column in ("scenario", "round", "thread", "step", "context", "what", "value"):
        table.add_column(column, overflow="fold")
    for obs in run.observations:
        if obs.what in skip:
            continue
        table.add_row(t(obs.scenario or ""), "" if obs.round is None else str(obs.round), t(obs.thread), t(obs.step),
                      t(context_label(obs)), t(obs.what), t(short(obs.value)))
        for event in obs.events:
            table.add_row("", "", "", "", "", "  trace", t(short(event, 120)), style="dim")
    return table


def verdicts(run: LabResult) -> Table:
    """One row per claim: its verdict, id and evidence."""
    table = Table(title=t(f"{run.lab}: claims"), expand=False)
    table.add_column("verdict")
    table.add_column("claim", overflow="fold")
    table.add_column("evidence", overflow="fold")
    for claim in run.claims:
        table.add_row(t(claim.verdict, VERDICT_STYLE.get(claim.verdict, "bold")), t(claim.id), t(claim.evidence))
    return table


def metrics(run: LabResult) -> Table:
    """The run's measured figures, one per row."""
    table = Table(title=t(f"{run.lab}: figures"), expand=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in run.metrics.items():
        table.add_row(t(key), t(figure(value)))
    return table


def print_run(console: Console, run: LabResult) -> None:
    """Verdicts first (what a reader came for), then figures and errors, then the step tables."""
    console.print(Text.assemble((terminal(run.lab), "bold"), f" on {terminal(environment_line(run))} "
                                                            f"({run.seconds:.2f} s)"))
    console.print(verdicts(run))
    counts = ", ".join(f"{n} {v}" for v, n in verdict_counts(run).items())
    console.print(t(f"{len(run.claims)} claims: {counts}"))
    if run.metrics:
        console.print(metrics(run))
    for error in run.errors:
        console.print(Text.assemble(("error", "bold red"),
                                    terminal(f" in {error.get('scenario', run.lab)}: {error.get('message')}")))
        if error.get("output_tail"):
            console.print(t(error["output_tail"], "dim"), highlight=False)
    views = lab_views(run)
    for what, fields in views.items():
        if any(o.what == what for o in run.observations):
            console.print(step_table(run, what, fields))
    if any(o.what not in views for o in run.observations):
        console.print(timeline(run, skip=set(views)))


def render_table(runs: list[LabResult], width: int | None = None) -> str:
    """The runs as the human report, rendered without colour at ``width`` columns (140 by default)."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 140, force_terminal=False, color_system=None)
    for run in runs:
        print_run(console, run)
    return buffer.getvalue()
