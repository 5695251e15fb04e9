"""Check levels, as ``dcgmi diag -r 1|2|3`` has them: how much of the catalogue a run judges, for the places
that need a fast answer (a Slurm HealthCheckProgram, a Node Problem Detector plugin, a node_exporter timer).

Each claim declares the lowest level that judges it (``Claim.level``). A level runs only the scenarios its
claims need; below the full level each scenario runs once, undefined-behaviour ones too. A claim above the
run's level gets the verdict ``unjudged`` with the reason, counted apart from ``skipped``: never silently
missing. Kept apart from the lab model so that ``ctxlab --help`` can show the levels without loading it.
"""

from __future__ import annotations

FULL = 3  # the default: every claim, undefined-behaviour scenarios repeated
LEVELS = {
    1: "node health: the environment and the promises a context handoff rests on (pointers, globals and streams "
       "follow a migrated context, primary-context retain/release, the runtime binding the primary context), each "
       "scenario once",
    2: "every promise and old-text claim (documented behaviour), each scenario once, undefined-behaviour ones too",
    3: "every claim, undefined-behaviour scenarios repeated in fresh processes (the full check)",
}


def default_level(kind: str) -> int:
    """The lowest level that judges a claim of this kind unless it names one: documented behaviour (a promise,
    old text) from level 2, an observation (nothing promised) at the full level."""
    return 2 if kind in ("promise", "old-text") else FULL


def unjudged_reason(claim_level: int, run_level: int) -> str:
    """The evidence of a claim that a run at ``run_level`` does not judge."""
    return (f"not judged at level {run_level} ({LEVELS[run_level]}): ctxlab check --level {claim_level} "
            "and above judge it")
