"""Reporters: one module per output format, all fed the same LabResult list."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxlab.record import LabResult

FORMATS = ("table", "json", "junit", "markdown")


def render(runs: list[LabResult], fmt: str, width: int | None = None) -> str:
    """The runs as text in ``fmt`` (one of FORMATS); ``width`` applies to the table only."""
    if fmt == "table":
        from ctxlab.report.table import render_table

        return render_table(runs, width=width)
    if fmt == "json":
        from ctxlab.record import dumps

        return dumps(runs) + "\n"
    if fmt == "junit":
        from ctxlab.report.junit import render_junit

        return render_junit(runs)
    if fmt == "markdown":
        from ctxlab.report.markdown import render_markdown

        return render_markdown(runs)
    raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
