"""Markdown: for lab write-ups and CI step summaries."""

from __future__ import annotations

from ctxlab.record import LabResult
from ctxlab.report.text import cell, context_label, environment_line, lab_views, short, verdict_counts


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(runs: list[LabResult], timeline: bool = True) -> str:
    lines: list[str] = []
    for run in runs:
        lines += [f"## {run.lab}", "", f"{environment_line(run)}; {run.seconds:.2f} s; started {run.started}", ""]
        counts = ", ".join(f"{n} {v}" for v, n in verdict_counts(run).items())
        lines += [f"**{len(run.claims)} claims:** {counts}", ""]
        lines += ["| verdict | claim | evidence | source |", "|---|---|---|---|"]
        for c in run.claims:
            lines.append(f"| **{c.verdict}** | {_cell(c.id)}: {_cell(c.statement)} | {_cell(c.evidence)} | {_cell(c.source)} |")
        lines.append("")
        if run.metrics:
            lines += ["| figure | value |", "|---|---|"]
            lines += [f"| {k} | {_cell(short(v))} |" for k, v in run.metrics.items()]
            lines.append("")
        for error in run.errors:
            lines += [f"**error** in {error.get('scenario', run.lab)}: {_cell(error.get('message'))}", ""]
        views = lab_views(run) if timeline else {}
        for what, fields in views.items():
            rows = [o for o in run.observations if o.what == what]
            if not rows:
                continue
            lines += [f"### {what}", "", "| scenario | thread | step | context | " + " | ".join(f.replace("_", " ") for f in fields) + " |",
                      "|---|---|---|---|" + "---|" * len(fields)]
            for o in rows:
                value = o.value if isinstance(o.value, dict) else {}
                lines.append(f"| {_cell(o.scenario or '')} | {_cell(o.thread)} | {_cell(o.step)} | {context_label(o)} | "
                             + " | ".join(_cell(cell(value.get(f))) for f in fields) + " |")
            lines.append("")
        rest = [o for o in run.observations if o.what not in views]
        if timeline and rest:
            lines += ["| scenario | round | thread | step | context | what | value |", "|---|---|---|---|---|---|---|"]
            for o in rest:
                rnd = "" if o.round is None else o.round
                lines.append(f"| {_cell(o.scenario or '')} | {rnd} | {_cell(o.thread)} | {_cell(o.step)} | "
                             f"{context_label(o)} | {_cell(o.what)} | {_cell(short(o.value, 120))} |")
            lines.append("")
    return "\n".join(lines)
