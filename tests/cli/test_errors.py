import pickle

import pytest

from ctxlab.cuda.errors import CudaError, check, error_from, from_exception

driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is not installed")
runtime = pytest.importorskip("cuda.bindings.runtime", reason="cuda-bindings is not installed")


@pytest.mark.parametrize("status", [s for s in driver.CUresult if int(s) != 0], ids=lambda s: s.name)
def test_every_curesult_becomes_an_error_carrying_its_name(status):
    with pytest.raises(CudaError) as info:
        check((status,), "cuSomething")
    err = info.value
    assert err.name == status.name
    assert err.code == int(status)
    assert str(err).startswith(f"cuSomething: {status.name} ({int(status)})")
    again = pickle.loads(pickle.dumps(err))
    assert (again.name, again.code, again.explanation, again.call) == (err.name, err.code, err.explanation, err.call)


def test_runtime_errors_carry_their_name():
    err = error_from(runtime.cudaError_t.cudaErrorInvalidValue, "cudaMalloc")
    assert err.name == "cudaErrorInvalidValue" and err.code == 1
    assert "cudaErrorInvalidValue (1)" in str(err)


def test_check_returns_values_by_arity():
    ok = driver.CUresult.CUDA_SUCCESS
    assert check((ok,)) is None
    assert check((ok, 5)) == 5
    assert check((ok, 1, 2)) == (1, 2)


def test_cupy_style_exception_is_named():
    class CUDARuntimeError(RuntimeError):
        def __init__(self, status):
            super().__init__(f"status {status}")
            self.status = status

    assert from_exception(CUDARuntimeError(700)) is None  # a type of CuPy's name, not CuPy's: no CUDA status
    CUDARuntimeError.__module__ = "cupy_backends.cuda.api.runtime"  # as CuPy's own
    err = from_exception(CUDARuntimeError(700))
    assert err.name == "cudaErrorIllegalAddress" and err.code == 700
    assert from_exception(ValueError("not CUDA")) is None
