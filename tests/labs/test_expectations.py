"""The GPU tests' expectations cover the catalogue exactly, with verdicts a claim of that kind can get."""

import ctxlab.api
from ctxlab.records.schema import VERDICTS
from tests.gpu.expected import expectations

POSSIBLE = {"promise": {"holds", "fails", "skipped"}, "old-text": {"holds", "changed", "skipped"},
            "observation": {"observed", "skipped"}}


def test_every_claim_has_exactly_one_expected_verdict_that_its_kind_allows():
    table = expectations()
    catalogue = {c.id: c.kind for c in ctxlab.api.claims()}
    assert set(table["verdicts"]) == set(catalogue)
    for cid, verdict in {**table["verdicts"], **table["traced"]}.items():
        assert verdict in VERDICTS and verdict in POSSIBLE[catalogue[cid]], (cid, verdict)
    assert {"gpu", "driver_version", "runtime_versions"} <= set(table["written_for"])


def test_predicted_verdicts_name_claims_of_the_catalogue():
    """Verdicts not yet seen on the GPU are listed as predictions (the green-context claims, until recorded)."""
    table = expectations()
    predicted = table.get("predicted", {}).get("claims", [])
    assert set(predicted) <= set(table["verdicts"])


def test_claims_that_need_two_gpus_are_claims_of_the_catalogue():
    table = expectations()
    assert set(table["needs_two_gpus"]["claims"]) <= set(table["verdicts"])
    assert {c.id for c in ctxlab.api.claims(["peer"])} == set(table["needs_two_gpus"]["claims"])
