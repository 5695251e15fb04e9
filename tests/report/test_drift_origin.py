"""Drift tells a lab's bug from a CUDA error by the exception's origin, not its words (issue 49, item 4): an outcome
records whether the exception came from a CUDA error path (``ctxlab.cuda.origin``: its type and the frame that
raised it), so a library's exception raised by a lab or a mock, its message naming a CUDA call or status, reads
apart from the same library's CUDA error with the same words, and drift sees a change from one to the other.

The libraries stand in as modules of their real names (a type's module and the module of the frame that raised
it are what origin reads), so no library, GPU or cuda.bindings is needed."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable

import pytest

from ctxlab.cuda.outcome import outcome, status_name
from ctxlab.records.evidence import normalize, normalize_undefined
from ctxlab.records.files import load_runs
from ctxlab.suite import changes
from tests.conftest import RESULTS

BASELINE = RESULTS / "drift" / "matrix-2026-12-01" / "baseline.json"  # a real recording (two H200 runs)


def library(name: str, source: str, **names: object) -> types.ModuleType:
    """A stand-in for a library's module: its types and functions defined under the module's real name."""
    module = types.ModuleType(name)
    module.__dict__.update(names)
    exec(source, module.__dict__)
    return module


NUMBA = library("numba.cuda.cudadrv.driver", '''
class CudaAPIError(Exception):
    def __init__(self, code, msg):
        self.code, self.msg = code, msg
        super().__init__(code, msg)

    def __str__(self):
        return "[%s] %s" % (self.code, self.msg)

def _check_ctypes_error(fname, retcode):  # Numba's check of a driver call's status
    raise CudaAPIError(retcode, "Call to %s results in CUDA_ERROR_ILLEGAL_ADDRESS" % fname)
''')
CUDA_UTILS = library("cuda.core.experimental._utils.cuda_utils", '''
class CUDAError(Exception):
    pass

def _check_driver_error(name):  # cuda.core's check of a returned status
    raise CUDAError(f"{name}: an illegal memory access was encountered")
''')
CUDA_DEVICE = library("cuda.core.experimental._device", '''
def allocate():  # cuda.core's own refusal, of the same type, its message naming a status
    raise CUDAError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
''', CUDAError=CUDA_UTILS.CUDAError)
TORCH = library("torch", '''
class AcceleratorError(RuntimeError):
    pass

def synchronize():  # what torch's C++ raises for a failed CUDA call: error_code set
    exc = AcceleratorError("CUDA error: an illegal memory access was encountered")
    exc.error_code = 700
    raise exc
''')
JAX = library("jaxlib._jax", '''
class JaxRuntimeError(RuntimeError):
    pass

def execute(cause=None):  # INTERNAL: XLA's CUDA error path; a host callback's exception chained otherwise
    exc = JaxRuntimeError("INTERNAL: Failed to create tensormap with cuTensorMapEncodeTiled: an illegal memory "
                          "access was encountered [executable_name='jit__reduce_sum']")
    if cause is None:
        raise exc
    raise exc from cause
''')
CUPY = library("cupy_backends.cuda.api.runtime", '''
class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        super().__init__("cudaErrorIllegalAddress: an illegal memory access was encountered")
        self.status = status
''')


class CUDARuntimeError(RuntimeError):  # the lab's own type of CuPy's name, with a status as CuPy's has
    def __init__(self, status: int):
        super().__init__("cudaErrorIllegalAddress: an illegal memory access was encountered")
        self.status = status


def the_lab_raises(exc: BaseException) -> None:  # a lab (or a mock) raising a library's exception itself
    raise exc


def raised(fn: Callable[[], object]) -> BaseException:
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError("it did not raise")


# Each library: a CUDA error from its CUDA error path, and an exception of the same type and words that is not.
PAIRS: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
    "numba": (lambda: NUMBA._check_ctypes_error("cuMemcpyDtoH", 700),
              lambda: the_lab_raises(NUMBA.CudaAPIError(700, "Call to cuMemcpyDtoH results in "
                                                             "CUDA_ERROR_ILLEGAL_ADDRESS"))),
    "cuda.core": (lambda: CUDA_UTILS._check_driver_error("CUDA_ERROR_ILLEGAL_ADDRESS"), CUDA_DEVICE.allocate),
    "torch": (TORCH.synchronize,
              lambda: the_lab_raises(TORCH.AcceleratorError("CUDA error: an illegal memory access was encountered"))),
    "jax": (JAX.execute, lambda: JAX.execute(KeyError("x"))),
    "cupy": (lambda: the_lab_raises(CUPY.CUDARuntimeError(700)), lambda: the_lab_raises(CUDARuntimeError(700))),
}


@pytest.mark.parametrize("lib", sorted(PAIRS))
def test_an_exception_is_recorded_as_a_cuda_error_by_its_origin_not_its_words(lib):
    cuda, bug = (raised(fn) for fn in PAIRS[lib])
    assert type(cuda).__name__ == type(bug).__name__ and str(cuda) == str(bug)  # the same type's name and words
    assert status_name(cuda) != status_name(bug)
    assert "(not a CUDA error)" in status_name(bug) and "not a CUDA error" not in status_name(cuda)


def test_a_lab_type_of_cupys_name_is_no_cuda_status_and_outcome_lets_it_raise():
    bug = raised(lambda: the_lab_raises(CUDARuntimeError(700)))
    assert status_name(bug).startswith("CUDARuntimeError (not a CUDA error): ")
    with pytest.raises(CUDARuntimeError):  # not a CUDA error: the experiment itself broke
        outcome(the_lab_raises, bug)
    assert outcome(the_lab_raises, raised(PAIRS["cupy"][0]))["status"] == status_name(raised(PAIRS["cupy"][0]))


def _reads(runs: list, claim_id: str, read: str) -> list:
    """``runs`` with the reads of ``claim_id``'s old array after the teardown replaced by ``read``."""
    out = []
    for run in runs:
        claims = []
        for c in run.claims:
            if c.id == claim_id:
                start = c.evidence.index("then its old array -> ") + len("then its old array -> ")
                c = dataclasses.replace(c, evidence=c.evidence[:start] + read + c.evidence[c.evidence.index(
                    "; a new array"):])
            claims.append(c)
        out.append(dataclasses.replace(run, claims=tuple(claims)))
    return out


@pytest.mark.parametrize("lib", sorted(PAIRS))
def test_drift_sees_a_cuda_error_become_a_lab_bug_and_back_whatever_the_words(lib):
    claim = "interop.blast.release.numba"  # an undefined-behaviour read, where which CUDA error is the run's
    base = load_runs(BASELINE)
    cuda, bug = (_reads(base, claim, f"{status_name(raised(fn))} (all 3)") for fn in PAIRS[lib])
    assert [(d["item"], d["change"]) for d in changes(cuda, bug)] == [(claim, "evidence")]
    assert [(d["item"], d["change"]) for d in changes(bug, cuda)] == [(claim, "evidence")]
    assert changes(cuda, cuda) == [] and changes(bug, bug) == []


def _numba_reads(base: list, claim: str, code: int, call: str, by_lab: bool) -> list:
    """``base`` with the claim's old-array reads one Numba error (raised by Numba's check, or by the lab)."""
    words = f"Call to {call} results in CUDA_ERROR_{'ILLEGAL_ADDRESS' if code == 700 else 'INVALID_VALUE'}"
    exc = raised(lambda: the_lab_raises(NUMBA.CudaAPIError(code, words)) if by_lab else
                 NUMBA._check_ctypes_error(call, code))
    return _reads(base, claim, f"{status_name(exc)} (all 3)")


def test_a_lab_bug_is_never_read_as_a_cuda_error_whichever_call_it_names():
    claim = "interop.blast.release.numba"
    base = load_runs(BASELINE)
    then, now = (_numba_reads(base, claim, code, call, by_lab=True)
                 for code, call in ((700, "cuMemcpyDtoH"), (1, "cuMemcpyHtoD")))
    assert [(d["item"], d["change"]) for d in changes(then, now)] == [(claim, "evidence")]
    bug = raised(lambda: the_lab_raises(NUMBA.CudaAPIError(700, "Call to cuMemcpyDtoH results in CUDA_ERROR_X")))
    text = f"old array -> {status_name(bug)} (all 3)"
    assert normalize_undefined(text) == normalize(text)  # kept whole: no CUDA error blanked in it
    # which error a CUDA error from Numba's own check met is still the run's
    then, now = (_numba_reads(base, claim, code, call, by_lab=False)
                 for code, call in ((700, "cuMemcpyDtoH"), (1, "cuMemcpyHtoD")))
    assert changes(then, now) == []


def test_recordings_from_before_the_origin_still_compare_as_they_did():
    """A file from before names no origin: its library errors are read by their words, as before; a CUDA error
    recorded now with its origin matches the same error recorded then, a lab's bug recorded now does not."""
    claim = "interop.blast.release.numba"
    base = load_runs(BASELINE)  # "CudaAPIError: [<CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: 700>] Call to cuMemcpyDtoH..."
    cuda, bug = (_reads(base, claim, f"{status_name(raised(fn))} (all 3)") for fn in PAIRS["numba"])
    assert changes(base, cuda) == []
    assert [(d["item"], d["change"]) for d in changes(base, bug)] == [(claim, "evidence")]
    refusal = "made its array (CUDAError (not a CUDA error): Device 0 is not yet initialized (all 3))"
    assert normalize(refusal) == normalize(refusal.replace(" (not a CUDA error)", ""))
