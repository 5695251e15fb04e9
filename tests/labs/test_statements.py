"""Statements say only what their predicates check (issue 25)."""

from __future__ import annotations

import pytest

import ctxlab

CLAIMS = {c.id: c for c in ctxlab.claims()}

# What a statement said that its predicate never read, and what it says now that the predicate reads.
OVERCLAIMS = {
    # runtime_device is only printed in the evidence: no predicate compares it with device 0
    "migrate.runtime-binds-primary": ("device 0 unless", "allocates in that context"),
    # the predicate counts the old pointer's validity and every wrong value, the new allocation's and cached
    # kernel's included; only the lab's own retains are held, so "whoever else" was never tried
    "refcount.device-reset-destroys": ("whoever else retains it", "a kernel cached before the reset"),
    # only "at least one release accepted beyond the lab's" is checked; the inactive state is primary-count's
    "refcount.runtime-holds-reference": ("makes it inactive", "at least one release beyond the lab's own"),
}


@pytest.mark.parametrize("claim_id", sorted(OVERCLAIMS))
def test_the_statement_no_longer_says_what_is_not_checked(claim_id):
    said, checked = OVERCLAIMS[claim_id]
    statement = CLAIMS[claim_id].statement
    assert said not in statement and checked in statement, statement
