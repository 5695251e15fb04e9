"""Cases for modules's claims (see tests/claim_cases/__init__.py)."""

from tests.claim_cases import Case

CASES: dict[str, Case] = {}
