"""The CI step summary ``ctxlab check --markdown`` writes: verdict counts, what failed, what drifted. Each
text is cut after ``text.MARKDOWN_CHARS`` characters, saying so (a step summary holds 1 MiB in all)."""

from __future__ import annotations

from ctxlab.records.model import LabResult
from ctxlab.records.schema import FAILING
from ctxlab.report.text import environment_line, verdict_counts
from ctxlab.report.text import markdown_cell as md


def drift_line(d: dict) -> str:
    """One drift (``suite.drift``) as a line: what, on which GPU, how, now and before."""
    now = f": now {d['now']}" if "now" in d else ""
    was = f" (was {d['was']})" if "was" in d else ""
    return f"{d['item']} on GPU {d['device']}: {d['change']}{now}{was}"


def summary_markdown(runs: list[LabResult], drifted: list[dict] | None = None) -> str:
    """Verdict counts per lab, every failing claim and lab error, and the drift against a baseline."""
    lines = ["# ctxlab check", ""]
    lines += ["| lab | GPU | verdicts | errors | seconds |", "|---|---|---|---|---|"]
    for run in runs:
        counts = ", ".join(f"{n} {v}" for v, n in sorted(verdict_counts(run).items())) or "none"
        lines.append(f"| {md(run.lab)} | {md(environment_line(run) or run.environment.get('device'))} | {md(counts)} | "
                     f"{len(run.errors)} | {run.seconds:.2f} |")
    failures = [(run.lab, c) for run in runs for c in run.claims if c.verdict in FAILING]
    errors = [(run.lab, e) for run in runs for e in run.errors]
    lines += ["", "## Failures", ""]
    if not failures and not errors:
        lines.append("None: no documented claim failed and every lab ran.")
    for lab, claim in failures:
        lines.append(f"- **{md(claim.id)}** ({md(lab)}): {md(claim.verdict)}: {md(claim.evidence)} "
                     f"(source: {md(claim.source)})")
    for lab, error in errors:
        lines.append(f"- **{md(lab)}** error in {md(error.get('scenario'))}: {md(error.get('kind'))}: "
                     f"{md(error.get('message'))}")
    if drifted is not None:
        lines += ["", "## Drift against the baseline", ""]
        if not drifted:
            lines.append("None.")
        lines += [f"- {md(drift_line(d))}" for d in drifted]
    return "\n".join(lines) + "\n"
