"""Every claim with a promise can fail, and every statement of the old text can read ``changed``.

For each claim in the catalogue (``ctxlab claims``), starting from a run
recorded on a real GPU: the edits in ``tests/claim_cases`` after which it holds
give ``holds``; the edits that break it give ``fails`` (promise) or ``changed``
(old text). A promise added without such cases fails this suite. Observations
that vanish give ``error``, never ``skipped``.
"""

from __future__ import annotations

import pytest

import ctxlab
from ctxlab.record import LabResult
from tests.claim_cases import Case, drop
from tests.claim_cases.interop import CASES as INTEROP
from tests.claim_cases.lifecycle import CASES as LIFECYCLE
from tests.claim_cases.migrate import CASES as MIGRATE
from tests.claim_cases.modules import CASES as MODULES
from tests.claim_cases.refcount import CASES as REFCOUNT
from tests.conftest import RESULTS

CASES: dict[str, Case] = {**MIGRATE, **REFCOUNT, **LIFECYCLE, **MODULES, **INTEROP}
CLAIMS = ctxlab.claims()
JUDGED = [c for c in CLAIMS if c.kind != "observation"]
BROKEN = {"promise": "fails", "old-text": "changed"}


def fixture_run(name: str) -> LabResult:
    (run,) = ctxlab.load(RESULTS / name)
    return run


def verdict(claim, observations, ran=None):
    return claim.result(observations, ran)


def apply(edits, observations):
    out = list(observations)
    for e in edits:
        out = e(out)
    return out


@pytest.mark.parametrize("claim", JUDGED, ids=lambda c: c.id)
def test_every_judged_claim_has_cases(claim):
    assert claim.id in CASES, f"{claim.id} ({claim.kind}) has no case that makes it fail: add one in tests/claim_cases"
    assert CASES[claim.id].breaks, f"{claim.id}: a case needs at least one breaking edit"


@pytest.mark.parametrize("claim", [c for c in JUDGED if c.id in CASES], ids=lambda c: c.id)
def test_kept_holds_and_broken_fails(claim):
    case = CASES[claim.id]
    run = fixture_run(case.fixture)
    kept = verdict(claim, apply(case.keep, run.observations))
    assert kept.verdict == "holds", kept.evidence
    for breaking in case.breaks:
        broken = verdict(claim, breaking(apply(case.keep, run.observations)))
        assert broken.verdict == BROKEN[claim.kind], broken.evidence
        assert broken.evidence != kept.evidence  # the sentence is built from the values, which changed


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_claim_without_its_observations_is_an_error_not_skipped(claim):
    lab = claim.id.split(".")[0]
    run = fixture_run(f"{lab}.json")
    kinds = {o.what for o in run.observations if o.scenario in claim.scenarios}
    remaining = apply([drop(what) for what in kinds], run.observations)
    result = verdict(claim, remaining)
    assert result.verdict in ("error", "skipped"), result
    if result.verdict == "skipped":  # only a claim that needs a traced run may say so
        assert "--trace" in result.evidence


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_claim_whose_scenarios_did_not_run_is_skipped_with_why(claim):
    result = verdict(claim, [], ran=["some-other-scenario"])
    assert result.verdict == "skipped" and "not run" in result.evidence


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.kind == "observation"], ids=lambda c: c.id)
def test_observation_claims_read_the_recorded_run(claim):
    lab = claim.id.split(".")[0]
    result = verdict(claim, fixture_run(f"{lab}.json").observations)
    assert result.verdict in ("observed", "skipped"), result.evidence
    assert "{" not in result.evidence


def test_a_judge_that_raises_is_an_error_and_the_others_are_still_judged():
    from ctxlab.claim import Claim, judge

    def broken(observations):
        raise ZeroDivisionError("division by zero")

    bad = Claim("x.broken", "s", "src", "promise", ("a",), broken, "{n}", lambda f: True)
    good = Claim("x.good", "s", "src", "promise", ("a",), lambda obs: {"n": len(obs)}, "{n} seen",
                 lambda f: f["n"] == 0)
    results = judge([bad, good], [])
    assert [r.verdict for r in results] == ["error", "holds"]
    assert "ZeroDivisionError" in results[0].evidence
