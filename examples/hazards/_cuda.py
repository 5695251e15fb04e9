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


def green_context(dev, sms: int = 16):
    """A green context over one group of about ``sms`` SMs; its CUcontext (from cuCtxFromGreenCtx), not current.
    The calls as ctxlab.cuda.green makes them (cuda-bindings 12.4+ and 13.x)."""
    resource = check(driver.cuDeviceGetDevResource(dev, driver.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM),
                     "cuDeviceGetDevResource")
    total = int(resource.sm.smCount)
    asked = sms if total >= 2 * sms else max(1, total // 2)
    groups, made, _remainder = check(driver.cuDevSmResourceSplitByCount(1, resource, 0, asked),
                                     "cuDevSmResourceSplitByCount")
    desc = check(driver.cuDevResourceGenerateDesc([list(groups)[0]], 1), "cuDevResourceGenerateDesc")
    flags = int(driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM)
    green = check(driver.cuGreenCtxCreate(desc, dev, flags), "cuGreenCtxCreate")
    return check(driver.cuCtxFromGreenCtx(green), "cuCtxFromGreenCtx")
