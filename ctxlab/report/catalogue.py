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
        from ctxlab.report.markdown import _cell

        lines = ["| id | kind | statement | decided by | source |", "|---|---|---|---|---|"]
        lines += [f"| {_cell(e['id'])} | {e['kind']} | {_cell(e['statement'])} | {_cell(', '.join(e['scenarios']))} "
                  f"| {_cell(e['source'])} |" for e in entries]
        return "\n".join(lines) + "\n"
    if fmt == "table":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"{len(entries)} claims")
        for column in ("id", "kind", "statement", "decided by"):
            table.add_column(column, overflow="fold")
        for e in entries:
            table.add_row(*(Text(str(v)) for v in (e["id"], e["kind"], e["statement"], ", ".join(e["scenarios"]))))
        buffer = io.StringIO()
        Console(file=buffer, width=160, force_terminal=False, color_system=None).print(table)
        return buffer.getvalue()
    raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(CATALOGUE_FORMATS)}")
