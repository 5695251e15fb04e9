"""Claims: documented statements, judged as pure functions of observations.

A claim states what it expects as code. ``facts`` reads the values that decide
it from the observations; ``expect`` (a predicate over those facts) decides a
promise (``holds``/``fails``) or a statement of the old text (``holds``/``changed``);
an ``observation`` claim has no predicate and is ``observed``. The evidence
sentence is one template filled with the facts, the same whatever the verdict,
so it can never state a conclusion the values did not decide.

What cannot be judged is said, never hidden: a judge that raises, or a promise
whose observation is missing, gives ``error``; a claim whose scenarios were not
selected, or recorded why they could not run, gives ``skipped`` with the reason, and keeps the reason's
structure (``ctxlab.records.skips``: its kind and that kind's fields) in the result's ``skip``; given the run's
environment record, ``judge`` makes ``error`` of a skip that record contradicts.
A promise may name a ``precondition`` (a predicate over the same facts) under
which alone it promises anything: where its expectation holds but the
precondition did not, the verdict is ``skipped`` (never ``holds``), and the
evidence says which precondition failed, then what was seen. An expectation
that fails still ``fails``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlab.levels import FULL, default_level, unjudged_reason
from ctxlab.records import skips
from ctxlab.records.model import ClaimResult, Observation
from ctxlab.records.schema import KINDS, SILENT_WRONG

Facts = Mapping[str, Any]
Observations = Sequence[Observation]


class MissingObservation(LookupError):
    """A claim needs an observation the run does not hold."""


class Inapplicable(Exception):
    """The run was made so that this claim cannot be decided (untraced, a runtime too old): skipped, with why.
    ``skip``: the structured reason a scenario recorded for it (a library's, ``ctxlab.records.skips``), where it
    recorded one; else the skip's kind is ``inapplicable``."""

    def __init__(self, why: str, skip: Mapping[str, Any] | None = None):
        super().__init__(why)
        self.skip = skips.structure_of(skip) or {"kind": "inapplicable"}


@dataclass(frozen=True)
class Claim:
    """A statement with its source, the scenarios that decide it, and how it is judged.

    ``facts(observations) -> dict`` reads the deciding values; ``expect(facts) -> bool``
    (promise and old-text claims only) says whether they keep the statement;
    ``evidence`` is a ``str.format`` template over the facts.
    """

    id: str
    statement: str
    source: str
    kind: str
    scenarios: tuple[str, ...]
    facts: Callable[[Observations], Facts]
    evidence: str
    expect: Callable[[Facts], bool] | None = None
    precondition: Callable[[Facts], bool] | None = None
    unmet: str = ""  # a str.format template over the facts: why the precondition did not hold
    # Which error its undefined behaviour meets varies between runs of the same code (recorded): drift compares
    # whether each repeat met an error, a silent wrong result, a correct value or a crash, not which error.
    error_varies: bool = False
    # The lowest check level that judges it (``ctxlab.levels``); None: by its kind (documented behaviour from
    # level 2, an observation at the full level). Level 1 claims are the node-health promises.
    level: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.id}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if (self.expect is None) != (self.kind == "observation"):
            raise ValueError(f"{self.id}: a {self.kind} claim {'needs' if self.expect is None else 'takes no'} expect")
        if not self.scenarios:
            raise ValueError(f"{self.id}: name the scenarios that decide it")
        if (self.precondition is None) != (not self.unmet) or (self.precondition and self.expect is None):
            raise ValueError(f"{self.id}: a precondition needs an expectation and an 'unmet' template, and the reverse")
        if self.level is not None and not 1 <= self.level <= FULL:
            raise ValueError(f"{self.id}: level {self.level} is not one of 1 to {FULL}")

    @property
    def lowest_level(self) -> int:
        """The lowest check level that judges this claim."""
        return self.level if self.level is not None else default_level(self.kind)

    def result(self, observations: Observations, ran: Collection[str] | None = None,
               level: int = FULL) -> ClaimResult:
        """Judge over ``observations``; ``ran`` names the scenarios this run included (None: all); a run at a
        ``level`` below the claim's own does not judge it (``unjudged``, with the reason)."""
        skip: dict | None
        if self.lowest_level > level:
            evidence = unjudged_reason(self.lowest_level, level)
            verdict, skip = "unjudged", skips.structure_of(skips.level(self.lowest_level, level, evidence))
        else:
            verdict, evidence, skip = self._judge(observations, ran)
        return ClaimResult(self.id, self.statement, self.source, verdict, evidence, self.kind, skip)

    def _judge(self, observations: Observations, ran: Collection[str] | None) -> tuple[str, str, dict | None]:
        """The verdict, its evidence, and for a skip its structured reason (None where a scenario recorded its
        reason as text alone, as older recordings did)."""
        if ran is not None and not set(self.scenarios) & set(ran):
            unselected = skips.not_selected(self.scenarios)
            return "skipped", unselected["why"], skips.structure_of(unselected)
        for scenario in self.scenarios:
            reasons = select(observations, "skipped", scenario)
            if reasons:
                value = reasons[0].value
                return "skipped", f"{scenario}: {skips.text_of(value)}", skips.structure_of(value)
        try:
            facts = self.facts(observations)
            evidence = self.evidence.format(**facts)
            if self.expect is None:
                return "observed", evidence, None
            kept = bool(self.expect(facts))
            if kept and self.precondition is not None and not self.precondition(facts):
                why = f"precondition not met: {self.unmet.format(**facts)}; seen: {evidence}"
                return "skipped", why, skips.structure_of(skips.precondition(why))
        except Inapplicable as exc:
            return "skipped", str(exc), exc.skip
        except MissingObservation as exc:
            return "error", f"missing observation: {exc}", None
        except Exception as exc:  # the judge broke: say so, never hide it
            return "error", f"the judge raised {type(exc).__name__}: {exc}", None
        if kept:
            return "holds", evidence, None
        return ("fails" if self.kind == "promise" else "changed"), evidence, None


def judge(claims: Iterable[Claim], observations: Observations, ran: Collection[str] | None = None,
          level: int = FULL, environment: Mapping[str, Any] | None = None, gpus: int = 1) -> tuple[ClaimResult, ...]:
    """Every claim's verdict (at a check ``level``); one claim's error never stops the others. Given the run's
    ``environment`` record and the GPUs its lab needs (``Lab.gpus``), a skip whose structured reason that record
    contradicts is ``error`` (``ctxlab.records.skips.confirmed``): the reason's text is not taken on trust."""
    results = tuple(claim.result(observations, ran, level) for claim in claims)
    return results if environment is None else skips.confirmed(results, environment, gpus, level)


# ---------------------------------------------------------------- reading observations

def select(observations: Observations, what: str, scenario: str | None = None) -> list[Observation]:
    """Observations of one kind, optionally of one scenario, in recorded order."""
    return [o for o in observations if o.what == what and (scenario is None or o.scenario == scenario)]


def one(observations: Observations, what: str, scenario: str | None = None) -> Observation:
    """The first observation of one kind (of the first repeat); MissingObservation when there is none."""
    found = select(observations, what, scenario)
    if not found:
        where = f" in scenario {scenario}" if scenario else ""
        raise MissingObservation(f"{what}{where}")
    return found[0]


def some(observations: Observations, what: str, scenario: str | None = None) -> list[Observation]:
    """Every observation of one kind; MissingObservation when there is none."""
    found = select(observations, what, scenario)
    if not found:
        raise MissingObservation(what + (f" in scenario {scenario}" if scenario else ""))
    return found


def repeats(observations: Observations, what: str, scenario: str | None = None) -> list[Any]:
    """The value of one observation kind in every repeat of a scenario (one per repeat)."""
    return [o.value for o in some(observations, what, scenario)]


def decided(value: Mapping[str, Any], recorded: str, decide: Callable[..., Any], *sides: str) -> Any:
    """What a claim decides from what a child compared: ``decide`` over the values recorded under ``sides`` (both
    sides of the comparison), so the decision is the claim's, not the child's. A recording made before the child
    recorded those sides (labs/results) carries the child's own answer under ``recorded``: that is read instead,
    so its verdict stays what it was."""
    if all(side in value for side in sides):
        return decide(*(value[side] for side in sides))
    return value[recorded]


def distribution(values: Iterable[Any]) -> Counter:
    """How often each outcome came back over the repeats."""
    return Counter(str(v) for v in values)


def spread(values: Iterable[Any]) -> str:
    """A distribution as text: ``CUDA_ERROR_X in 3 of 5, correct in 2 of 5`` (one outcome: just it, and the count)."""
    counts = distribution(values)
    total = sum(counts.values())
    if len(counts) == 1:
        (only,) = counts
        return f"{only} (all {total})" if total > 1 else only
    return ", ".join(f"{outcome} in {n} of {total}" for outcome, n in counts.most_common())


def silent_wrong(values: Iterable[Any]) -> int:
    """How many outcomes were wrong values returned without an error."""
    return sum(1 for v in values if str(v).startswith(SILENT_WRONG))


def hexed(value: Any) -> str:
    """A handle, pointer or bit pattern as evidence shows it: hexadecimal (``none`` when absent)."""
    return f"{value:#x}" if isinstance(value, int) and not isinstance(value, bool) else str(value).lower()


def catalogue(claims: Iterable[Claim]) -> list[dict]:
    """What ``ctxlab claims`` lists: id, statement, source, kind, the scenarios that decide it, the lowest check
    level that judges it."""
    return [{"id": c.id, "statement": c.statement, "source": c.source, "kind": c.kind,
             "scenarios": list(c.scenarios), "level": c.lowest_level} for c in claims]
