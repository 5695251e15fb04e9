"""Immutable result records and their JSON objects (schema ``ctxlab/1``, documented in docs/schema.md).

A file holds one run (``{"schema": "ctxlab/1", "lab": ...}``) or several
(``{"schema": "ctxlab/1", "runs": [...]}``); ``dumps`` writes both, ``ctxlab.records.files.load_runs``
reads both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ctxlab.records.schema import FAILING, KINDS, NOT_JUDGED, SCHEMA, VERDICTS


class ResultFileError(ValueError):
    """A result file that cannot be read: missing, not JSON, another schema, or malformed."""


@dataclass(frozen=True)
class Observation:
    """One recorded step: which thread did what, the context it had current, and the value seen."""

    step: str
    thread: str
    context_id: int | None
    what: str
    value: Any = None
    context: int | None = None  # the CUcontext handle the thread saw
    scenario: str | None = None
    round: int | None = None
    events: tuple = ()  # CUPTI events caused by this step, when traced
    repeat: int | None = None  # which run of a repeated scenario (undefined-behaviour territory) made it

    def to_dict(self) -> dict:
        """The JSON object of this observation (optional fields only when set)."""
        out = {"step": self.step, "thread": self.thread, "context_id": self.context_id,
               "context": self.context, "what": self.what, "value": self.value}
        if self.scenario is not None:
            out["scenario"] = self.scenario
        if self.round is not None:
            out["round"] = self.round
        if self.repeat is not None:
            out["repeat"] = self.repeat
        if self.events:
            out["events"] = list(self.events)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Observation:
        """Read back what ``to_dict`` wrote: the object ``cls(...)`` makes of the same fields, its fields set
        at once rather than one frozen ``__setattr__`` each (a fleet's files hold hundreds of thousands; the
        class has no ``__post_init__`` to skip)."""
        made = object.__new__(cls)
        made.__dict__.update(step=data["step"], thread=data["thread"], context_id=data.get("context_id"),
                             what=data["what"], value=data.get("value"), context=data.get("context"),
                             scenario=data.get("scenario"), round=data.get("round"),
                             events=tuple(data.get("events", ())), repeat=data.get("repeat"))
        return made


@dataclass(frozen=True)
class ClaimResult:
    """One claim's verdict in one run, with the evidence sentence built from what was observed."""

    id: str
    statement: str
    source: str
    verdict: str
    evidence: str
    kind: str = "observation"  # promise, old-text or observation (files before the field: observation)
    # Why a skipped or unjudged claim was not judged, as a structure (ctxlab.records.skips: its kind and that
    # kind's fields; the sentence is the evidence); kept on an error made of a skip the run's record contradicts.
    # None in files written before the field, and for every other verdict.
    skip: dict | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if self.kind not in KINDS:
            raise ValueError(f"claim kind {self.kind!r} is not one of {', '.join(KINDS)}")

    def to_dict(self) -> dict:
        """The JSON object of this verdict (``skip`` only when set)."""
        out: dict[str, Any] = {"id": self.id, "statement": self.statement, "source": self.source,
                               "kind": self.kind, "verdict": self.verdict, "evidence": self.evidence}
        if self.skip is not None:
            out["skip"] = self.skip
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ClaimResult:
        """Read back what ``to_dict`` wrote."""
        skip = data.get("skip")
        return cls(**{k: data[k] for k in ("id", "statement", "source", "verdict", "evidence")},
                   kind=data.get("kind", "observation"), skip=dict(skip) if skip is not None else None)


@dataclass(frozen=True)
class LabResult:
    """One lab's run: environment, options, every observation, the verdicts, and what broke."""

    lab: str
    started: str
    seconds: float
    environment: dict
    options: dict
    observations: tuple[Observation, ...]
    claims: tuple[ClaimResult, ...]
    errors: tuple[dict, ...] = ()  # scenarios that crashed or timed out in their child process
    metrics: dict = field(default_factory=dict)
    trace: tuple = ()
    timings: dict = field(default_factory=dict)  # seconds per scenario (each a child process)
    views: dict = field(default_factory=dict)  # step tables: observation kind -> value fields shown as columns
    flags: tuple = ()  # outcomes to look at whatever the verdicts: silent wrong results
    # A node that could not run at all (no driver, no GPU, device missing): why, and what was found
    # (``ctxlab.records.environment_error``); such a run has no claims and one error of kind "environment".
    environment_error: dict = field(default_factory=dict)
    # How the scenarios were isolated (harness.batch): scenarios that shared a child, and any re-run in fresh
    # children because one before them left the shared child unclean, crashed or hung (and why).
    isolation: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """A documented promise failed, a claim could not be judged, or a scenario broke."""
        return any(c.verdict in FAILING for c in self.claims) or bool(self.errors)

    def to_dict(self) -> dict:
        """The JSON object of this run (schema ``ctxlab/1``; optional sections only when not empty)."""
        out = {"schema": SCHEMA, "lab": self.lab, "started": self.started, "seconds": round(self.seconds, 4),
               "environment": self.environment, "options": self.options,
               "observations": [o.to_dict() for o in self.observations],
               "claims": [c.to_dict() for c in self.claims]}
        if self.errors:
            out["errors"] = list(self.errors)
        if self.metrics:
            out["metrics"] = self.metrics
        if self.trace:
            out["trace"] = list(self.trace)
        if self.timings:
            out["timings"] = self.timings
        if self.views:
            out["views"] = {k: list(v) for k, v in self.views.items()}
        if self.flags:
            out["flags"] = list(self.flags)
        if self.environment_error:
            out["environment_error"] = self.environment_error
        if self.isolation:
            out["isolation"] = self.isolation
        return out

    @classmethod
    def from_dict(cls, data: dict) -> LabResult:
        """Read back what ``to_dict`` wrote (files from before a field existed get its default)."""
        return cls(lab=data["lab"], started=data["started"], seconds=float(data["seconds"]),
                   environment=dict(data["environment"]), options=dict(data.get("options", {})),
                   observations=tuple(map(Observation.from_dict, data["observations"])),
                   claims=tuple(map(ClaimResult.from_dict, data["claims"])),
                   errors=tuple(data.get("errors", ())), metrics=dict(data.get("metrics", {})),
                   trace=tuple(data.get("trace", ())), timings=dict(data.get("timings", {})),
                   views={str(k): tuple(v) for k, v in dict(data.get("views", {})).items()},
                   flags=tuple(data.get("flags", ())),
                   environment_error=dict(data.get("environment_error", {})),
                   isolation=dict(data.get("isolation", {})))


def dumps(runs: list[LabResult], as_list: bool = False) -> str:
    """One run as its object; several (or any number, with ``as_list``) under ``runs``."""
    if len(runs) == 1 and not as_list:
        return json.dumps(runs[0].to_dict(), indent=2)
    return json.dumps({"schema": SCHEMA, "runs": [r.to_dict() for r in runs]}, indent=2)


def nothing_judged(runs: list[LabResult]) -> str | None:
    """Why a set of runs that ran judged no claim at all (every claim skipped or left unjudged), in one line; None
    where a claim was judged, or where no run ran (a node that could not run says so by its own record)."""
    ran = [run for run in runs if not run.environment_error]
    claims = [c for run in ran for c in run.claims]
    if not ran or any(c.verdict not in NOT_JUDGED for c in claims):
        return None
    first = next((c for c in claims if c.verdict == "skipped"), claims[0] if claims else None)
    why = f" (the first: {first.id}: {first.evidence})" if first is not None else ""
    return f"nothing judged: all {len(claims)} claims of {len(ran)} lab run(s) were skipped or left unjudged{why}"
