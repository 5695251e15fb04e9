"""Claims over a repeated scenario judge every repeat, not the first (issue 25: `together` runs three times).

Each case changes one later repeat of the run recorded on the H200 and expects the verdict (promises) or the
evidence (observations) to follow.
"""

from __future__ import annotations

import pytest

import ctxlab
from tests.claim_cases import edit, in_repeat
from tests.conftest import RESULTS

FOREIGN = 0x1234  # a context handle that is not the primary one
CLAIMS = {c.id: c for c in ctxlab.claims(["interop"])}


def observations():
    (run,) = ctxlab.load(RESULTS / "interop.json")
    return list(run.observations)


def _lib(name):
    return lambda v: v["library"] == name


def test_together_ran_three_times_in_the_recorded_run():
    assert sorted({o.repeat for o in observations() if o.scenario == "together"}) == [0, 1, 2]


@pytest.mark.parametrize("lib", ["cupy", "torch", "cuda-core"])
def test_a_foreign_context_in_the_last_repeat_of_together_breaks_the_promise(lib):
    claim = CLAIMS[f"interop.{lib}.context"]
    assert claim.result(observations()).verdict == "holds"
    foreign = in_repeat(2, edit("together", "together", where=_lib(lib), current=FOREIGN,
                                pointer_context=FOREIGN))(observations())
    result = claim.result(foreign)
    assert result.verdict == "fails", result.evidence
    assert "0x1234" in result.evidence


@pytest.mark.parametrize("lib", ["jax", "numba"])
def test_the_observed_context_says_what_every_repeat_of_together_left(lib):
    claim = CLAIMS[f"interop.{lib}.context"]
    recorded = claim.result(observations())
    foreign = claim.result(in_repeat(2, edit("together", "together", where=_lib(lib), current=FOREIGN))(observations()))
    assert recorded.verdict == foreign.verdict == "observed"
    assert foreign.evidence != recorded.evidence and "0x1234" in foreign.evidence and "1 of 3" in foreign.evidence
