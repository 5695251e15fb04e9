"""``ctxlab claims``: the catalogue of claims as a table fitted to the screen, JSON or Markdown.

From ``WIDE`` columns on, a claim is one row (id, kind, statement, decided by); below, it is stacked: the
id and kind on one line, the statement and the scenarios that decide it folded under it.
"""

from __future__ import annotations

import json

from ctxlab.report.screen import Cell, Screen, grid, text_width, wrap

CATALOGUE_FORMATS = ("table", "json", "markdown")
WIDE = 120
KIND_STYLE = {"promise": "bold", "old-text": "changed", "observation": "observed"}


def _table(entries: list[dict], screen: Screen) -> str:
    from ctxlab.report.escape import terminal

    lines = [screen.paint(f"{len(entries)} claims", "bold")]
    if screen.width >= WIDE:
        ident_w = min(max(20, screen.width // 4), max((text_width(terminal(e["id"])) for e in entries), default=10))
        kind_w = len("observation")
        rest = screen.width - ident_w - kind_w - 6
        scen_w = max(16, rest // 4)
        widths = [ident_w, kind_w, rest - scen_w, scen_w]
        rows = [[Cell("id", "dim"), Cell("kind", "dim"), Cell("statement", "dim"), Cell("decided by", "dim")]]
        rows += [[Cell(terminal(e["id"])), Cell(terminal(e["kind"]), KIND_STYLE.get(e["kind"])),
                  Cell(terminal(e["statement"])), Cell(terminal(", ".join(e["scenarios"])))] for e in entries]
        lines += grid(rows, widths, screen)
    else:
        for e in entries:
            head = wrap(f"{terminal(e['id'])} ({terminal(e['kind'])})", screen.width)
            lines.append(screen.paint(head[0], "bold"))
            lines += head[1:]
            lines += ["    " + line for line in wrap(terminal(e["statement"]), screen.width - 4)]
            lines += ["    " + line for line in wrap("decided by: " + terminal(", ".join(e["scenarios"])),
                                                    screen.width - 4)]
    return "\n".join(lines) + "\n"


def render_catalogue(entries: list[dict], fmt: str, screen: Screen | None = None) -> str:
    """The catalogue (``claims.catalogue``) in one format; the table fitted to ``screen`` (80 plain columns)."""
    if fmt == "json":
        return json.dumps({"claims": entries}, indent=2) + "\n"
    if fmt == "markdown":
        from ctxlab.report.escape import markdown as md

        lines = ["| id | kind | statement | decided by | source |", "|---|---|---|---|---|"]
        lines += [f"| {md(e['id'])} | {md(e['kind'])} | {md(e['statement'])} | {md(', '.join(e['scenarios']))} "
                  f"| {md(e['source'])} |" for e in entries]
        return "\n".join(lines) + "\n"
    if fmt == "table":
        return _table(entries, screen or Screen())
    raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(CATALOGUE_FORMATS)}")
