"""Reporters: one module per output format, all fed the same LabResult list."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxlab.records.model import LabResult
    from ctxlab.report.screen import Screen

FORMATS = ("table", "json", "junit", "markdown", "openmetrics")


def render(runs: list[LabResult], fmt: str, width: int | None = None, *, screen: Screen | None = None,
           steps: bool = False, full: bool = False) -> str:
    """The runs as text in ``fmt`` (one of FORMATS). The table only: ``screen`` (or plain ``width`` columns)
    is what it fits, ``steps`` adds the step tables and timeline, ``full`` keeps every sentence whole;
    Markdown has every step table whatever ``steps`` says (it is a document, not a screen)."""
    if fmt == "table":
        from ctxlab.report.table import render_table

        return render_table(runs, width=width, screen=screen, steps=steps, full=full)
    if fmt == "json":
        from ctxlab.records.model import dumps

        return dumps(runs) + "\n"
    if fmt == "junit":
        from ctxlab.report.junit import render_junit

        return render_junit(runs)
    if fmt == "markdown":
        from ctxlab.report.markdown import render_markdown

        return render_markdown(runs)
    if fmt == "openmetrics":
        from ctxlab.report.openmetrics import render_openmetrics

        return render_openmetrics(runs)
    raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
