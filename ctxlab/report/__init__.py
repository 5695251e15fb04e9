"""Reporters: one module per output format, all fed the same LabResult list; which format is which, and who
writes it, is ``ctxlab.report.formats`` (the one registry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxlab.report.formats import FORMATS, View, text_of, write

if TYPE_CHECKING:
    from ctxlab.records.model import LabResult
    from ctxlab.report.screen import Screen

__all__ = ["FORMATS", "render"]


def render(runs: list[LabResult], fmt: str, width: int | None = None, *, screen: Screen | None = None,
           steps: bool = False, full: bool = False) -> str:
    """The runs as text in ``fmt`` (one of FORMATS), whole. The table only: ``screen`` (or plain ``width``
    columns) is what it fits, ``steps`` adds the step tables and timeline, ``full`` keeps every sentence whole;
    Markdown has every step table whatever ``steps`` says (it is a document, not a screen)."""
    if screen is None and width is not None:
        from ctxlab.report.screen import Screen

        screen = Screen(width=width)
    return text_of(write(runs, fmt, View(screen=screen, steps=steps, full=full)))
