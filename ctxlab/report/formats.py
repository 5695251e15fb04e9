"""The one registry of the formats a set of runs is written in: each format once, with its name, its file
suffix, its writer and whether it streams. Every command that writes runs (``show``, ``check``, the labs, the
API's ``render``) looks its format up here, so the same runs in the same format are the same bytes whichever
wrote them.

A writer takes the runs and a ``View`` (what a screen or a CI step adds: where the table lands, the step
tables, whole sentences, the drift against a baseline) and returns the text, or, for a format that streams, a
function that yields it in chunks (``ctxlab.output.Text``: a large report is never held whole).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxlab.records.model import LabResult
    from ctxlab.records.promise import Declared
    from ctxlab.report.screen import Screen

Chunks = Callable[[], Iterator[str]]
Written = str | Chunks


@dataclass(frozen=True)
class View:
    """What a writer may be asked beside the runs: the screen the table fits (None: plain, 80 columns), the step
    tables and timeline, every sentence whole, the drift against a baseline (the CI summary's), and what the
    catalogue declares of the labs a check selected (the metrics' promise: ``ctxlab.records.promise``)."""

    screen: Screen | None = None
    steps: bool = False
    full: bool = False
    drifted: list[dict] | None = None
    declared: Mapping[tuple[str, object], Declared] | None = None


@dataclass(frozen=True)
class Format:
    """One output format: its name (``--format NAME``), the suffix of a file of it, and its writer."""

    name: str
    suffix: str
    streams: bool
    write: Callable[[list[LabResult], View], Written]
    help: str


def _table(runs: list[LabResult], view: View) -> Chunks:
    from ctxlab.report.screen import Screen
    from ctxlab.report.table import iter_table_text

    screen = view.screen or Screen()
    return lambda: iter_table_text(runs, screen, steps=view.steps, full=view.full)


def _json(runs: list[LabResult], view: View) -> Chunks:
    from ctxlab.report.json_stream import iter_dumps

    def chunks() -> Iterator[str]:
        yield from iter_dumps(runs)
        yield "\n"

    return chunks


def _junit(runs: list[LabResult], view: View) -> str:
    from ctxlab.report.junit import render_junit

    return render_junit(runs)


def _markdown(runs: list[LabResult], view: View) -> str:
    from ctxlab.report.markdown import render_markdown

    return render_markdown(runs)


def _summary(runs: list[LabResult], view: View) -> str:
    from ctxlab.report.summary import summary_markdown

    return summary_markdown(runs, view.drifted)


def _openmetrics(runs: list[LabResult], view: View) -> str:
    from ctxlab.report.openmetrics import render_openmetrics

    return render_openmetrics(runs, view.declared)


REGISTRY: dict[str, Format] = {f.name: f for f in (
    Format("table", ".txt", True, _table, "the report for people, fitted to the terminal"),
    Format("json", ".json", True, _json, "every run, schema ctxlab/1 (one run as its object, several under runs)"),
    Format("junit", ".xml", False, _junit, "JUnit XML, a test case per claim"),
    Format("markdown", ".md", False, _markdown, "the whole report as Markdown, every step table"),
    Format("summary", ".md", False, _summary, "the CI step summary: verdict counts, what failed, what drifted"),
    Format("openmetrics", ".prom", False, _openmetrics, "OpenMetrics for node_exporter's textfile collector"),
)}
FORMATS = tuple(REGISTRY)


def format_named(name: str) -> Format:
    """The registered format ``name``; ValueError naming the formats for any other."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}: choose one of {', '.join(FORMATS)}") from None


def write(runs: list[LabResult], name: str, view: View | None = None) -> Written:
    """The runs in format ``name``: its text, or (a format that streams) a function yielding it in chunks."""
    return format_named(name).write(list(runs), view or View())


def text_of(written: Written) -> str:
    """The whole text of what a writer gave."""
    return written if isinstance(written, str) else "".join(written())
