"""``report merge``'s first view: where the fleet differs.

Runners are grouped by GPU model, driver, runtime and ctxlab version. A claim is listed when its outcomes
differ between groups: its verdict, or for an ``observed`` claim what was observed (the evidence with
handles, addresses and figures blanked, as drift compares it), or that a group has no result for it. For
each such claim every group's outcomes are given with how many runners had each. A fleet of one group
differs in nothing by environment: the view is left out and the matrix comes first, as for one runner.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ctxlab.report import escape

if TYPE_CHECKING:
    from ctxlab.report.matrix import Column, Matrix

OUTCOME_LIMIT = 100  # characters of an observed outcome shown


def group_of(col: Column) -> tuple[str, str, str, str]:
    """(GPU, driver, runtime, ctxlab version): what a fleet's groups are."""
    _host, _device, _uuid, driver, runtime, version = col.key
    return (col.gpu, driver, runtime, version)


def group_label(group: tuple[str, str, str, str]) -> str:
    """A group in words: ``NVIDIA H200 / driver 13000 / runtime 13020 / ctxlab 0.2.0``."""
    gpu, driver, runtime, version = group
    return f"{gpu} / driver {driver} / runtime {runtime} / ctxlab {version}"


def _outcome(m: Matrix, row: str, c: int, verdict: str) -> str:
    text = m.observed(row, c) if verdict == "observed" else None
    if text is not None:
        text = text if len(text) <= OUTCOME_LIMIT else text[: OUTCOME_LIMIT - 1] + "…"
        return f"observed: {text}"
    return verdict


def fleet_groups(m: Matrix) -> dict[tuple[str, str, str, str], list[int]]:
    """Each group and its columns, in the order first met."""
    groups: dict[tuple[str, str, str, str], list[int]] = {}
    for c, col in enumerate(m.columns):
        groups.setdefault(group_of(col), []).append(c)
    return groups


def differences(m: Matrix) -> list[tuple[str, list[tuple[tuple[str, str, str, str], Counter]]]]:
    """(claim, [(group, outcome counts)]) for every claim whose outcomes differ between groups."""
    if "differences" in m.memo:  # the Markdown and the HTML view ask for the same
        return m.memo["differences"]
    groups = fleet_groups(m)
    out: list[tuple[str, list[tuple[tuple[str, str, str, str], Counter]]]] = []
    for row in m.rows if len(groups) > 1 else ():
        verdicts = m.verdicts(row)
        # The same recorded outcomes in every group read the same however normalised: nothing to normalise.
        recorded = [(v, m.outcomes.get((row, c)) if v == "observed" else None) for c, v in enumerate(verdicts)]
        if len({frozenset(recorded[c] for c in cols) for cols in groups.values()}) == 1:
            continue
        per_group = [(group, Counter(_outcome(m, row, c, verdicts[c]) for c in cols))
                     for group, cols in groups.items()]
        kinds = {frozenset(counts) for _, counts in per_group}
        if len(kinds) > 1:
            out.append((row, per_group))
    m.memo["differences"] = out
    return out


def _counts_text(counts: Counter) -> str:
    return ", ".join(f"{outcome} ×{n}" for outcome, n in counts.most_common())


def differs_markdown(m: Matrix) -> list[str]:
    """The view as Markdown lines (a heading, the groups, the claims that differ), then the matrix's heading;
    nothing for a fleet of one group."""
    md = escape.markdown
    groups = fleet_groups(m)
    if len(groups) < 2:
        return []
    lines = ["## Where the fleet differs", ""]
    numbered = {group: n for n, group in enumerate(groups, 1)}
    lines += [f"- G{numbered[g]}: {md(group_label(g))}: {len(cols)} runner(s)" for g, cols in groups.items()]
    found = differences(m)
    if not found:
        lines += ["", f"No claim differs between the {len(groups)} groups."]
    else:
        lines += ["", f"**{len(found)} claim(s) differ between groups:**", ""]
        for row, per_group in found:
            parts = "; ".join(f"G{numbered[g]}: {md(_counts_text(counts))}" for g, counts in per_group)
            lines.append(f"- **{md(row)}**: {parts}")
    return [*lines, "", "## Every runner", ""]


def differs_html(m: Matrix) -> str:
    """The view as HTML (a heading, the groups, the claims that differ); nothing for a fleet of one group."""
    h = escape.html
    groups = fleet_groups(m)
    if len(groups) < 2:
        return ""
    numbered = {group: n for n, group in enumerate(groups, 1)}
    items = "".join(f"<li>G{numbered[g]}: {h(group_label(g))}: {len(cols)} runner(s)</li>"
                    for g, cols in groups.items())
    found = differences(m)
    if not found:
        body = f"<p>No claim differs between the {len(groups)} groups.</p>"
    else:
        rows = "".join(
            f"<li><b>{h(row)}</b>: "
            + "; ".join(f"G{numbered[g]}: {h(_counts_text(counts))}" for g, counts in per_group) + "</li>"
            for row, per_group in found)
        body = f"<p><b>{len(found)} claim(s) differ between groups:</b></p><ul>{rows}</ul>"
    return f"<h2>Where the fleet differs</h2><ul>{items}</ul>{body}<h2>Every runner</h2>"
