"""The human report: a timeline of observations and the verdicts, with rich."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from ctxlab.record import LabResult
from ctxlab.report.text import VERDICT_STYLE, cell, context_label, environment_line, lab_views, short, verdict_counts


def step_table(run: LabResult, what: str, fields: tuple[str, ...]) -> Table:
    """One row per observation of a kind, its value's fields as columns (the lab's VIEWS)."""
    table = Table(title=f"{run.lab}: {what}", expand=False)
    for column in ("scenario", "thread", "step", "context", *fields):
        table.add_column(column.replace("_", " "), overflow="fold")
    for obs in run.observations:
        if obs.what != what:
            continue
        value = obs.value if isinstance(obs.value, dict) else {}
        table.add_row(obs.scenario or "", obs.thread, obs.step, context_label(obs), *(cell(value.get(f)) for f in fields))
        for event in obs.events:
            table.add_row("", "", "  trace", short(event, 120), *([""] * len(fields)), style="dim")
    return table


def timeline(run: LabResult, skip: set[str] = frozenset()) -> Table:
    table = Table(title=f"{run.lab}: timeline", show_lines=False, expand=False)
    for column in ("scenario", "round", "thread", "step", "context", "what", "value"):
        table.add_column(column, overflow="fold")
    for obs in run.observations:
        if obs.what in skip:
            continue
        table.add_row(obs.scenario or "", "" if obs.round is None else str(obs.round), obs.thread, obs.step,
                      context_label(obs), obs.what, short(obs.value))
        for event in obs.events:
            table.add_row("", "", "", "", "", "  trace", short(event, 120), style="dim")
    return table


def verdicts(run: LabResult) -> Table:
    table = Table(title=f"{run.lab}: claims", expand=False)
    table.add_column("verdict")
    table.add_column("claim", overflow="fold")
    table.add_column("evidence", overflow="fold")
    for claim in run.claims:
        table.add_row(f"[{VERDICT_STYLE[claim.verdict]}]{claim.verdict}[/]", claim.id, claim.evidence)
    return table


def metrics(run: LabResult) -> Table:
    table = Table(title=f"{run.lab}: figures", expand=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in run.metrics.items():
        table.add_row(key, f"{value:,.1f}" if isinstance(value, float) else short(value))
    return table


def print_run(console: Console, run: LabResult) -> None:
    console.print(f"[bold]{run.lab}[/] on {environment_line(run)} ({run.seconds:.2f} s)")
    views = lab_views(run)
    for what, fields in views.items():
        if any(o.what == what for o in run.observations):
            console.print(step_table(run, what, fields))
    if any(o.what not in views for o in run.observations):
        console.print(timeline(run, skip=set(views)))
    if run.metrics:
        console.print(metrics(run))
    for error in run.errors:
        console.print(f"[bold red]error[/] in {error.get('scenario', run.lab)}: {error.get('message')}")
        if error.get("output_tail"):
            console.print(error["output_tail"], markup=False, highlight=False, style="dim")
    console.print(verdicts(run))
    counts = ", ".join(f"{n} {v}" for v, n in verdict_counts(run).items())
    console.print(f"{len(run.claims)} claims: {counts}")


def render_table(runs: list[LabResult], width: int | None = None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width or 140, force_terminal=False, color_system=None)
    for run in runs:
        print_run(console, run)
    return buffer.getvalue()
