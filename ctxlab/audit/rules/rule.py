"""What a rule of the audit is: a hazard, declared beside its predicate in its family's module, and gathered in
run order by ``catalogue.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlab.audit.engine import SEVERITIES, Hit, Stream

# The rules that stand on the calls' own statuses and parameters: no lab claim demonstrates them.
NO_CLAIM = ""


@dataclass(frozen=True)
class Rule:
    """A hazard the audit looks for."""

    id: str
    severity: str  # error, warning or info
    title: str  # one line: the hazard
    explanation: str  # what goes wrong, and what to do instead
    claim: str  # the claim id of the lab that demonstrates it, or NO_CLAIM
    predicate: Callable[[Stream], list[Hit]]
    cannot_see: str  # what the rule cannot see
    # a finding of this rule is dropped where one of these explains the same thread's calls ("*": on any thread)
    superseded_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: severity {self.severity!r} is not one of {SEVERITIES}")
