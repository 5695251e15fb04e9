"""Cases for tests/labs/test_claims_can_fail.py: for each claim with a promise (or a
statement of the old text), edits of a run recorded on a real GPU after which
the claim holds, and edits after which it fails (or reads ``changed``).

An edit is a function from the recorded observations to new ones. Start from
the real run and change only the values the claim is about, so each case shows
that the claim's predicate reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ctxlab.records.model import Observation

Edit = Callable[[list[Observation]], list[Observation]]


@dataclass(frozen=True)
class Case:
    """``fixture``: a file under labs/results, or a list of observations written in the test; ``keep``: edits
    after which the claim holds (none: the fixture holds it); ``breaks``: edits after which it fails, or is
    ``changed``; ``holds_too``: other lists of edits after which it holds as well (each applied to the fixture):
    for a predicate with alternatives (``a or b``), so each alternative is shown to keep it alone."""

    fixture: str | Sequence[Observation]
    breaks: Sequence[Edit]
    keep: Sequence[Edit] = ()
    holds_too: Sequence[Sequence[Edit]] = ()
    unmet: Sequence[Sequence[Edit]] = ()  # edits (of the fixture) after which its precondition fails: skipped
    # edits (of the fixture) after which the run cannot decide it (the claim raises Inapplicable): skipped, with why
    inapplicable: Sequence[Sequence[Edit]] = ()


def _matches(o: Observation, what: str, scenario: str | None, where: Callable[[Any], bool] | None) -> bool:
    return o.what == what and (scenario is None or o.scenario == scenario) and (where is None or where(o.value))


def _set(value: Any, path: str, new: Any) -> Any:
    if path == "_value":
        return new
    head, _, rest = path.partition(".")
    if not isinstance(value, dict):
        raise TypeError(f"cannot set {path} in {value!r}")
    copy = dict(value)
    copy[head] = _set(copy.get(head), rest, new) if rest else new
    return copy


def edit(what: str, scenario: str | None = None, where: Callable[[Any], bool] | None = None,
         **fields: Any) -> Edit:
    """Set value fields (``a__b`` for ``value["a"]["b"]``; ``_value`` for the whole value) in every matching
    observation; an edit that matches nothing is a broken case and raises."""

    def apply(observations: list[Observation]) -> list[Observation]:
        hit, out = False, []
        for o in observations:
            if _matches(o, what, scenario, where):
                hit = True
                value = o.value
                for key, new in fields.items():
                    value = _set(value, key.replace("__", "."), new)
                o = dataclasses.replace(o, value=value)
            out.append(o)
        if not hit:
            raise LookupError(f"the case edits {what!r} in {scenario!r}, which the fixture does not hold")
        return out

    return apply


def on_thread(what: str, scenario: str, thread: str) -> Edit:
    """Say the matching observations were made on ``thread`` (the recorder's thread name)."""

    def apply(observations: list[Observation]) -> list[Observation]:
        out = [dataclasses.replace(o, thread=thread) if _matches(o, what, scenario, None) else o
               for o in observations]
        if out == observations:
            raise LookupError(f"the case moves {what!r} in {scenario!r}, which the fixture does not hold")
        return out

    return apply


def without(what: str, scenario: str) -> Edit:
    """Drop the matching observations (a step the recorder did not record)."""

    def apply(observations: list[Observation]) -> list[Observation]:
        out = [o for o in observations if not _matches(o, what, scenario, None)]
        if len(out) == len(observations):
            raise LookupError(f"the case drops {what!r} in {scenario!r}, which the fixture does not hold")
        return out

    return apply


def change(what: str, scenario: str | None, fn: Callable[[dict], dict]) -> Edit:
    """Set fields computed from each matching observation's own value (``fn(value) -> fields``): for
    edits that copy one recorded handle over another, whatever the run recorded."""

    def apply(observations: list[Observation]) -> list[Observation]:
        out = []
        for o in observations:
            if _matches(o, what, scenario, None):
                o = dataclasses.replace(o, value={**o.value, **fn(o.value)})
            out.append(o)
        if out == list(observations):
            raise LookupError(f"the case changes {what!r} in {scenario!r}, which the fixture does not hold")
        return out

    return apply


def repeat_with(what: str, scenario: str, **fields: Any) -> Edit:
    """Add one more repeat of ``scenario`` whose ``what`` observation has these fields changed
    (the other repeats stay as recorded): for claims judged over a distribution."""

    def apply(observations: list[Observation]) -> list[Observation]:
        mine = [o for o in observations if o.scenario == scenario]
        if not mine:
            raise LookupError(f"the fixture has no scenario {scenario!r}")
        last = max((o.repeat or 0) for o in mine) + 1
        extra = [dataclasses.replace(o, repeat=last) for o in mine]
        return observations + edit(what, scenario, **fields)(extra)

    return apply


def in_repeat(repeat: int, change: Edit) -> Edit:
    """Apply ``change`` to the observations of one repeat only (the others stay as recorded, in their places):
    for claims that must judge every repeat of a scenario, not the first."""

    def apply(observations: list[Observation]) -> list[Observation]:
        places = [i for i, o in enumerate(observations) if o.repeat == repeat]
        if not places:
            raise LookupError(f"the fixture has no repeat {repeat}")
        changed = change([observations[i] for i in places])
        if len(changed) != len(places):
            raise ValueError("in_repeat edits values; it does not add or remove observations")
        out = list(observations)
        for i, o in zip(places, changed, strict=True):
            out[i] = o
        return out

    return apply


def drop(what: str, scenario: str | None = None, where: Callable[[Any], bool] | None = None) -> Edit:
    """Remove every matching observation."""

    def apply(observations: list[Observation]) -> list[Observation]:
        return [o for o in observations if not _matches(o, what, scenario, where)]

    return apply


def forget(what: str, scenario: str | None, key: str) -> Edit:
    """Drop one field from every matching observation's value: a recording made before the lab recorded it."""

    def apply(observations: list[Observation]) -> list[Observation]:
        out = [dataclasses.replace(o, value={k: v for k, v in o.value.items() if k != key})
               if _matches(o, what, scenario, None) and key in o.value else o for o in observations]
        if out == list(observations):
            raise LookupError(f"the case forgets {key!r} of {what!r} in {scenario!r}, which the fixture does not hold")
        return out

    return apply


def both(*edits: Edit) -> Edit:
    """Several edits as one case (applied in order): outcomes that break a claim only together, or two
    repeats that each break it differently."""

    def apply(observations: list[Observation]) -> list[Observation]:
        for e in edits:
            observations = e(observations)
        return observations

    return apply


def recorded_now(what: str, scenario: str | None, compared: Sequence[str], **fields: Any) -> Edit:
    """An observation as its child records it since the claim makes the comparison (``ctxlab.claim.decided``):
    ``fields`` (both sides of it) set, the child's own answers under ``compared`` gone. Recordings made before
    carry only those answers, which the claim reads there."""
    return both(edit(what, scenario, **fields), *(forget(what, scenario, key) for key in compared))
