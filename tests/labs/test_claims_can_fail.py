"""Every claim with a promise can fail, and every statement of the old text can read ``changed``.

For each claim in the catalogue (``ctxlab claims``), starting from a run
recorded on a real GPU: the edits in ``tests/claim_cases`` after which it holds
give ``holds``; the edits that break it give ``fails`` (promise) or ``changed``
(old text). A promise added without such cases fails this suite. Observations
that vanish give ``error``, never ``skipped``.
"""

from __future__ import annotations

import importlib

import pytest

import ctxlab
from ctxlab.labs import LABS
from ctxlab.records.model import LabResult, Observation
from tests.claim_cases import Case, drop
from tests.conftest import RESULTS

# Every registered lab's cases, from tests/claim_cases/<lab>.py: a lab added to the registry without them fails here.
CASES: dict[str, Case] = {claim: case for lab in LABS
                          for claim, case in importlib.import_module(f"tests.claim_cases.{lab}").CASES.items()}
# The green scenarios of migrate were recorded in a run of their own (migrate --context both on the H200);
# refcount's and lifecycle's are in their labs' recorded runs.
ALSO_RECORDED = {"migrate": "migrate-green.json"}
CLAIMS = ctxlab.claims()
GREEN_SCENARIOS = {sc for c in CLAIMS if "green" in c.id for sc in c.scenarios if "green" in sc}
JUDGED = [c for c in CLAIMS if c.kind != "observation"]
BROKEN = {"promise": "fails", "old-text": "changed"}


def fixture_run(name: str) -> LabResult:
    (run,) = ctxlab.load(RESULTS / name)
    return run


def fixture_observations(fixture) -> list[Observation]:
    """A case's starting observations: a recorded run's, or a list written in the test (see Case)."""
    return list(fixture_run(fixture).observations if isinstance(fixture, str) else fixture)


def green_observations(lab: str) -> list[Observation]:
    """The observations of a lab's green scenarios, as recorded on the H200."""
    run = fixture_run(ALSO_RECORDED.get(lab, f"{lab}.json"))
    return [o for o in run.observations if o.scenario in GREEN_SCENARIOS]


def lab_observations(lab: str) -> list[Observation]:
    """The recorded run of ``lab``, with the green scenarios recorded in a run of their own."""
    extra = green_observations(lab) if lab in ALSO_RECORDED else []
    return [*fixture_run(f"{lab}.json").observations, *extra]


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
    observations = fixture_observations(case.fixture)
    kept = verdict(claim, apply(case.keep, observations))
    assert kept.verdict == "holds", kept.evidence
    for other in case.holds_too:
        also = verdict(claim, apply(other, observations))
        assert also.verdict == "holds", also.evidence
    for other in case.unmet:
        unmet = verdict(claim, apply(other, observations))
        assert unmet.verdict == "skipped" and unmet.evidence.startswith("precondition not met: "), unmet.evidence
    for breaking in case.breaks:
        broken = verdict(claim, breaking(apply(case.keep, observations)))
        assert broken.verdict == BROKEN[claim.kind], broken.evidence
        assert broken.evidence != kept.evidence  # the sentence is built from the values, which changed


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_a_claim_without_its_observations_is_an_error_not_skipped(claim):
    observations = lab_observations(claim.id.split(".")[0])
    kinds = {o.what for o in observations if o.scenario in claim.scenarios}
    remaining = apply([drop(what) for what in kinds], observations)
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
    result = verdict(claim, lab_observations(claim.id.split(".")[0]))
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


@pytest.mark.parametrize("lab", sorted(ALSO_RECORDED))
def test_green_observations_leave_the_other_claims_as_recorded(lab):
    """The green scenarios record kinds the primary and created ones record too ("allocation context", "cupy
    allocation", "state"): every other claim reads only its own scenarios, so its verdict and evidence stay."""
    recorded = fixture_run(f"{lab}.json").observations
    for claim in (c for c in CLAIMS if c.id.startswith(f"{lab}.") and not set(c.scenarios) & GREEN_SCENARIOS):
        alone, mixed = verdict(claim, recorded), verdict(claim, lab_observations(lab))
        assert (mixed.verdict, mixed.evidence) == (alone.verdict, alone.evidence), claim.id


def test_a_green_scenario_that_recorded_why_it_could_not_run_skips_its_claims():
    why = "cuGreenCtxCreate returned CUDA_ERROR_NOT_SUPPORTED"
    observations = [o for o in green_observations("migrate") if o.scenario != "green-sm"]
    observations.append(Observation("start", "MainThread", None, "skipped", why, scenario="green-sm"))
    claim = next(c for c in CLAIMS if c.id == "migrate.green-sm-partition")
    result = verdict(claim, observations)
    assert (result.verdict, result.evidence) == ("skipped", f"green-sm: {why}")
