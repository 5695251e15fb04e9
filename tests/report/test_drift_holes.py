"""Drift that cannot hide a lab bug (issue 36): in the reads after a teardown only which CUDA error a repeat met is
blanked (a CUDA status by its name, a library's exception about a CUDA error by its type). A library's exception
about something else, a message that names an exception of Python's own, and what an item says beside a CUDA
status are compared exactly: through the drift comparison on the recorded H200 runs, and through
``check --baseline --fail-on-drift``."""

from __future__ import annotations

import builtins
import dataclasses
import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.claim import Claim
from ctxlab.lab import Lab, LabOptions, Scenario
from ctxlab.records.evidence import normalize_undefined
from ctxlab.records.files import load_runs
from ctxlab.suite import changes
from tests.conftest import RESULTS

pytestmark = pytest.mark.alone  # run once, alone (tests/house/test_each_file_alone.py)

BASELINE = RESULTS / "drift" / "matrix-2026-12-01" / "baseline.json"  # the recording these cases edit
JAX_READ = ("JaxRuntimeError: INTERNAL: Failed to create tensormap with cuTensorMapEncodeTiled: an illegal memory "
            "access was encountered [executable_name='jit__reduce_sum'] (all 3)")


def edited(runs, claim_id: str, old: str, new: str) -> list:
    out = []
    for run in runs:
        claims = []
        for c in run.claims:
            if c.id == claim_id:
                assert old in c.evidence, c.evidence
                c = dataclasses.replace(c, evidence=c.evidence.replace(old, new))
            claims.append(c)
        out.append(dataclasses.replace(run, claims=tuple(claims)))
    return out


@pytest.mark.parametrize("claim, old, new", [
    # the same library's exception, but about the lab's argument, not a CUDA error
    ("interop.blast.release.jax", JAX_READ,
     "JaxRuntimeError: INVALID_ARGUMENT: Argument 'x' of type <class 'list'> is not a valid JAX type (all 3)"),
    # a library's exception wrapping a Python exception raised by the lab's own callback
    ("interop.blast.release.jax", JAX_READ,
     "JaxRuntimeError: INTERNAL: CUDA error: in a host callback: TypeError: unsupported operand type(s) (all 3)"),
    # beside the CUDA status, the lab's own cleanup broke
    ("interop.blast.release.cuda-core", "then its old array -> CUDA_ERROR_ILLEGAL_ADDRESS (all 3)",
     "then its old array -> CUDA_ERROR_ILLEGAL_ADDRESS; then the lab's cleanup: KeyError: 'ptr' (all 3)"),
])
def test_what_is_not_which_cuda_error_is_drift(claim, old, new):
    base = load_runs(BASELINE)
    found = changes(base, edited(base, claim, old, new))
    assert [(d["item"], d["change"]) for d in found] == [(claim, "evidence")]


def test_which_cuda_error_a_library_met_is_still_no_drift():
    base = load_runs(BASELINE)
    other = ("JaxRuntimeError: INTERNAL: CUDA error: Failed to launch CUDA kernel: input_reduce_fusion: "
             "CUDA_ERROR_CONTEXT_IS_DESTROYED: context is destroyed [executable_name='jit__reduce_sum'] (all 3)")
    assert changes(base, edited(base, "interop.blast.release.jax", JAX_READ, other)) == []
    status = ("then its old array -> CUDA_ERROR_ILLEGAL_ADDRESS (all 3)", "then its old array -> cudaErrorInvalidValue"
              " (all 3)")
    assert changes(base, edited(base, "interop.blast.release.cuda-core", *status)) == []


LIBRARY_TYPES = st.from_regex(r"\A[A-Z][a-z]{2,8}(Runtime|API)?Error\Z").filter(
    lambda name: not hasattr(builtins, name))
PLAIN = st.text(st.sampled_from("abcdefghij klmnop'<>[]=."), min_size=1, max_size=40).filter(
    lambda text: "cu" not in text and " in " not in text)


@settings(max_examples=200, deadline=None)
@given(kind=LIBRARY_TYPES, message=PLAIN)
def test_a_library_exception_about_something_else_is_not_a_cuda_error(kind, message):
    cuda = f"old array -> {kind}: [<CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: 700>] Call to cuMemcpyDtoH (all 3)"
    other = f"old array -> {kind}: {message} (all 3)"
    assert normalize_undefined(cuda) == f"old array -> {kind} (a CUDA error) (all 3)"
    assert normalize_undefined(other) != normalize_undefined(cuda)


PYTHONS_OWN = sorted(name for name in dir(builtins) if name.endswith("Error")
                     and isinstance(getattr(builtins, name), type))


@settings(max_examples=200, deadline=None)
@given(kind=LIBRARY_TYPES, own=st.sampled_from(PYTHONS_OWN))
def test_a_message_naming_a_python_exception_is_compared_exactly(kind, own):
    text = f"old array -> {kind}: CUDA error: {own}: raised by the lab (all 3)"
    assert normalize_undefined(text) == text


# A lab whose one claim is an undefined-behaviour observation whose error varies, its reads set by the test.
READ = "CTXLAB_TEST_TEARDOWN_READ"


def _facts(observations):
    return {"read": os.environ.get(READ, "correct (all 3)")}


TEARDOWN = Lab("teardown", "A question?", LabOptions,
               (Claim("teardown.claim", "What a read after the teardown meets.", "a source", "observation",
                      ("only",), _facts, "cuCtxDestroy -> CUDA_SUCCESS (all 3); then its old array -> {read}; "
                      "wrong values without an error: 0", error_varies=True),),
               lambda options: [Scenario("only", "tests.fake_labs.targets:observe", timeout=60)], needs_gpu=False)


@pytest.fixture
def teardown_lab(fake_registry, monkeypatch):
    import ctxlab.labs
    import ctxlab.suite
    from tests.fake_labs import REGISTRY

    registry = {**REGISTRY, "teardown": "tests.report.test_drift_holes:TEARDOWN"}
    monkeypatch.setattr(ctxlab.labs, "LABS", registry)
    monkeypatch.setattr(ctxlab.suite, "LABS", registry)


def check(*args: str) -> int:
    from ctxlab.cli import cli

    return CliRunner().invoke(cli, ["check", "--only", "teardown", *args], catch_exceptions=False).exit_code


def test_check_fail_on_drift_tells_a_lab_bug_from_the_varying_cuda_error(teardown_lab, tmp_path, monkeypatch):
    base = tmp_path / "base.json"
    monkeypatch.setenv(READ, "CudaAPIError: [<CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: 700>] Call to cuMemcpyDtoH "
                             "results in CUDA_ERROR_ILLEGAL_ADDRESS (all 3)")
    assert check("--json", str(base)) == 0
    assert json.loads(base.read_text())["claims"][0]["verdict"] == "observed"  # one run: its object
    monkeypatch.setenv(READ, "CudaAPIError: [<CUresult.CUDA_ERROR_INVALID_VALUE: 1>] Call to cuMemcpyDtoH "
                             "results in CUDA_ERROR_INVALID_VALUE (all 3)")
    assert check("--baseline", str(base), "--fail-on-drift") == 0  # which CUDA error: the run's
    monkeypatch.setenv(READ, "CudaAPIError: the lab handed a host array to the device copy (all 3)")
    assert check("--baseline", str(base), "--fail-on-drift") == 1  # a lab bug in the library's exception
