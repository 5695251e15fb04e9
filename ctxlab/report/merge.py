"""``ctxlab report merge``: one matrix of claims against runners, from the results of several.

A column is one runner and device: hostname, device index, GPU UUID (where the
environment records one), driver and runtime. Nothing is hidden: two files (or two
runs in one file) with the same key become two columns marked as duplicates, and a
failing verdict stands out in its row and fails the merge (exit status 1).
"""

from __future__ import annotations

from ctxlab.records.model import LabResult
from ctxlab.records.schema import FAILING
from ctxlab.report import escape
from ctxlab.report.fleet_view import differs_html, differs_markdown
from ctxlab.report.matrix import Column, Matrix, runner_key

__all__ = ["Column", "Matrix", "failing", "matrix", "render_html", "render_markdown", "runner_key", "unable_line"]

LEGEND = [
    ("holds", "the documented promise held"),
    ("fails", "a documented promise is broken (the merge exits 1)"),
    ("error", "the experiment or a scenario broke: crashed or timed out (the merge exits 1)"),
    ("changed", "the old text says otherwise and current documentation agrees with what was seen"),
    ("observed", "nothing is promised; what happened is recorded"),
    ("skipped", "not run here, for the reason in the result file"),
    ("unjudged", "above the level this runner checked at (check --level)"),
    ("-", "this runner has no result for this claim"),
]
KEY_NOTE = ("A column is one runner and device: hostname, device index, GPU UUID (where recorded), driver and "
            "runtime. Columns marked duplicate share that key: they come from different files or runs and are "
            "shown side by side, never merged.")
COLOUR = {"holds": "#cfc", "fails": "#f99", "changed": "#ffc", "observed": "#cef", "skipped": "#eee",
          "unjudged": "#f7f7f7", "error": "#f66"}


def unable_line(origin: str, run: LabResult) -> str:
    """A runner that could not run, in one line: host, reason, the line it printed, its file."""
    from ctxlab.records.environment_error import describe

    host = run.environment.get("hostname", "?")
    return f"{host}: {describe(run)} (from {origin})"


def _row_keys(run: LabResult) -> list[tuple[str, str]]:
    rows = [(claim.id, claim.verdict) for claim in run.claims]
    if run.errors:
        rows.append((f"{run.lab} (lab errors)", "error"))
    return rows


# The last matrix built, with what it was built from (held, so that no id in it is reused): the command
# renders Markdown, HTML and the gate from the same files, and a fleet's matrix is worth building once.
_last: list[tuple[list[tuple[str, list[LabResult], tuple[LabResult, ...]]], Matrix]] = []


def _same_files(files: list[tuple[str, list[LabResult]]],
                held: list[tuple[str, list[LabResult], tuple[LabResult, ...]]]) -> bool:
    return len(files) == len(held) and all(
        origin == was and runs is same and len(runs) == len(items)
        and all(a is b for a, b in zip(runs, items, strict=True))
        for (origin, runs), (was, same, items) in zip(files, held, strict=True))


def matrix(files: list[tuple[str, list[LabResult]]]) -> Matrix:
    """Place every run's verdicts; a run joins a column only where it replaces nothing. The same files (the
    same run objects, records being immutable) give the same matrix, built once."""
    if _last and _same_files(files, _last[0][0]):
        return _last[0][1]
    built = _build(files)
    _last[:] = [([(origin, runs, tuple(runs)) for origin, runs in files], built)]
    return built


def _build(files: list[tuple[str, list[LabResult]]]) -> Matrix:
    from ctxlab.records.environment_error import is_environment_error

    columns: list[Column] = []
    rows: dict[str, None] = {}  # in the order first met
    cells: dict = {}
    unable: list = []
    outcomes: dict = {}
    by_place: dict[tuple, list[int]] = {}  # (key, file) -> its columns: placing a run looks at these only
    for origin, runs in files:
        for run in runs:
            if is_environment_error(run):
                unable.append((origin, run))
                continue
            key = runner_key(run)
            entries = _row_keys(run)
            names = {row for row, _ in entries}
            place = by_place.setdefault((key, origin), [])
            index = next((i for i in place if not columns[i].rows & names), None)
            if index is None:
                columns.append(Column(key, str(run.environment.get("gpu", "?")), origin))
                index = len(columns) - 1
                place.append(index)
            columns[index].rows |= names
            for row, verdict in entries:
                rows.setdefault(row)
                cells[(row, index)] = verdict
            for claim in run.claims:
                if claim.verdict == "observed":  # normalised only where the fleet view compares it
                    outcomes[(claim.id, index)] = claim.evidence
    same_key: dict[tuple, list[Column]] = {}
    for col in columns:
        same_key.setdefault(col.key, []).append(col)
    for same in same_key.values():
        for number, col in enumerate(same, 1):
            col.copy, col.copies = number, len(same)
    return Matrix(columns, list(rows), cells, unable, outcomes)


def failing(files: list[tuple[str, list[LabResult]]]) -> bool:
    """True when any cell of the merged matrix fails the gate, or a runner could not run."""
    m = matrix(files)
    return bool(m.failing() or m.unable)


def render_markdown(files: list[tuple[str, list[LabResult]]]) -> str:
    """The matrix as a Markdown table, with the failures listed and a legend."""
    m = matrix(files)
    md = escape.markdown
    apart = [f"**{len(m.unable)} runner(s) could not run** (the merge exits 1):"] if m.unable else []
    apart += [f"- {md(unable_line(origin, run))}" for origin, run in m.unable]
    if not m.columns:
        return "\n".join([*apart, "", "No runs in the given files: nothing to merge."]).lstrip("\n") + "\n"
    lines = [*differs_markdown(m), *apart, *([""] if apart else []),
             "| claim | " + " | ".join(md(col.label()) for col in m.columns) + " |", "|---|" + "---|" * len(m.columns)]
    shown = {v: f"**{md(v)}**" if v in FAILING else md(v) for v in {"-", *m.cells.values()}}  # each verdict once
    lines += [f"| {md(row)} | " + " | ".join(shown[v] for v in m.verdicts(row)) + " |" for row in m.rows]
    bad = m.failing()
    lines += ["", f"**{len(bad)} failing:**" if bad else "Nothing fails."]
    lines += [f"- **{md(v)}**: {md(row)} on {md(col.label())}" for row, col, v in bad]
    lines += ["", "Legend: " + "; ".join(f"**{md(v)}**: {md(text)}" for v, text in LEGEND) + ".", "",
              md(KEY_NOTE)]
    return "\n".join(lines) + "\n"


def render_html(files: list[tuple[str, list[LabResult]]]) -> str:
    """The matrix as a standalone HTML page, coloured by verdict, with the failures and a legend."""
    m = matrix(files)
    h = escape.html
    head = "<!doctype html><meta charset=utf-8><title>ctxlab matrix</title>"
    if m.unable:
        head += (f"<p><b>{len(m.unable)} runner(s) could not run</b> (the merge exits 1):</p><ul>"
                 + "".join(f"<li>{h(unable_line(origin, run))}</li>" for origin, run in m.unable) + "</ul>")
    if not m.columns:
        return head + "<p>No runs in the given files: nothing to merge.</p>\n"
    head += differs_html(m)
    ths = "".join(f"<th>{h(col.label())}</th>" for col in m.columns)
    td = {v: f'<td style="background:{COLOUR.get(v, "#fff")}">' + (f"<b>{h(v)}</b>" if v in FAILING else h(v))
          + "</td>" for v in {"-", *m.cells.values()}}  # each verdict's cell once
    rows = [f"<tr><th>{h(row)}</th>{''.join(td[v] for v in m.verdicts(row))}</tr>" for row in m.rows]
    bad = m.failing()
    summary = (f"<p><b>{len(bad)} failing:</b></p><ul>"
               + "".join(f"<li><b>{h(v)}</b>: {h(row)} on {h(col.label())}</li>" for row, col, v in bad) + "</ul>"
               if bad else "<p>Nothing fails.</p>")
    legend = "".join(f'<li><span style="background:{COLOUR.get(v, "#fff")}">{h(v)}</span>: {h(text)}</li>'
                     for v, text in LEGEND)
    return (f"{head}<table border=1 cellspacing=0 cellpadding=4><tr><th>claim</th>{ths}</tr>{''.join(rows)}"
            f"</table>{summary}<h2>Legend</h2><ul>{legend}</ul><p>{h(KEY_NOTE)}</p>\n")
