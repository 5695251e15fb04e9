"""Drift compares what a run decided, not the values of one run (issue 25).

Two runs of the same code on the H200 (labs/results/drift/check-issue25.json, the full check of that day, and
the run before it whose evidence
labs/results/check-profile.txt's ``drift:`` lines quote as "was") differ only in Numba's context handle and in
the wrong values an unordered hand-over read: 0 drifts. A change of verdict, of an error's name or of an
outcome's class is still drift.
"""

from __future__ import annotations

import dataclasses
import re

from hypothesis import given
from hypothesis import strategies as st

from ctxlab.records.evidence import normalize
from ctxlab.records.shapes import runs_from_document
from ctxlab.suite import changes
from tests.conftest import RESULTS, recorded

DRIFT_LINE = re.compile(r"drift: (?P<id>\S+) on GPU (?P<device>\d+): observed outcome: now (?P<now>.*) "
                        r"\(was (?P<was>.*)\)$")


RECORDING = "drift/check-issue25.json"  # the check whose drift lines check-profile.txt keeps


def check_runs():
    return runs_from_document(recorded(RECORDING), RECORDING)


def earlier_evidence() -> dict[str, tuple[str, str]]:
    """claim id -> (now, was): the observed outcomes the H200's check reported as drift against the run before
    it, with the same code (the evidence of two real runs)."""
    found = {}
    for line in (RESULTS / "check-profile.txt").read_text().splitlines():
        m = DRIFT_LINE.match(line)
        if m:
            found[m["id"]] = (m["now"], m["was"])
    return found


def with_evidence(runs, evidence: dict[str, str], verdicts: dict[str, str] | None = None):
    """``runs`` with some claims' evidence (and verdicts) replaced."""
    verdicts = verdicts or {}
    out = []
    for run in runs:
        claims = tuple(dataclasses.replace(c, evidence=evidence.get(c.id, c.evidence),
                                           verdict=verdicts.get(c.id, c.verdict)) for c in run.claims)
        out.append(dataclasses.replace(run, claims=claims))
    return out


def test_the_recorded_drift_lines_are_the_three_false_drifts_of_the_issue():
    pairs = earlier_evidence()
    assert set(pairs) == {"interop.exchange.unordered", "interop.under-created.numba", "interop.under-green.numba"}
    now = {c.id: c.evidence for r in check_runs() for c in r.claims}
    assert all(now[cid] == new for cid, (new, _) in pairs.items())  # check.json is the run that reported them
    assert all(new != old for new, old in pairs.values())  # the raw evidence does differ


def test_two_h200_runs_of_the_same_code_show_no_drift():
    runs = check_runs()
    earlier = with_evidence(runs, {cid: was for cid, (_, was) in earlier_evidence().items()})
    assert changes(earlier, runs) == [] and changes(runs, earlier) == []


def test_a_third_h200_recording_reads_the_same_for_the_run_specific_claims():
    """labs/results/interop.json (ctxlab interop on the same H200): Numba's handle and the racy reads differ
    from check.json's, and so do torch-to-numba's four wrong values (all wrong in both)."""
    (interop,) = runs_from_document(recorded("interop.json"), "interop.json")
    there = {c.id: c.evidence for c in interop.claims}
    here = {c.id: c.evidence for r in check_runs() for c in r.claims}
    for cid in ("interop.exchange.unordered", "interop.under-created.numba", "interop.under-green.numba",
                "interop.exchange.torch-to-numba"):
        assert there[cid] != here[cid], cid
        assert normalize(there[cid]) == normalize(here[cid]), (cid, normalize(there[cid]), normalize(here[cid]))


def observed(claim_id: str) -> str:
    return next(c.evidence for r in check_runs() for c in r.claims if c.id == claim_id)


def drifted(evidence: dict[str, str], verdicts: dict[str, str] | None = None):
    runs = check_runs()
    return {(d["item"], d["change"]) for d in changes(runs, with_evidence(runs, evidence, verdicts))}


def test_another_verdict_is_drift():
    assert drifted({}, {"interop.exchange.unordered": "skipped"}) == {("interop.exchange.unordered", "verdict")}
    assert drifted({}, {"refcount.primary-count": "fails"}) == {("refcount.primary-count", "verdict")}


def test_another_error_name_is_drift():
    cid = "modules.cupy-kernel-cache"
    text = observed(cid)
    assert "CUDA_ERROR_INVALID_HANDLE (all 3)" in text
    changed = text.replace("CUDA_ERROR_INVALID_HANDLE", "CUDA_ERROR_INVALID_CONTEXT")
    assert drifted({cid: changed}) == {(cid, "evidence")}
    # and in Numba's message: another exception with the same handle
    numba = observed("interop.under-created.numba")
    assert drifted({"interop.under-created.numba": numba.replace("RuntimeError", "CudaSupportError")}) == {
        ("interop.under-created.numba", "evidence")}


def test_another_outcome_class_is_drift():
    cid = "interop.exchange.unordered"
    text = observed(cid)
    # the race won in one of the two hand-overs of one direction: a correct value appears beside the wrong ones.
    # That is the race's timing, as the split is: two H200 runs of the same exchange code read "correct in 2 of
    # 4, silent-wrong-result in 2 of 4" and "silent-wrong-result (all 4)" (torch -> Numba, tests/test_drift_
    # undefined.py), so it is not drift; the race vanishing (every read correct) is
    one_correct = text.replace("silent-wrong-result (got 67108864, expected 1073741824) in 1 of 2", "correct in 1 of 2",
                               1)
    assert one_correct != text
    assert drifted({cid: one_correct}) == set()
    # every read correct: no wrong value without an error any more
    all_correct = re.sub(r"silent-wrong-result \(got \d+, expected \d+\) in 1 of 2, silent-wrong-result "
                         r"\(got \d+, expected \d+\) in 1 of 2", "correct (all 2)", text).replace(
        "without an error: 4", "without an error: 0")
    assert "silent-wrong-result" not in all_correct
    assert drifted({cid: all_correct}) == {(cid, "evidence")}
    # an error instead of a wrong value
    errored = text.replace("silent-wrong-result (got 184549376, expected 1073741824)", "CUDA_ERROR_ILLEGAL_ADDRESS")
    assert drifted({cid: errored}) == {(cid, "evidence")}


def test_a_null_handle_and_context_ids_are_compared():
    """0x0 (no context) and the ids that say which contexts are the same are decided, not run-specific."""
    assert normalize("owner 0x0") != normalize("owner 0x7f4128000cb0")
    assert normalize("current context 0x24c59330 (id 1), the primary context is 0x24c59330 (id 1)") != \
        normalize("current context 0x24c59330 (id 1), the primary context is 0x24c59331 (id 2)")
    assert normalize("Numba cannot operate on non-primary CUDA context 349c6ed0") != \
        normalize("Numba cannot operate on CUDA context 0x0")


def test_distributions_compare_classes_and_the_number_of_repeats():
    swr = "silent-wrong-result (got {}, expected 1073741824)"
    two_wrong = f"{swr.format(184549376)} in 1 of 2, {swr.format(67108864)} in 1 of 2"
    assert normalize(two_wrong) == "silent-wrong-result in # of 2" == normalize(f"{swr.format(5)} (all 2)")
    split = f"correct in 1 of 3, {swr.format(1)} in 2 of 3"
    assert normalize(split) == normalize(f"{swr.format(1)} in 1 of 3, correct in 2 of 3")  # the race's split
    # beside wrong values, a correct read is the race's too (H200: same code, both forms); the race gone is not
    assert normalize(split) == normalize(f"{swr.format(1)} (all 3)")
    assert normalize(split) != normalize("correct (all 3)")
    assert normalize(split) != normalize(f"CUDA_ERROR_X in 1 of 3, {swr.format(1)} in 2 of 3")  # an error class
    assert normalize(split) != normalize(f"correct in 1 of 4, {swr.format(1)} in 3 of 4")  # another repeat count
    # without wrong values the counts are compared; the order of equal counts (first seen) is not
    assert normalize("main in 2 of 4, worker in 2 of 4") == normalize("worker in 2 of 4, main in 2 of 4")
    assert normalize("main in 1 of 4, worker in 3 of 4") != normalize("main in 2 of 4, worker in 2 of 4")
    assert normalize("CUDA_ERROR_X in 1 of 3, correct in 2 of 3") != \
        normalize("CUDA_ERROR_X in 2 of 3, correct in 1 of 3")


def test_every_recorded_evidence_normalizes_to_itself_when_nothing_varies():
    """normalize is idempotent on every evidence sentence recorded on the H200, and leaves the ones with
    nothing run-specific (no handle, timing or wrong value) as written."""
    for run in check_runs():
        for claim in run.claims:
            once = normalize(claim.evidence)
            assert normalize(once) == once, claim.id


HEX = st.integers(min_value=0x10000, max_value=2**64 - 1)


@given(HEX, HEX)
def test_any_handle_gives_the_same_normal_form(a, b):
    for template in ("modules {x:#x} and {y:#x}, globals at {x:#x}", "non-primary CUDA context {x:x}; handle {y:x}",
                     "current context {x:#x} (id 1), the primary context is {y:#X} (id 1)"):
        assert normalize(template.format(x=a, y=b)) == normalize(template.format(x=b, y=a))


@given(st.integers(min_value=0, max_value=2**62), st.integers(min_value=0, max_value=2**62),
       st.integers(min_value=1, max_value=2**31))
def test_any_wrong_values_give_the_same_normal_form(got_a, got_b, expected):
    def outcome(got):
        return f"silent-wrong-result (got {got}, expected {expected})"

    a = f"hand-over: {outcome(got_a)} in 1 of 2, {outcome(got_b)} in 1 of 2; wrong values returned without an error: 2"
    b = f"hand-over: {outcome(got_b)} (all 2); wrong values returned without an error: 1"
    assert normalize(a) == normalize(b)
    assert normalize(a) != normalize(b.replace("error: 1", "error: 0"))


@given(st.floats(min_value=0.001, max_value=1e6, allow_nan=False), st.floats(min_value=0.001, max_value=1e6))
def test_any_rate_gives_the_same_normal_form(x, y):
    assert normalize(f"{x:.2f} handoffs/s") == normalize(f"{y:.3f} handoffs/s")


def test_a_version_in_evidence_is_compared_as_a_version_and_named_so():
    for old, new in (("CUDA 13.2", "CUDA 12.8"), ("CuPy 14.2.0", "CuPy 13.6.0"), ("driver 580.95.05", "driver 575.57")):
        assert normalize(f"built against {old}, 1.25 s") != normalize(f"built against {new}, 1.25 s"), old
    assert normalize("CUDA 13.2 in 1.25 s at 3.5 GB/s") == normalize("CUDA 13.2 in 1.31 s at 3.9 GB/s")  # timings
    cid = next(c.id for run in check_runs() for c in run.claims if c.verdict == "observed")
    base = check_runs()
    now = with_evidence(base, {cid: "CuPy 13.6.0 reports CUDA 12.8"})
    then = with_evidence(base, {cid: "CuPy 14.2.0 reports CUDA 13.2"})
    [d] = [d for d in changes(then, now) if d["item"] == cid]
    assert (d["change"], d["was"], d["now"]) == ("version", "CuPy 14.2.0, CUDA 13.2", "CuPy 13.6.0, CUDA 12.8")


def test_a_claim_left_unjudged_between_two_runs_of_one_level_is_drift():
    cid = next(c.id for run in check_runs() for c in run.claims if c.verdict == "holds")
    assert drifted({}, {cid: "unjudged"}) == {(cid, "verdict")}  # both full-level runs: not by design
