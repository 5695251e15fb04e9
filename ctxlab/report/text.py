"""Shared wording for the reporters: how a value, a context and an environment read."""

from __future__ import annotations

import json

from ctxlab.record import LabResult, Observation

VERDICT_STYLE = {"holds": "green", "fails": "bold red", "changed": "yellow", "observed": "cyan", "skipped": "dim",
                 "error": "bold magenta"}


def short(value, limit: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def context_label(obs: Observation) -> str:
    if obs.context_id is None and not obs.context:
        return "-"
    ident = "?" if obs.context_id is None else str(obs.context_id)
    return f"{ident} ({obs.context:#x})" if obs.context else ident


def environment_line(run: LabResult) -> str:
    env = run.environment
    parts = [env.get("gpu"), f"cc {env['compute_capability']}" if env.get("compute_capability") else None,
             f"driver {env['driver_version']}" if env.get("driver_version") else None,
             f"runtime {env['runtime_version']}" if env.get("runtime_version") else None,
             f"cupy {env['cupy']}" if env.get("cupy") else None,
             f"cuda-bindings {env['cuda_bindings']}" if env.get("cuda_bindings") else None]
    return ", ".join(p for p in parts if p)


def verdict_counts(run: LabResult) -> dict[str, int]:
    counts: dict[str, int] = {}
    for claim in run.claims:
        counts[claim.verdict] = counts.get(claim.verdict, 0) + 1
    return counts


def lab_views(run: LabResult) -> dict[str, tuple[str, ...]]:
    """A run's step tables as its record carries them: observation kind -> the value fields shown as columns."""
    return {kind: tuple(fields) for kind, fields in run.views.items()}


def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and value > 0xFFFFF:
        return f"{value:#x}"
    return short(value, 60)
