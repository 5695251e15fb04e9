"""Markdown: for lab write-ups and CI step summaries. Every text from the record goes through
``escape.markdown`` (HTML specials as entities, Markdown specials escaped, one line), cut after
``text.MARKDOWN_CHARS`` characters first, saying how many more there are (``--format json`` has them):
a result file may hold one string of any size, and a table cell of 64 MiB serves no reader."""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.records.model import LabResult
from ctxlab.report.text import (
    cell,
    context_label,
    environment_line,
    figure,
    lab_views,
    markdown_cell,
    short,
    verdict_counts,
)


def _remembered(escape: Callable[[object], str], most: int = 50_000) -> Callable[[object], str]:
    """``escape``, answering a short string it has seen from memory: a large result's steps repeat their
    scenario, thread, step and context thousands of times."""
    seen: dict[str, str] = {}

    def call(text: object) -> str:
        if type(text) is not str or len(text) > 200:
            return escape(text)
        out = seen.get(text)
        if out is None:
            if len(seen) >= most:
                seen.clear()
            out = seen[text] = escape(text)
        return out

    return call


def render_markdown(runs: list[LabResult], timeline: bool = True) -> str:
    """The runs as Markdown: verdicts, figures and errors, then the step tables unless ``timeline`` is False."""
    md = _remembered(markdown_cell)
    lines: list[str] = []
    for run in runs:
        lines += [f"## {md(run.lab)}", "",
                  f"{md(environment_line(run))}; {run.seconds:.2f} s; started {md(run.started)}", ""]
        counts = ", ".join(f"{n} {md(v)}" for v, n in verdict_counts(run).items())
        lines += [f"**{len(run.claims)} claims:** {counts}", ""]
        lines += ["| verdict | claim | evidence | source |", "|---|---|---|---|"]
        for c in run.claims:
            lines.append(f"| **{md(c.verdict)}** | {md(c.id)}: {md(c.statement)} | {md(c.evidence)} | {md(c.source)} |")
        lines.append("")
        if run.metrics:
            lines += ["| figure | value |", "|---|---|"]
            lines += [f"| {md(k)} | {md(figure(v))} |" for k, v in run.metrics.items()]
            lines.append("")
        for error in run.errors:
            lines += [f"**error** in {md(error.get('scenario', run.lab))}: {md(error.get('message'))}", ""]
        views = lab_views(run) if timeline else {}
        for what, fields in views.items():
            rows = [o for o in run.observations if o.what == what]
            if not rows:
                continue
            lines += [f"### {md(what)}", "", "| scenario | thread | step | context | "
                      + " | ".join(md(f.replace("_", " ")) for f in fields) + " |",
                      "|---|---|---|---|" + "---|" * len(fields)]
            for o in rows:
                value = o.value if isinstance(o.value, dict) else {}
                lines.append(f"| {md(o.scenario or '')} | {md(o.thread)} | {md(o.step)} | {md(context_label(o))} | "
                             + " | ".join(md(cell(value.get(f), f)) for f in fields) + " |")
            lines.append("")
        rest = [o for o in run.observations if o.what not in views]
        if timeline and rest:
            lines += ["| scenario | round | thread | step | context | what | value |", "|---|---|---|---|---|---|---|"]
            for o in rest:
                rnd = "" if o.round is None else o.round
                lines.append(f"| {md(o.scenario or '')} | {rnd} | {md(o.thread)} | {md(o.step)} | "
                             f"{md(context_label(o))} | {md(o.what)} | {md(short(o.value, 120))} |")
            lines.append("")
    return "\n".join(lines)
