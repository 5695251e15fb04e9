"""Green contexts through cuda.bindings' driver API: split the SMs, make one, get its CUcontext, destroy it.

The four steps of the CUDA Driver API's Green Contexts section:
``cuDeviceGetDevResource(dev, CU_DEV_RESOURCE_TYPE_SM)``, ``cuDevSmResourceSplitByCount``
(one group; the SM counts of the group and of the remainder are kept),
``cuDevResourceGenerateDesc``, ``cuGreenCtxCreate(desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)``;
then ``cuCtxFromGreenCtx`` gives the CUcontext that ``cuCtxPushCurrent``/``cuCtxSetCurrent``
take. Only calls present in cuda-bindings 12.4+ and every 13.x are used (the structured
``cuDevSmResourceSplit`` of 13.1+ is not).

A green context that cannot be made here (a cuda.bindings or driver older than
CUDA 12.4, a device or mode that refuses it) raises ``GreenUnavailable`` with the
reason; scenarios record it as ``skipped``. Any other failure is a ``CudaError``:
the experiment broke, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxlab.cuda.errors import CudaError, check

GREEN_DRIVER = 12040  # green contexts arrived in the CUDA 12.4 driver API
CALLS = ("cuDeviceGetDevResource", "cuDevSmResourceSplitByCount", "cuDevResourceGenerateDesc", "cuGreenCtxCreate",
         "cuCtxFromGreenCtx", "cuGreenCtxDestroy", "cuGreenCtxGetDevResource")
# Statuses that say "not here" rather than "the experiment is wrong".
REFUSALS = ("CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_INVALID_RESOURCE_TYPE")
GROUP_SMS = 16  # the SMs asked for the green context's group (the driver rounds up to its granularity)


class GreenUnavailable(Exception):
    """No green context can be made here; the message says why (recorded as the scenarios' ``skipped``)."""


@dataclass(frozen=True)
class GreenContext:
    """A green context: its CUgreenCtx, the CUcontext from cuCtxFromGreenCtx, and the SM split it came from."""

    green: Any  # CUgreenCtx of cuda.bindings
    handle: int  # the CUcontext from cuCtxFromGreenCtx, as an int (what push/pop and the recorder use)
    device: int
    device_sms: int  # SMs of the device's SM resource
    group_sms: int  # SMs of the group the green context was made from
    remainder_sms: int  # SMs left in the split's remainder
    asked: int  # the minCount passed to cuDevSmResourceSplitByCount

    def info(self) -> dict:
        """What an observation records about it."""
        return {"handle": self.handle, "device": self.device, "device_sms": self.device_sms,
                "group_sms": self.group_sms, "remainder_sms": self.remainder_sms, "asked_sms": self.asked}


def _driver():
    from ctxlab.cuda.environment import init_driver

    return init_driver()


def unavailable() -> str | None:
    """Why no green context can be made with this cuda.bindings and driver, or None when they have the calls."""
    driver = _driver()
    missing = [name for name in CALLS if not hasattr(driver, name)]
    if missing:
        from ctxlab.cuda.environment import package_version

        return f"cuda-bindings {package_version('cuda-bindings')} has no {', '.join(missing)} (CUDA 12.4+)"
    version = int(check(driver.cuDriverGetVersion(), "cuDriverGetVersion"))
    if version < GREEN_DRIVER:
        return f"the driver supports CUDA {version // 1000}.{version % 1000 // 10}; green contexts need CUDA 12.4"
    return None


def _call(result: Any, call: str) -> Any:
    """``check`` that turns a refusal into GreenUnavailable."""
    try:
        return check(result, call)
    except CudaError as exc:
        if exc.name in REFUSALS:
            raise GreenUnavailable(f"{call} returned {exc.name}") from exc
        raise


def sm_type():
    """CU_DEV_RESOURCE_TYPE_SM."""
    return _driver().CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM


def create(device: int, group_sms: int = GROUP_SMS) -> GreenContext:
    """A green context over one group of about ``group_sms`` SMs of ``device``; not made current.

    cuGreenCtxCreate retains the device's primary context (creating it when inactive).
    """
    from ctxlab.cuda import driver as drv

    why = unavailable()
    if why:
        raise GreenUnavailable(why)
    driver = _driver()
    dev = drv.as_device(device)
    resource = _call(driver.cuDeviceGetDevResource(dev, sm_type()), "cuDeviceGetDevResource")
    total = int(resource.sm.smCount)
    asked = group_sms if total >= 2 * group_sms else max(1, total // 2)
    # (status, result: list[CUdevResource], nbGroups, remainder) in cuda-bindings 12.4+ and 13.x alike; the
    # third parameter is named useFlags in 12.x and flags in 13.x, so it is passed by position.
    groups, made, remainder = _call(driver.cuDevSmResourceSplitByCount(1, resource, 0, asked),
                                    "cuDevSmResourceSplitByCount")
    groups = list(groups)[:int(made)]
    if not groups:
        raise GreenUnavailable(f"cuDevSmResourceSplitByCount made no group of {asked} SMs out of {total}")
    desc = _call(driver.cuDevResourceGenerateDesc([groups[0]], 1), "cuDevResourceGenerateDesc")
    # CU_GREEN_CTX_DEFAULT_STREAM: required in CUDA 12.4, optional later; the NULL stream then runs in the partition.
    flags = int(driver.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM)
    green = _call(driver.cuGreenCtxCreate(desc, dev, flags), "cuGreenCtxCreate")
    ctx = check(driver.cuCtxFromGreenCtx(green), "cuCtxFromGreenCtx")
    return GreenContext(green, int(ctx), device, total, int(groups[0].sm.smCount),
                        int(remainder.sm.smCount) if remainder is not None else 0, asked)


def destroy(green: GreenContext) -> None:
    """cuGreenCtxDestroy: releases the primary context it retained."""
    check(_driver().cuGreenCtxDestroy(green.green), "cuGreenCtxDestroy")


def resource_sms(green: GreenContext) -> int:
    """cuGreenCtxGetDevResource(SM): the SMs the green context itself reports."""
    resource = check(_driver().cuGreenCtxGetDevResource(green.green, sm_type()), "cuGreenCtxGetDevResource")
    return int(resource.sm.smCount)


def stream_create(green: GreenContext) -> int:
    """cuGreenCtxStreamCreate (non-blocking, default priority): a stream of the green context, whatever is current."""
    driver = _driver()
    flags = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    return int(check(driver.cuGreenCtxStreamCreate(green.green, flags, 0), "cuGreenCtxStreamCreate"))


def make_or_reason(device: int) -> tuple[GreenContext | None, str | None]:
    """``(green context, None)``, or ``(None, why)`` where none can be made here."""
    try:
        return create(device), None
    except GreenUnavailable as exc:
        return None, str(exc)


# ---------------------------------------------------------------- what the documentation says (claims cite these)

DRIVER_GREEN = ("CUDA Driver API, Green Contexts (https://docs.nvidia.com/cuda/cuda-driver-api/"
                "group__CUDA__GREEN__CONTEXTS.html; as of CUDA 13.0: https://docs.nvidia.com/cuda/archive/13.0.0/"
                "cuda-driver-api/group__CUDA__GREEN__CONTEXTS.html)")
SOURCE_RETAINS = (f"{DRIVER_GREEN}: cuGreenCtxCreate 'will retain the primary context on device dev, which will is "
                  "released when the green context is destroyed'; cuGreenCtxDestroy 'Destroys the green context, "
                  "releasing the primary context of the device that this green context was created for'")
SOURCE_ONE_THREAD = (f"{DRIVER_GREEN}: cuGreenCtxCreate, CUDA 12.4 to 13.0 text: 'It should be noted that a green "
                     "context can be current to only one thread at a time. There is no internal synchronization to "
                     "make API calls accessing the same green context from multiple threads work.'; CUgreenCtx: 'This "
                     "handle can be used safely from only one CPU thread at a time.'")
SOURCE_AS_PRIMARY = (f"{DRIVER_GREEN}: cuCtxFromGreenCtx, CUDA 13.0 text: 'the converted context pContext is a normal "
                     "primary context but with the resources of the specified green context hCtx'; later text: the "
                     "handle 'will be treated as if it were a primary context, while still honoring the resources and "
                     "configuration associated with hCtx as applicable'")
SOURCE_PARTITION = ("CUDA Programming Guide, 4.6 Green Contexts: 'GPU work targeting a green context can only use its "
                    "provisioned SMs and work queues' (https://docs.nvidia.com/cuda/cuda-programming-guide/"
                    f"04-special-topics/green-contexts.html); {DRIVER_GREEN}: cuCtxFromGreenCtx, 'For APIs whose "
                    "behavior depends on green context resources (for example, kernel launch), the operation is "
                    "performed using the resources and configuration of the specified green context'")
SOURCE_EXECUTION_CONTEXT = ("CUDA Runtime API, Execution Context Management (CUDA 13.1+): 'cudaDeviceGetExecutionCtx: "
                            "Returns the execution context that corresponds to the primary context of the specified "
                            "device' (https://docs.nvidia.com/cuda/cuda-runtime-api/"
                            "group__CUDART__EXECUTION__CONTEXT.html); CUDA Programming Guide, 4.6 Green Contexts: "
                            "'Starting from CUDA 13.1, contexts are exposed in the CUDA runtime via the execution "
                            "context (EC) abstraction'")
