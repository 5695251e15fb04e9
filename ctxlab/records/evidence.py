"""Evidence as drift and the fleet view compare it: handles, addresses and figures blanked."""

from __future__ import annotations

import re

_VOLATILE = [
    (re.compile(r"0x[0-9a-fA-F]{5,}"), "0x…"),       # handles and addresses change every run
    (re.compile(r"\b\d+\.\d+\b"), "#.#"),             # rates and timings
]


def normalize(evidence: str) -> str:
    """Evidence with handles, addresses and figures blanked: what drift compares."""
    for pattern, replacement in _VOLATILE:
        evidence = pattern.sub(replacement, evidence)
    return evidence
