"""A sample suite for ``pytest --ctxlab-guard`` (not collected by the project's own run: its file name
does not match test_*.py). tests/gpu/test_audit.py runs it on a GPU and expects: test_clean passes,
test_leaks_a_context fails its teardown with context-leak at the LEAK line, test_leaves_context_current fails
its teardown with context-left-current (and context-leak) at the CURRENT line."""

from cuda.bindings import driver


def _check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    assert int(err) == 0, f"{what}: {err.name}"
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


def _create(dev):
    try:  # cuda-bindings 13: cuCtxCreate(CUctxCreateParams | None, flags, dev)
        result = driver.cuCtxCreate(None, 0, dev)
    except TypeError:  # cuda-bindings 12
        result = driver.cuCtxCreate(0, dev)
    return _check(result, "cuCtxCreate")


def _device():
    _check(driver.cuInit(0), "cuInit")
    return _check(driver.cuDeviceGet(0), "cuDeviceGet")


def test_clean():
    import cupy

    cupy.cuda.runtime.setDevice(0)
    assert int(cupy.arange(10).sum()) == 45


def test_clean_created_and_destroyed():
    ctx = _create(_device())
    _check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    _check(driver.cuCtxDestroy(ctx), "cuCtxDestroy")


def test_leaks_a_context():
    _create(_device())  # LEAK: made and never destroyed
    _check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")


def test_leaves_context_current():
    _create(_device())  # CURRENT: left current (and never destroyed)
