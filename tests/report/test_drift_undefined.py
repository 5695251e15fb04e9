"""Drift over undefined-behaviour repeats: which error a use after teardown meets is the run's (two H200 runs of
the same code, labs/results/drift/matrix-2026-12-01/baseline.json and again.json, met CUDA_ERROR_ILLEGAL_ADDRESS
in one and CUDA_ERROR_INVALID_VALUE in the other); whether it met an error, a silent wrong result, a correct value or a
crash is compared, and so is everything outside undefined-behaviour territory."""

import dataclasses

import pytest

from ctxlab.records.evidence import normalize, normalize_undefined
from ctxlab.records.files import load_runs
from ctxlab.suite import changes, claims_whose_error_varies
from tests.conftest import RESULTS

OLD_MATRIX = RESULTS / "drift" / "matrix-2026-12-01"  # the matrix recording that showed it
BASELINE, AGAIN = OLD_MATRIX / "baseline.json", OLD_MATRIX / "again.json"


def edited(runs, claim_id: str, evidence) -> list:
    out = []
    for run in runs:
        claims = tuple(dataclasses.replace(c, evidence=evidence(c.evidence)) if c.id == claim_id else c
                       for c in run.claims)
        out.append(dataclasses.replace(run, claims=claims))
    return out


def test_two_h200_runs_of_the_same_code_differ_in_which_error_but_show_no_drift():
    base, again = load_runs(BASELINE), load_runs(AGAIN)
    texts = [({c.id: c.evidence for c in a.claims}, {c.id: c.evidence for c in b.claims})
             for a, b in zip(base, again, strict=True)]
    varied = [cid for a, b in texts for cid in a if normalize(a[cid]) != normalize(b[cid])]
    assert varied and all(cid.startswith("interop.blast.") for cid in varied)  # the real variation
    assert changes(base, again) == [] and changes(again, base) == []


def test_only_the_blast_claims_declare_that_their_error_varies():
    (interop,) = [r for r in load_runs(BASELINE) if r.lab == "interop"]
    varies = claims_whose_error_varies(interop)
    assert varies == {c.id for c in interop.claims if c.id.startswith("interop.blast.")}
    (modules,) = [r for r in load_runs(BASELINE) if r.lab == "modules"]
    assert claims_whose_error_varies(modules) == set()  # a cached kernel in another context: INVALID_HANDLE every run


@pytest.mark.parametrize("outcome", ["silent-wrong-result (got 1, expected 2) (all 3)", "correct (all 3)",
                                     "no answer (ended by SIGSEGV) (all 3)"])
def test_another_kind_of_outcome_after_a_teardown_is_still_drift(outcome):
    base = load_runs(BASELINE)
    claim = "interop.blast.release.numba"
    changed = edited(base, claim, lambda text: text.replace(
        text[text.index("then its old array -> ") + len("then its old array -> "):text.index("; a new array")],
        outcome))
    found = changes(base, changed)
    assert [d["item"] for d in found] == [claim] and found[0]["change"] == "evidence"


def test_another_error_name_outside_undefined_behaviour_is_still_drift():
    base = load_runs(BASELINE)
    claim = "interop.under-created.numba"
    changed = edited(base, claim, lambda text: text.replace("RuntimeError", "CudaSupportError"))
    assert [d["item"] for d in changes(base, changed)] == [claim]


def test_which_error_is_blanked_and_errors_merged_but_other_outcomes_kept():
    one = "then its old array -> CUDA_ERROR_ILLEGAL_ADDRESS in 2 of 3, CUDA_ERROR_INVALID_VALUE in 1 of 3"
    other = "then its old array -> cudaErrorIllegalAddress (all 3)"
    assert normalize_undefined(one) == normalize_undefined(other) == "then its old array -> a CUDA error (all 3)"
    lib = "then its old array -> CudaAPIError: [<CUresult.CUDA_ERROR_INVALID_VALUE: 1>] x (all 3)"
    lib2 = ("then its old array -> CudaAPIError: [<CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: 700>] y in 2 of 3, "
            "CudaAPIError: [<CUresult.CUDA_ERROR_INVALID_VALUE: 1>] x in 1 of 3")
    merged = "then its old array -> CudaAPIError (a CUDA error) (all 3)"
    assert normalize_undefined(lib) == normalize_undefined(lib2) == merged
    mixed = "then its old array -> CUDA_ERROR_ILLEGAL_ADDRESS in 2 of 3, correct in 1 of 3"
    assert normalize_undefined(mixed) != normalize_undefined(other)
    assert "silent-wrong-result" in normalize_undefined("old array -> silent-wrong-result (got 5, expected 6) (all 3)")


def test_the_documented_status_of_the_call_under_test_is_compared_exactly():
    """The teardown call's own status is documented, not undefined: INVALID_CONTEXT -> NOT_PERMITTED is drift."""
    base = load_runs(BASELINE)
    claim = "interop.blast.release.numba"
    changed = edited(base, claim, lambda text: text.replace("then CUDA_ERROR_INVALID_CONTEXT",
                                                            "then CUDA_ERROR_NOT_PERMITTED"))
    assert [d["item"] for d in changes(base, changed)] == [claim]


def test_a_python_exception_where_a_cuda_error_was_met_is_drift():
    """A lab bug raising TypeError where the undefined behaviour was meant to show is not the driver's answer."""
    base = load_runs(BASELINE)
    claim = "interop.blast.release.cupy"
    changed = edited(base, claim, lambda text: text.replace(
        "then its old array -> cudaErrorInvalidValue (all 3)",
        "then its old array -> TypeError: unsupported operand type(s) (all 3)"))
    assert [d["item"] for d in changes(base, changed)] == [claim]
    bug = "old array -> TypeError: unsupported operand type(s) (all 3)"
    assert normalize_undefined(bug) == bug


def test_the_re_recorded_matrix_shows_no_drift_between_its_two_plain_runs():
    base, again = (load_runs(RESULTS / "matrix" / name) for name in ("baseline.json", "again.json"))
    assert changes(base, again) == [] and changes(again, base) == []
