"""The human report: every lab's claims first (verdict, id, a short statement, evidence), its figures and
errors, then a closing summary of the whole run; the step tables and timelines only when asked for.

It fits the screen it is written for (``screen.Screen``: width and colour). From ``WIDE`` columns on, a
claim is one row of four columns (verdict, claim, statement, evidence); below, it is stacked: the verdict,
the id and the statement cut to one line, the evidence folded under it. Unless ``full``, a lab fits about a
screen: statements and evidence are cut to one line each (a ``fails`` or ``error`` claim's evidence never
is), and the skipped claims are one entry, their ids and why (``full``: each claim, every sentence
whole). Every text from the record passes ``escape.terminal`` first: a result file from another machine
sends no escape sequence.

A result file may also hold one string of any size, so every text is cut before it is laid out, the cut
saying how many characters are left out and where they are: a statement, evidence or error message after
``TEXT_CHARS`` (``full``: whole), a name (lab, claim id, scenario, figure) after ``NAME_CHARS`` (always:
it is repeated), a program's output to its last ``TEXT_CHARS``. The lines are made one at a time
(``iter_table``), so even ``full`` holds no more than the record and the text written.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from ctxlab.records.model import ClaimResult, LabResult
from ctxlab.records.promise import unkept
from ctxlab.records.schema import FAILING, VERDICTS
from ctxlab.report.escape import terminal
from ctxlab.report.screen import Cell, Screen, clip, grid, iter_grid, iter_wrap, pad, text_width, title, wrap
from ctxlab.report.text import (
    FULL_OR_JSON,
    NAME_CHARS,
    TEXT_CHARS,
    capped,
    environment_line,
    figure,
    name,
    sentence,
    shown_as_is,
    tail,
)

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
    where = capped(environment_line(run) or "an unrecorded machine", TEXT_CHARS)
    text = terminal(f"{capped(run.lab, NAME_CHARS)} on {where} ({run.seconds:.2f} s)")
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
        first, *more = wrap(f"{len(claims)} claims: {', '.join(name(c.id) for c in claims)}", rest)
        reasons = list(dict.fromkeys(c.evidence for c in claims))
        why = f"why{f' (1 of {len(reasons)} reasons; --full: each)' if len(reasons) > 1 else ''}: "
        out += [screen.paint(verdict, verdict) + " " * (INDENT - len(verdict)) + first,
                *(" " * INDENT + line for line in more),
                *(" " * INDENT + line for line in clip(why + sentence(reasons[0], False), rest, 1))]
    return out


def _stacked(run: LabResult, screen: Screen, full: bool) -> Iterator[str]:
    rest = screen.width - INDENT
    shown, skipped = _apart(run, full)
    for claim in shown:
        head = f"{name(claim.id)}: {sentence(claim.statement, full)}"
        lines = iter_wrap(head, rest) if full else iter(clip(head, rest, 1))
        yield screen.paint(claim.verdict, claim.verdict) + " " * (INDENT - len(claim.verdict)) + next(lines)
        yield from (" " * INDENT + line for line in lines)
        evidence = sentence(claim.evidence, full)
        whole = full or claim.verdict in FAILING
        yield from (" " * INDENT + line for line in (iter_wrap(evidence, rest) if whole else clip(evidence, rest, 1)))
    yield from _together_lines(skipped, screen)


def _wide(run: LabResult, screen: Screen, full: bool) -> Iterator[str]:
    room = screen.width - INDENT - 4  # three gaps of two after the verdict column's own
    ident_w = min(max(20, room // 4), max((text_width(name(c.id)) for c in run.claims), default=10))
    statement_w = max(20, (room - ident_w) * 2 // 5)
    evidence_w = room - ident_w - statement_w
    shown, skipped = _apart(run, full)
    rows = ([Cell(claim.verdict, claim.verdict), Cell(name(claim.id), lines=None if full else 1),
             Cell(sentence(claim.statement, full), lines=None if full else 1),
             Cell(sentence(claim.evidence, full), lines=None if full or claim.verdict in FAILING else 1)]
            for claim in shown)
    header = [Cell("verdict", "dim"), Cell("claim", "dim"), Cell("statement", "dim"), Cell("evidence", "dim")]
    if shown:
        yield from iter_grid([header, *rows], [VERDICT_W, ident_w, statement_w, evidence_w], screen)
    yield from _together_lines(skipped, screen)


def claim_lines(run: LabResult, screen: Screen, full: bool = False) -> Iterator[str]:
    """The run's claims at the screen's width: a row each when wide, stacked when narrow."""
    yield from title(f"{name(run.lab)}: claims", screen)
    yield from (_wide if screen.width >= WIDE else _stacked)(run, screen, full)
    yield from wrap(terminal(counts_line(run)), screen.width)


def figure_lines(run: LabResult, screen: Screen) -> list[str]:
    """The run's measured figures, a name and a value per line (the value under its name where the two do
    not fit side by side)."""
    if not run.metrics:
        return []
    names = [name(k) for k in run.metrics]
    values = [terminal(figure(v)) for v in run.metrics.values()]
    name_w = max(1, min(max(map(text_width, names)), screen.width - 14))
    lines = title(f"{name(run.lab)}: figures", screen)
    for label, value in zip(names, values, strict=True):
        wrapped = wrap(label, name_w)
        lines += [f"  {line}" for line in wrapped[:-1]]
        if 4 + name_w + text_width(value) <= screen.width:
            lines.append(f"  {pad(wrapped[-1], name_w)}  {value}")
        else:
            lines += [f"  {wrapped[-1]}", *(f"    {line}" for line in wrap(value, screen.width - 4))]
    return lines


def error_lines(run: LabResult, screen: Screen, full: bool = False) -> Iterator[str]:
    """Each scenario that crashed or timed out: where and why, with the tail of its output dimmed."""
    for error in run.errors:
        lines = iter_wrap(f"in {name(error.get('scenario', run.lab))}: {sentence(error.get('message'), full)}",
                          screen.width - 6)
        yield f"{screen.paint('error', 'error')} {next(lines)}"
        yield from (f"      {line}" for line in lines)
        if error.get("output_tail"):
            yield from (screen.paint(f"      {line}", "dim")
                        for line in wrap(tail(error["output_tail"]), screen.width - 6)[-8:])


def flag_text(flag: object) -> str:
    """A flag (a silent wrong result) as a phrase: what, in which scenario and step, and the outcome."""
    if not isinstance(flag, dict):
        return str(flag)
    where = ", ".join(str(flag[k]) for k in ("step", "where") if flag.get(k))
    repeat = f" run {flag['repeat']}" if flag.get("repeat") is not None else ""
    return f"{flag.get('scenario') or '-'}{repeat} ({where}): {flag.get('outcome') or flag.get('flag')}"


def _counts_grid(runs: list[LabResult], screen: Screen) -> list[str]:
    """Per lab the counts of every verdict, a column each (one line per lab where they do not fit)."""
    labs = [name(r.lab) for r in runs]
    lab_w = min(24, max((text_width(lab) for lab in labs), default=3))
    device = any(r.environment.get("device") not in (None, 0) for r in runs)
    header = [Cell("lab", "dim"), *(Cell(v, "dim") for v in VERDICTS), Cell("broke", "dim")]
    rows = [header]
    for lab, run in zip(labs, runs, strict=True):
        counts = dict(verdict_counts_in_order(run))
        shown = lab + (f" (GPU {name(run.environment.get('device'))})" if device else "")
        rows.append([Cell(shown), *(Cell(str(counts.get(v, 0)) if counts.get(v) else "-",
                                         v if counts.get(v) and v in FAILING else None) for v in VERDICTS),
                     Cell(str(len(run.errors)) if run.errors else "-", "error" if run.errors else None)])
    widths = [max(1, lab_w + (8 if device else 0)), *(len(v) for v in VERDICTS), len("broke")]
    if sum(widths) + 2 * (len(widths) - 1) <= screen.width:
        return grid(rows, widths, screen)
    return [line for lab, r in zip(labs, runs, strict=True)  # too narrow for a column per verdict
            for line in wrap(f"{lab}: {terminal(counts_line(r))}", screen.width)]


def summary_lines(runs: list[LabResult], screen: Screen, full: bool = False) -> Iterator[str]:
    """The closing summary: per lab the counts of every verdict (fixed order), then every fails and error
    claim, every scenario that broke, and the flags (silent wrong results)."""
    total = sum(len(r.claims) for r in runs)
    yield from title(f"summary: {len(runs)} lab run(s), {total} claims", screen)
    yield from _counts_grid(runs, screen)
    bad = False
    for run in runs:
        for claim in run.claims:
            if claim.verdict not in FAILING:
                continue
            bad = True
            # cut here even when full: the claim's own entry above has the whole evidence
            evidence = shown_as_is(capped(claim.evidence, TEXT_CHARS, "whole above" if full else FULL_OR_JSON))
            lines = iter_wrap(f"{name(claim.id)} ({name(run.lab)}): {evidence}", screen.width - INDENT)
            yield screen.paint(claim.verdict, claim.verdict) + " " * (INDENT - len(claim.verdict)) + next(lines)
            yield from (" " * INDENT + line for line in lines)
    for run in runs:
        for error in run.errors:
            yield from wrap(f"broke: {name(run.lab)} {name(error.get('scenario', ''))}: "
                            f"{name(error.get('kind', 'error'))}", screen.width)
    for run in runs:
        for flag in run.flags:
            yield from iter_wrap(f"flag: {name(run.lab)}: {sentence(flag_text(flag), full)}", screen.width)
    short = unkept(runs)  # judged none, or fewer than the runs' levels promise on their machines
    if short is not None:
        yield from wrap(f"Not healthy: {short}.", screen.width)
    elif not bad and not any(run.errors for run in runs):
        yield from wrap("No claim fails or is an error, and every scenario ran.", screen.width)


def iter_table(runs: list[LabResult], screen: Screen, *, steps: bool = False, full: bool = False) -> Iterator[str]:
    """The human report for ``screen``, a line at a time (each without its newline): per lab its claims,
    figures and errors (and with ``steps`` its step tables and timeline), then the summary of the whole run."""
    for run in runs:
        yield from heading(run, screen)
        yield from claim_lines(run, screen, full)
        yield from figure_lines(run, screen)
        yield from error_lines(run, screen, full)
        if steps:
            from ctxlab.report.steps import step_lines

            yield from step_lines(run, screen)
        yield ""
    yield from summary_lines(runs, screen, full)


def iter_table_text(runs: list[LabResult], screen: Screen, *, steps: bool = False, full: bool = False,
                    batch: int = 4096) -> Iterator[str]:
    """``render_table``'s text in chunks of ``batch`` lines: a report of a million lines is written as it
    is made, never held whole."""
    lines = iter_table(runs, screen, steps=steps, full=full)
    while chunk := list(islice(lines, batch)):
        yield "\n".join(chunk) + "\n"


def render_table(runs: list[LabResult], width: int | None = None, *, screen: Screen | None = None,
                 steps: bool = False, full: bool = False) -> str:
    """The runs as the human report for ``screen`` (or plain text ``width`` columns wide, 80 by default):
    per lab its claims, figures and errors (and with ``steps`` its step tables and timeline), then the
    summary of the whole run."""
    screen = screen or Screen(width or 80, False)
    return "".join(iter_table_text(runs, screen, steps=steps, full=full))
