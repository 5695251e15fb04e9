"""Which recorded verdicts fail a gate (exit status 1): ``fails`` and ``error``, and a run's errors."""

from __future__ import annotations

from typing import Iterable

from ctxlab.record import LabResult

# Compared as strings so this holds whichever verdicts record.VERDICTS lists.
FAILING = frozenset({"fails", "error"})


def run_fails(run: LabResult) -> bool:
    """A run fails the gate when a claim fails or errs, or a scenario crashed or timed out."""
    return bool(run.errors) or any(claim.verdict in FAILING for claim in run.claims)


def any_fails(runs: Iterable[LabResult]) -> bool:
    """True when any run fails the gate."""
    return any(run_fails(run) for run in runs)
