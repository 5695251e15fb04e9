"""``ctxlab claims``: the catalogue of claims as a table, JSON or Markdown."""

from __future__ import annotations

import io
import json

CATALOGUE_FORMATS = ("table", "json", "markdown")


def render_catalogue(entries: list[dict], fmt: str) -> str:
    """The catalogue (``claims.catalogue``) in one format."""
    if fmt == "json":
        return json.dumps({"claims": entries}, indent=2) + "\n"
    if fmt == "markdown":
        from ctxlab.report.escape import markdown as md

        lines = ["| id | kind | statement | decided by | source |", "|---|---|---|---|---|"]
        lines += [f"| {md(e['id'])} | {md(e['kind'])} | {md(e['statement'])} | {md(', '.join(e['scenarios']))} "
                  f"| {md(e['source'])} |" for e in entries]
        return "\n".join(lines) + "\n"
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"{len(entries)} claims")
        for column in ("id", "kind", "statement", "decided by"):
            table.add_column(column, overflow="fold")
        from ctxlab.report.escape import terminal

        for e in entries:
            table.add_row(*(Text(terminal(v)) for v in (e["id"], e["kind"], e["statement"], ", ".join(e["scenarios"]))))
        buffer = io.StringIO()
        Console(file=buffer, width=160, force_terminal=False, color_system=None).print(table)
        return buffer.getvalue()
    raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(CATALOGUE_FORMATS)}")
