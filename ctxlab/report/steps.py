"""The step tables and the timeline of a run (``--steps``), as plain columns that fit the screen.

A step table is one row per observation of a kind, its value's fields as columns (the lab's views); the
timeline is every other observation in the order recorded, with its trace events under it. When the
columns cannot fit the screen at a readable width, each row is stacked: the step on one line, its fields
folded under it. The work per observation is bounded (each value is cut before it is laid out, at most
``EVENTS`` trace events under a step), and so is each table (``ROWS`` observations; a line says how many
more there are, and where they all are): a screen is no place for a quarter of a million rows. A name
(scenario, thread, step, kind, field) is cut after ``text.NAME_CHARS`` characters, saying so.
"""

from __future__ import annotations

from ctxlab.records.model import LabResult, Observation
from ctxlab.report.escape import terminal
from ctxlab.report.screen import Cell, Screen, fit, grid, natural_widths, title, wrap
from ctxlab.report.text import cell, context_label, lab_views, name, short

MIN_COLUMN = 8  # below this a column is unreadable: stack the rows instead
ROWS = 1000  # observations per table on a screen (a recorded check has 645 in all)
EVENTS = 20  # trace events shown under one step


def _more(count: int, what: str, screen: Screen) -> list[str]:
    """The line under a table cut at ``ROWS``: how many rows are not shown, and where they are."""
    text = f"... and {count:,} more {what} (--format markdown or json has every one)"
    return [screen.paint(line, "dim") for line in wrap(text, screen.width)]


def _table(heading: str, headers: list[str], rows: list[list[Cell]], screen: Screen) -> list[str]:
    lines = title(heading, screen)
    header = [Cell(h, "dim") for h in headers]
    natural = natural_widths([header, *rows], cap=60)
    widths = fit(natural, screen.width)
    readable = all(w >= min(MIN_COLUMN, n) for w, n in zip(widths, natural, strict=True))
    if readable and sum(widths) + 2 * (len(widths) - 1) <= screen.width:  # fit's floor may not fit a narrow one
        return lines + grid([header, *rows], widths, screen)
    for row in rows:  # stacked: the first four cells on a line, the rest as "name: value" under it
        head = "  ".join(c.text for c in row[:4] if c.text)
        lines += wrap(head, screen.width)
        for header_text, c in zip(headers[4:], row[4:], strict=False):
            if c.text:
                lines += ["    " + line for line in wrap(f"{header_text}: {c.text}", screen.width - 4)]
    return lines


def _events(obs: Observation, before: int, fields: int) -> list[list[Cell]]:
    rows = [[*(Cell("") for _ in range(before)), Cell("  trace", "dim"), Cell(terminal(short(event, 120)), "dim"),
             *(Cell("") for _ in range(fields))] for event in obs.events[:EVENTS]]
    if len(obs.events) > EVENTS:
        more = Cell(f"... and {len(obs.events) - EVENTS:,} more events", "dim")
        rows.append([*(Cell("") for _ in range(before)), Cell("  trace", "dim"), more,
                     *(Cell("") for _ in range(fields))])
    return rows


def step_table(run: LabResult, what: str, fields: tuple[str, ...], screen: Screen) -> list[str]:
    """One row per observation of kind ``what`` (the first ``ROWS``), its value's fields as columns."""
    rows: list[list[Cell]] = []
    shown = 0
    for obs in run.observations:
        if obs.what != what:
            continue
        shown += 1
        if shown > ROWS:
            continue
        value = obs.value if isinstance(obs.value, dict) else {}
        rows.append([Cell(name(obs.scenario or "")), Cell(name(obs.thread)), Cell(name(obs.step)),
                     Cell(name(context_label(obs))), *(Cell(terminal(cell(value.get(f), f))) for f in fields)])
        rows += _events(obs, 2, len(fields))
    headers = ["scenario", "thread", "step", "context", *(name(f.replace("_", " ")) for f in fields)]
    lines = _table(f"{name(run.lab)}: {name(what)}", headers, rows, screen)
    return lines + (_more(shown - ROWS, f"{what} steps", screen) if shown > ROWS else [])


def timeline(run: LabResult, skip: frozenset[str] | set[str] = frozenset(),
             limit: int | None = None) -> list[list[Cell]]:
    """Every observation whose kind is not in ``skip`` (the first ``limit`` of them), in the order recorded,
    with its trace events under it."""
    rows: list[list[Cell]] = []
    shown = 0
    for obs in run.observations:
        if obs.what in skip:
            continue
        shown += 1
        if limit is not None and shown > limit:
            continue
        rows.append([Cell(name(obs.scenario or "")), Cell("" if obs.round is None else name(obs.round)),
                     Cell(name(obs.thread)), Cell(name(obs.step)), Cell(name(context_label(obs))),
                     Cell(name(obs.what)), Cell(terminal(short(obs.value)))])
        rows += _events(obs, 5, 0)
    return rows


def step_lines(run: LabResult, screen: Screen) -> list[str]:
    """The run's step tables (its views), then the timeline of what they do not cover."""
    lines: list[str] = []
    views = lab_views(run)
    for what, fields in views.items():
        if any(o.what == what for o in run.observations):
            lines += step_table(run, what, fields, screen)
    rows = timeline(run, skip=set(views), limit=ROWS)
    if rows:
        headers = ["scenario", "round", "thread", "step", "context", "what", "value"]
        lines += _table(f"{name(run.lab)}: timeline", headers, rows, screen)
        left = sum(o.what not in views for o in run.observations) - ROWS
        lines += _more(left, "steps", screen) if left > 0 else []
    return lines
