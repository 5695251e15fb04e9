"""``ctxlab report merge`` on a terminal: the matrix fitted to the screen, runners numbered in a legend
above it (their labels are too long for column headings), verdicts coloured, the failures listed."""

from __future__ import annotations

from ctxlab.records.model import LabResult
from ctxlab.report.escape import terminal
from ctxlab.report.merge import matrix
from ctxlab.report.screen import Cell, Screen, grid, text_width, wrap

CELL_W = len("observed")


def render_table(files: list[tuple[str, list[LabResult]]], screen: Screen) -> str:
    """The merged matrix as text for ``screen``: a numbered legend of runners, then a row per claim."""
    from ctxlab.report.merge import unable_line

    m = matrix(files)
    apart = [screen.paint(f"{len(m.unable)} runner(s) could not run:", "error")] if m.unable else []
    for origin, run in m.unable:
        first, *more = wrap(terminal(unable_line(origin, run)), screen.width - 2)
        apart += [f"- {first}", *(f"  {line}" for line in more)]
    if not m.columns:
        return "\n".join([*apart, "No runs in the given files: nothing to merge."]) + "\n"
    lines = [*apart, *(screen.paint(line, "bold")
                       for line in wrap(f"{len(m.rows)} claims on {len(m.columns)} runner(s)", screen.width))]
    for number, col in enumerate(m.columns, 1):
        first, *more = wrap(terminal(col.label()), screen.width - 6)
        lines.append(f"[{number:>2}] {first}")
        lines += [f"     {line}" for line in more]
    per_row = max(1, (screen.width - 22) // (CELL_W + 2))  # the runners one screen row holds beside a claim
    for start in range(0, len(m.columns), per_row):
        shown = range(start, min(len(m.columns), start + per_row))
        claim_w = min(max(text_width(terminal(r)) for r in m.rows),
                      screen.width - len(shown) * (CELL_W + 2))
        rows = [[Cell("claim", "dim"), *(Cell(f"[{c + 1}]", "dim") for c in shown)]]
        for row in m.rows:
            verdicts = [m.cells.get((row, c), "-") for c in shown]
            rows.append([Cell(terminal(row)), *(Cell(v, v if v != "-" else None) for v in verdicts)])
        lines.append("")
        lines += grid(rows, [claim_w, *([CELL_W] * len(shown))], screen)
    bad = m.failing()
    lines.append("")
    lines.append(f"{len(bad)} failing:" if bad else "Nothing fails.")
    for row, col, verdict in bad:
        number = m.columns.index(col) + 1
        first, *more = wrap(terminal(f"{row} on [{number}]"), screen.width - 9)
        lines.append(screen.paint(verdict, verdict) + " " * (9 - len(verdict)) + first)
        lines += [" " * 9 + line for line in more]
    lines += wrap("Verdicts: " + ", ".join(v for v in ("holds", "fails", "error", "changed", "observed", "skipped",
                                                   "unjudged"))
                  + "; - this runner has no result for this claim. " + "ctxlab report merge --help says more.",
                  screen.width)
    return "\n".join(lines) + "\n"
