"""The human report: every lab's claims first (verdict, id, a short statement, evidence), its figures and
errors, then a closing summary of the whole run; the step tables and timelines only when asked for.

It fits the screen it is written for (``screen.Screen``: width and colour). From ``WIDE`` columns on, a
claim is one row of four columns (verdict, claim, statement, evidence); below, it is stacked: the verdict,
the id and the statement cut to one line, the evidence folded under it. Unless ``full``, a lab fits about a
screen: statements and evidence are cut to one line each (a ``fails`` or ``error`` claim's evidence never
is), and the skipped claims are one entry, their ids and why (``full``: each claim, every sentence
whole). Every text from the record passes ``escape.terminal`` first: a result file from another machine
sends no escape sequence.
"""

from __future__ import annotations

from ctxlab.records.model import ClaimResult, LabResult
from ctxlab.records.schema import FAILING, VERDICTS
from ctxlab.report.escape import terminal
from ctxlab.report.screen import Cell, Screen, clip, grid, pad, text_width, wrap
from ctxlab.report.text import environment_line, figure

WIDE = 120  # from this many columns on, a claim is a row of four columns
VERDICT_W = max(len(v) for v in VERDICTS)  # 8: "observed"
INDENT = VERDICT_W + 2
SKIPPED_TOGETHER = 2  # from this many skipped claims on, a lab lists them as one entry (unless full)


def verdict_counts_in_order(run: LabResult) -> list[tuple[str, int]]:
    """(verdict, count) for every verdict the run has, always in the order of ``VERDICTS``."""
    counts = {v: 0 for v in VERDICTS}
    for claim in run.claims:
        counts[claim.verdict] = counts.get(claim.verdict, 0) + 1
    return [(v, n) for v, n in counts.items() if n]


def counts_line(run: LabResult) -> str:
    """``15 claims: 9 holds, 1 changed, 5 observed`` (verdicts in their fixed order)."""
    counts = ", ".join(f"{n} {v}" for v, n in verdict_counts_in_order(run)) or "none"
    return f"{len(run.claims)} claims: {counts}"


def heading(run: LabResult, screen: Screen) -> list[str]:
    """The lab's name, where it ran and how long it took, wrapped to the screen."""
    text = terminal(f"{run.lab} on {environment_line(run) or 'an unrecorded machine'} ({run.seconds:.2f} s)")
    lines = wrap(text, screen.width)
    lines[0] = screen.paint(lines[0], "bold")
    return lines


TOGETHER = ("skipped", "unjudged")  # verdicts of claims not tried, listed as one entry each when several


def _apart(run: LabResult, full: bool) -> tuple[list[ClaimResult], list[list[ClaimResult]]]:
    """The claims shown one by one, and for each verdict of ``TOGETHER`` its claims shown together (none when
    ``full`` or few)."""
    groups = [[c for c in run.claims if c.verdict == verdict] for verdict in TOGETHER]
    groups = [g for g in groups if not full and len(g) >= SKIPPED_TOGETHER]
    together = {id(c) for g in groups for c in g}
    return [c for c in run.claims if id(c) not in together], groups


def _together_lines(groups: list[list[ClaimResult]], screen: Screen) -> list[str]:
    """Each group of claims not tried as one entry: how many, every id, and why (the first reason, cut to a
    line)."""
    out = []
    rest = screen.width - INDENT
    for claims in groups:
        verdict = claims[0].verdict
        first, *more = wrap(terminal(f"{len(claims)} claims: {', '.join(c.id for c in claims)}"), rest)
        reasons = list(dict.fromkeys(c.evidence for c in claims))
        why = f"why{f' (1 of {len(reasons)} reasons; --full: each)' if len(reasons) > 1 else ''}: {reasons[0]}"
        out += [screen.paint(verdict, verdict) + " " * (INDENT - len(verdict)) + first,
                *(" " * INDENT + line for line in more),
                *(" " * INDENT + line for line in clip(terminal(why), rest, 1))]
    return out


def _stacked(run: LabResult, screen: Screen, full: bool) -> list[str]:
    out: list[str] = []
    rest = screen.width - INDENT
    shown, skipped = _apart(run, full)
    for claim in shown:
        ident, statement = terminal(claim.id), terminal(claim.statement)
        head = f"{ident}: {statement}"
        first, *more = clip(head, rest, None if full else 1)
        out.append(screen.paint(claim.verdict, claim.verdict) + " " * (INDENT - len(claim.verdict)) + first)
        out += [" " * INDENT + line for line in more]
        keep = None if full or claim.verdict in FAILING else 1
        out += [" " * INDENT + line for line in clip(terminal(claim.evidence), rest, keep)]
    return out + _together_lines(skipped, screen)


def _wide(run: LabResult, screen: Screen, full: bool) -> list[str]:
    room = screen.width - INDENT - 4  # three gaps of two after the verdict column's own
    ident_w = min(max(20, room // 4), max((text_width(terminal(c.id)) for c in run.claims), default=10))
    statement_w = max(20, (room - ident_w) * 2 // 5)
    evidence_w = room - ident_w - statement_w
    shown, skipped = _apart(run, full)
    rows = [[Cell(claim.verdict, claim.verdict), Cell(terminal(claim.id), lines=None if full else 1),
             Cell(terminal(claim.statement), lines=None if full else 1),
             Cell(terminal(claim.evidence), lines=None if full or claim.verdict in FAILING else 1)]
            for claim in shown]
    header = [Cell("verdict", "dim"), Cell("claim", "dim"), Cell("statement", "dim"), Cell("evidence", "dim")]
    lines = grid([header, *rows], [VERDICT_W, ident_w, statement_w, evidence_w], screen) if rows else []
    return lines + _together_lines(skipped, screen)


def claim_lines(run: LabResult, screen: Screen, full: bool = False) -> list[str]:
    """The run's claims at the screen's width: a row each when wide, stacked when narrow."""
    lines = [screen.paint(f"{terminal(run.lab)}: claims", "bold")]
    lines += (_wide if screen.width >= WIDE else _stacked)(run, screen, full)
    lines += wrap(terminal(counts_line(run)), screen.width)
    return lines


def figure_lines(run: LabResult, screen: Screen) -> list[str]:
    """The run's measured figures, a name and a value per line."""
    if not run.metrics:
        return []
    names = [terminal(k) for k in run.metrics]
    values = [terminal(figure(v)) for v in run.metrics.values()]
    name_w = min(max(map(text_width, names)), screen.width - 14)
    lines = [screen.paint(f"{terminal(run.lab)}: figures", "bold")]
    for name, value in zip(names, values, strict=True):
        wrapped = wrap(name, name_w)
        lines += [f"  {line}" for line in wrapped[:-1]]
        lines.append(f"  {pad(wrapped[-1], name_w)}  {value}")
    return lines


def error_lines(run: LabResult, screen: Screen) -> list[str]:
    """Each scenario that crashed or timed out: where and why, with the tail of its output dimmed."""
    lines: list[str] = []
    for error in run.errors:
        text = terminal(f"in {error.get('scenario', run.lab)}: {error.get('message')}")
        first, *more = wrap(text, screen.width - 6)
        lines.append(f"{screen.paint('error', 'error')} {first}")
        lines += [f"      {line}" for line in more]
        if error.get("output_tail"):
            lines += [screen.paint(f"      {line}", "dim")
                      for line in wrap(terminal(error["output_tail"]), screen.width - 6)[-8:]]
    return lines


def flag_text(flag: object) -> str:
    """A flag (a silent wrong result) as a phrase: what, in which scenario and step, and the outcome."""
    if not isinstance(flag, dict):
        return str(flag)
    where = ", ".join(str(flag[k]) for k in ("step", "where") if flag.get(k))
    repeat = f" run {flag['repeat']}" if flag.get("repeat") is not None else ""
    return f"{flag.get('scenario') or '-'}{repeat} ({where}): {flag.get('outcome') or flag.get('flag')}"


def summary_lines(runs: list[LabResult], screen: Screen) -> list[str]:
    """The closing summary: per lab the counts of every verdict (fixed order), then every fails and error
    claim, every scenario that broke, and the flags (silent wrong results)."""
    lab_w = min(24, max((text_width(terminal(r.lab)) for r in runs), default=3))
    device = any(r.environment.get("device") not in (None, 0) for r in runs)
    header = [Cell("lab", "dim"), *(Cell(v, "dim") for v in VERDICTS), Cell("broke", "dim")]
    rows = [header]
    for run in runs:
        counts = dict(verdict_counts_in_order(run))
        name = terminal(run.lab) + (f" (GPU {run.environment.get('device')})" if device else "")
        rows.append([Cell(name), *(Cell(str(counts.get(v, 0)) if counts.get(v) else "-",
                                        v if counts.get(v) and v in FAILING else None) for v in VERDICTS),
                     Cell(str(len(run.errors)) if run.errors else "-", "error" if run.errors else None)])
    widths = [lab_w + (8 if device else 0), *(len(v) for v in VERDICTS), len("broke")]
    total = sum(len(r.claims) for r in runs)
    lines = [screen.paint(f"summary: {len(runs)} lab run(s), {total} claims", "bold")]
    if sum(widths) + 2 * (len(widths) - 1) <= screen.width:
        lines += grid(rows, widths, screen)
    else:  # too narrow for a column per verdict: one line per lab
        for r in runs:
            lines += wrap(f"{terminal(r.lab)}: {terminal(counts_line(r))}", screen.width)
    bad = [(run, claim) for run in runs for claim in run.claims if claim.verdict in FAILING]
    for run, claim in bad:
        text = terminal(f"{claim.id} ({run.lab}): {claim.evidence}")
        first, *more = wrap(text, screen.width - INDENT)
        lines.append(screen.paint(claim.verdict, claim.verdict) + " " * (INDENT - len(claim.verdict)) + first)
        lines += [" " * INDENT + line for line in more]
    for run in runs:
        for error in run.errors:
            lines += wrap(terminal(f"broke: {run.lab} {error.get('scenario', '')}: {error.get('kind', 'error')}"),
                          screen.width)
    for run in runs:
        for flag in run.flags:
            lines += wrap(terminal(f"flag: {run.lab}: {flag_text(flag)}"), screen.width)
    if not bad and not any(run.errors for run in runs):
        lines += wrap("No claim fails or is an error, and every scenario ran.", screen.width)
    return lines


def render_table(runs: list[LabResult], width: int | None = None, *, screen: Screen | None = None,
                 steps: bool = False, full: bool = False) -> str:
    """The runs as the human report for ``screen`` (or plain text ``width`` columns wide, 80 by default):
    per lab its claims, figures and errors (and with ``steps`` its step tables and timeline), then the
    summary of the whole run."""
    screen = screen or Screen(width or 80, False)
    lines: list[str] = []
    for run in runs:
        lines += heading(run, screen)
        lines += claim_lines(run, screen, full)
        lines += figure_lines(run, screen)
        lines += error_lines(run, screen)
        if steps:
            from ctxlab.report.steps import step_lines

            lines += step_lines(run, screen)
        lines.append("")
    lines += summary_lines(runs, screen)
    return "\n".join(lines) + "\n"
