"""A recorded lab run as a picture: one self-contained HTML page (inline SVG and
CSS, no script, nothing fetched) with, per scenario, a lane per host thread and
a cell per recorded step, coloured by the context the thread had current.

Works from the record alone (each observation's thread, context id, step and
scenario): migrate's baton passing reads as cells of one colour hopping from
lane to lane, refcount's states as the colour changing (or going grey: no
context) from step to step. A scenario draws its first ``STEPS`` steps (a
recorded lab has a few dozen; a drawing of a quarter of a million is no
picture, and no browser lays it out), and says how many more there are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ctxlab.records.model import LabResult, Observation
from ctxlab.report import escape
from ctxlab.report.text import NAME_CHARS, capped

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
           "#bab0ac")
NO_CONTEXT = "#e4e4e4"
CELL_W, CELL_H, GAP, LANE_LABEL_W, HEADER_H = 44, 30, 6, 130, 96
STEPS = 2000  # steps drawn per scenario

CSS = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 4px; }
.meta, .note { color: #555; font-size: 13px; }
.legend span { display: inline-block; margin-right: 14px; font-size: 13px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px;
            border: 1px solid #888; }
svg { display: block; margin-top: 6px; }
svg text { font: 11px system-ui, sans-serif; fill: #222; }
svg .lane-label { font-size: 12px; font-weight: 600; }
svg .step-label { fill: #444; }
svg .cell rect { stroke: #555; stroke-width: 0.6; }
svg .cell:hover rect { stroke: #000; stroke-width: 2; }
svg .cell text { font-size: 10px; fill: #fff; pointer-events: none; }
svg .cell.none text { fill: #555; }
svg .baton { stroke: #333; stroke-width: 1.2; fill: none; marker-end: url(#arrow); opacity: 0.75; }
svg .lane-bg { fill: #f7f7f7; }
"""


def _scenarios(observations: Iterable[Observation]) -> dict[str, list[Observation]]:
    out: dict[str, list[Observation]] = {}
    for o in observations:
        out.setdefault(o.scenario or "(no scenario)", []).append(o)
    return out


def _color(context_id, colors: dict) -> str:
    if context_id is None:
        return NO_CONTEXT
    if context_id not in colors:  # by id, so context 2 has one colour in every scenario
        colors[context_id] = PALETTE[(int(context_id) - 1) % len(PALETTE)] if isinstance(context_id, int) \
            else PALETTE[len(colors) % len(PALETTE)]
    return colors[context_id]


def _tooltip(o: Observation) -> str:
    value = json.dumps(o.value, default=str)
    if len(value) > 400:
        value = value[:400] + "..."
    ctx = "no context" if o.context_id is None else f"context {o.context_id}" + (
        f" ({o.context:#x})" if isinstance(o.context, int) and o.context else "")
    step, what, thread = (capped(text, NAME_CHARS) for text in (o.step, o.what, o.thread))
    lines = [f"{step}: {what}", f"thread {thread}, {ctx}"]
    if o.round is not None:
        lines.append(f"round {o.round}")
    lines.append(value)
    lines.extend(o.events[:12])
    return "\n".join(lines)


def scenario_svg(name: str, observations: list[Observation]) -> str:
    """One scenario: a lane per thread (in order of first appearance), a column per observation."""
    threads: list[str] = []
    for o in observations:
        if o.thread not in threads:
            threads.append(o.thread)
    colors: dict = {}
    width = LANE_LABEL_W + len(observations) * (CELL_W + GAP) + 90
    height = HEADER_H + len(threads) * (CELL_H + GAP) + 10
    lane_y = {t: HEADER_H + i * (CELL_H + GAP) for i, t in enumerate(threads)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="scenario" data-scenario="{escape.html(name)}" '
             f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{escape.html(name)}: {len(threads)} threads, {len(observations)} steps">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>']
    for t in threads:
        y = lane_y[t]
        label = escape.html(capped(t, NAME_CHARS))
        parts.append(f'<g class="lane" data-thread="{label}">'
                     f'<rect class="lane-bg" x="0" y="{y - 2}" width="{width}" height="{CELL_H + 4}"/>'
                     f'<text class="lane-label" x="6" y="{y + CELL_H / 2 + 4}">{label}</text></g>')
    previous_step = None
    for i, o in enumerate(observations):
        x = LANE_LABEL_W + i * (CELL_W + GAP)
        step = o.step if o.round is None else f"{o.step} r{o.round}"
        if step != previous_step:
            parts.append(f'<text class="step-label" transform="translate({x + CELL_W / 2},{HEADER_H - 8}) '
                         f'rotate(-45)">{escape.html(step[:28])}</text>')
            previous_step = step
    cells = []
    for i, o in enumerate(observations):
        x = LANE_LABEL_W + i * (CELL_W + GAP)
        y = lane_y[o.thread]
        fill = _color(o.context_id, colors)
        text = "none" if o.context_id is None else f"ctx {o.context_id}"
        cls = "cell none" if o.context_id is None else "cell"
        cells.append((x, y))
        step_name, thread_name = (escape.html(capped(name, NAME_CHARS)) for name in (o.step, o.thread))
        parts.append(f'<g class="{cls}" data-step="{step_name}" data-thread="{thread_name}" '
                     f'data-context="{"" if o.context_id is None else o.context_id}">'
                     f'<title>{escape.html(_tooltip(o))}</title>'
                     f'<rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" rx="4" fill="{fill}"/>'
                     f'<text x="{x + CELL_W / 2}" y="{y + CELL_H / 2 + 3.5}" text-anchor="middle">{text}</text></g>')
    # the baton: the same context seen next on another thread
    for i in range(1, len(observations)):
        a, b = observations[i - 1], observations[i]
        if a.thread != b.thread and a.context_id is not None and a.context_id == b.context_id:
            (x1, y1), (x2, y2) = cells[i - 1], cells[i]
            y1c, y2c = y1 + (CELL_H if y2 > y1 else 0), y2 + (0 if y2 > y1 else CELL_H)
            parts.append(f'<path class="baton" d="M {x1 + CELL_W / 2} {y1c} C {x1 + CELL_W} {(y1c + y2c) / 2}, '
                         f'{x2} {(y1c + y2c) / 2}, {x2 + CELL_W / 2} {y2c}"/>')
    parts.append("</svg>")
    legend = "".join(f'<span><i style="background:{c}"></i>context {escape.html(str(k))}</span>'
                     for k, c in sorted(colors.items(), key=lambda kv: str(kv[0])))
    legend += f'<span><i style="background:{NO_CONTEXT}"></i>no context current</span>'
    return f'<div class="legend">{legend}</div>' + "".join(parts)


def render_run(run: LabResult) -> str:
    """One run as an HTML section: a heading, what the figure shows, and a lane diagram per scenario."""
    env = run.environment or {}
    driver = env.get("driver_version")
    cuda = f"driver CUDA {driver // 1000}.{driver % 1000 // 10}" if isinstance(driver, int) else ""
    meta = ", ".join(x for x in (str(env.get("gpu") or ""), cuda, f"recorded {run.started}") if x)
    lab = escape.html(capped(run.lab, NAME_CHARS))
    out = [f'<section class="run" data-lab="{lab}"><h1>ctxlab {lab}</h1>'
           f'<p class="meta">{escape.html(meta)}. A lane per host thread, a cell per recorded step in the order '
           f'recorded, coloured by the context the thread had current (ids are per scenario: each scenario ran '
           f'in its own process). Arrows: the same context seen next on another thread. Hover a cell for '
           f'what was recorded.</p>']
    for whole, observations in _scenarios(run.observations).items():
        name = capped(whole, NAME_CHARS)  # shown three times: a name of any size from another runner is cut
        threads = len({o.thread for o in observations})
        drawn = "" if len(observations) <= STEPS else (
            f"; the first {STEPS:,} drawn, {len(observations) - STEPS:,} more in the result file "
            "(ctxlab show FILE --format json or markdown has every one)")
        out.append(f'<h2>{escape.html(name)}</h2><p class="note">{threads} thread(s), '
                   f'{len(observations)} step(s){escape.html(drawn)}</p>')
        out.append(scenario_svg(name, observations[:STEPS]))
    out.append("</section>")
    return "".join(out)


def render_html(runs: Iterable[LabResult]) -> str:
    """A self-contained page for one or more recorded lab runs."""
    runs = list(runs)
    title = "ctxlab timeline: " + ", ".join(capped(run.lab, NAME_CHARS) for run in runs)
    body = "".join(render_run(run) for run in runs)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape.html(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n")
