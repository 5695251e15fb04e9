"""Claims: documented statements, judged as pure functions of observations.

A lab declares its claims; ``judge`` applies them to what was observed. The
CPU tests apply the same claims to observations recorded on a real GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ctxlab.record import ClaimResult, Observation

Verdict = tuple[str, str]  # (verdict, evidence)


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: str
    judge: Callable[[Sequence[Observation]], Verdict]

    def result(self, observations: Sequence[Observation]) -> ClaimResult:
        try:
            verdict, evidence = self.judge(observations)
        except MissingObservation as exc:
            verdict, evidence = "skipped", f"not observed in this run: {exc}"
        except ScenarioSkipped as exc:
            verdict, evidence = "skipped", str(exc)
        return ClaimResult(self.id, self.statement, self.source, verdict, evidence)


class MissingObservation(LookupError):
    pass


class ScenarioSkipped(Exception):
    """The scenario a claim rests on recorded why it did not run (no nvcc, a runtime too old...)."""


def judge(claims: Iterable[Claim], observations: Sequence[Observation]) -> tuple[ClaimResult, ...]:
    return tuple(claim.result(observations) for claim in claims)


def select(observations: Sequence[Observation], what: str, scenario: str | None = None) -> list[Observation]:
    return [o for o in observations if o.what == what and (scenario is None or o.scenario == scenario)]


def one(observations: Sequence[Observation], what: str, scenario: str | None = None) -> Observation:
    found = select(observations, what, scenario)
    if not found:
        where = f" in scenario {scenario}" if scenario else ""
        raise MissingObservation(f"{what}{where}")
    return found[0]


def unless_skipped(observations: Sequence[Observation], scenario: str) -> None:
    """Raise ScenarioSkipped with the recorded reason if ``scenario`` recorded a 'skipped' observation."""
    found = select(observations, "skipped", scenario)
    if found:
        raise ScenarioSkipped(str(found[0].value))


def documented(ok: bool, evidence_ok: str, evidence_bad: str) -> Verdict:
    """A promise from current documentation: holds, or fails."""
    return ("holds", evidence_ok) if ok else ("fails", evidence_bad)


def old_text(agrees_with_old: bool, evidence_old: str, evidence_new: str) -> Verdict:
    """A statement of the old text: holds where the driver still does it, changed where it does not."""
    return ("holds", evidence_old) if agrees_with_old else ("changed", evidence_new)
