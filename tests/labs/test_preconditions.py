"""A promise whose precondition did not hold is not ``holds`` (issue 25).

PyTorch exports ``__cuda_array_interface__`` version 2, which names no stream: the exchange promise promises the
value read only where the handover names the producer's stream. On the H200 all 4 PyTorch -> Numba reads were
wrong values without an error, and the promise read ``holds``; it is ``skipped`` with the unmet precondition,
and the hazard has its own claim, ``interop.exchange.unnamed-stream``.
"""

from __future__ import annotations

import pytest

import ctxlab
from ctxlab.claim import Claim
from tests.conftest import RESULTS

CLAIMS = {c.id: c for c in ctxlab.claims(["interop"])}


def recorded(name="interop.json"):
    (run,) = ctxlab.load(RESULTS / name)
    return run


@pytest.mark.parametrize("name", ["interop.json", "check.json"])
def test_torch_to_numba_is_skipped_not_holds_where_no_handover_named_its_stream(name):
    run = next(r for r in ctxlab.load(RESULTS / name) if r.lab == "interop")
    result = CLAIMS["interop.exchange.torch-to-numba"].result(run.observations)
    assert result.verdict == "skipped", result.evidence
    assert result.evidence.startswith("precondition not met: ")
    assert "4 of 4 handovers named none" in result.evidence
    assert "wrong values without an error: 4" in result.evidence  # what was seen is still said


def test_the_hazard_has_a_claim_of_its_own_and_its_wrong_values_are_flagged():
    run = recorded()
    result = CLAIMS["interop.exchange.unnamed-stream"].result(run.observations)
    assert result.verdict == "observed"
    assert "4 of 16 __cuda_array_interface__ handovers named no stream" in result.evidence
    assert "PyTorch -> Numba (interface version 2)" in result.evidence
    assert result.evidence.endswith("wrong values without an error: 4")
    flagged = [f for f in run.flags if f["scenario"] == "exchange-torch-numba"]
    assert len(flagged) == 4 and all(f["flag"] == "silent-wrong-result" for f in flagged)


@pytest.mark.parametrize("cid", [c for c in CLAIMS if c.startswith("interop.exchange.") and c.endswith(
    ("-to-cupy", "-to-torch", "-to-jax")) or c == "interop.exchange.cupy-to-numba"])
def test_exchanges_that_name_their_stream_still_hold(cid):
    assert CLAIMS[cid].result(recorded().observations).verdict == "holds"


def _claim(expect, precondition):
    return Claim("x.p", "s", "src", "promise", ("a",), lambda obs: {"ok": expect, "pre": precondition},
                 "ok {ok}, pre {pre}", lambda f: f["ok"], precondition=lambda f: f["pre"],
                 unmet="pre was {pre}")


@pytest.mark.parametrize(("expect", "precondition", "verdict"),
                         [(True, True, "holds"), (True, False, "skipped"), (False, False, "fails"),
                          (False, True, "fails")])
def test_a_precondition_turns_holds_into_skipped_and_leaves_fails(expect, precondition, verdict):
    result = _claim(expect, precondition).result([])
    assert result.verdict == verdict
    if verdict == "skipped":
        assert result.evidence == "precondition not met: pre was False; seen: ok True, pre False"


def test_a_precondition_needs_its_reason_and_an_expectation():
    with pytest.raises(ValueError):
        Claim("x.p", "s", "src", "promise", ("a",), dict, "e", lambda f: True, precondition=lambda f: True)
    with pytest.raises(ValueError):
        Claim("x.o", "s", "src", "observation", ("a",), dict, "e", precondition=lambda f: True, unmet="why")
