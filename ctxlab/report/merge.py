"""``ctxlab report merge``: one matrix of claims against runners, from several check results."""

from __future__ import annotations

import html

from ctxlab.record import LabResult


def runner_label(run: LabResult) -> str:
    env = run.environment
    return (f"{env.get('gpu', '?')} / driver {env.get('driver_version', '?')} / runtime "
            f"{env.get('runtime_version', '?')} / {env.get('hostname', '?')}")


def matrix(files: list[tuple[str, list[LabResult]]]) -> tuple[list[str], list[str], dict]:
    """(runners, claim ids, {(claim, runner): verdict}); a lab error shows as ``error``."""
    runners: list[str] = []
    claims: list[str] = []
    cells: dict = {}
    for _, runs in files:
        for run in runs:
            runner = runner_label(run)
            if runner not in runners:
                runners.append(runner)
            for claim in run.claims:
                if claim.id not in claims:
                    claims.append(claim.id)
                cells[(claim.id, runner)] = claim.verdict
            if run.errors:
                key = f"{run.lab} (lab errors)"
                if key not in claims:
                    claims.append(key)
                cells[(key, runner)] = "error"
    return runners, claims, cells


def render_markdown(files) -> str:
    runners, claims, cells = matrix(files)
    lines = ["| claim | " + " | ".join(runners) + " |", "|---|" + "---|" * len(runners)]
    for claim in claims:
        lines.append(f"| {claim} | " + " | ".join(cells.get((claim, r), "-") for r in runners) + " |")
    return "\n".join(lines) + "\n"


def render_html(files) -> str:
    runners, claims, cells = matrix(files)
    colour = {"holds": "#cfc", "fails": "#f99", "changed": "#ffc", "observed": "#cef", "skipped": "#eee",
              "error": "#f66"}
    head = "".join(f"<th>{html.escape(r)}</th>" for r in runners)
    rows = []
    for claim in claims:
        tds = "".join(f'<td style="background:{colour.get(cells.get((claim, r)), "#fff")}">'
                      f"{html.escape(cells.get((claim, r), '-'))}</td>" for r in runners)
        rows.append(f"<tr><th>{html.escape(claim)}</th>{tds}</tr>")
    return ("<!doctype html><meta charset=utf-8><title>ctxlab matrix</title>"
            f"<table border=1 cellspacing=0 cellpadding=4><tr><th>claim</th>{head}</tr>{''.join(rows)}</table>\n")
