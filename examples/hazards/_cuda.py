"""Small helpers the hazard examples share over cuda.bindings' driver API (the calls as the labs make them)."""

from cuda.bindings import driver


def check(result, what: str):
    """The value of a cuda.bindings result tuple; raise with the status name when the call failed."""
    err = result[0] if isinstance(result, tuple) else result
    if int(err):
        raise RuntimeError(f"{what}: {err.name}")
    if isinstance(result, tuple) and len(result) > 1:
        return result[1] if len(result) == 2 else result[1:]
    return None


def device(ordinal: int = 0):
    check(driver.cuInit(0), "cuInit")
    return check(driver.cuDeviceGet(ordinal), "cuDeviceGet")


def create_context(dev):
    """cuCtxCreate (it becomes current on this thread)."""
    try:  # cuda-bindings 13: cuCtxCreate(CUctxCreateParams | None, flags, dev)
        result = driver.cuCtxCreate(None, 0, dev)
    except TypeError:  # cuda-bindings 12: cuCtxCreate(flags, dev)
        result = driver.cuCtxCreate(0, dev)
    return check(result, "cuCtxCreate")
