"""What this machine is: driver, runtimes, GPUs, library versions.

Every entry point that needs CUDA goes through ``driver_module()`` /
``init_driver()``, which raise ``NoGpu`` with one line saying what is missing.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from typing import Any

from ctxlab.cuda.errors import CudaError, NoGpu, check


def driver_module():
    """cuda.bindings.driver, or NoGpu saying why it cannot be used."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise NoGpu(f"cuda-bindings is not installed ({exc}); install ctxlab with the extra cu13 or cu12") from None
    return driver


_initialized = False


def init_driver():
    """cuInit(0), once per process; NoGpu where there is no driver or no GPU."""
    global _initialized
    driver = driver_module()
    if _initialized:
        return driver
    try:
        result = driver.cuInit(0)
    except Exception as exc:  # cuda.pathfinder raises when libcuda.so is nowhere
        raise NoGpu(f"no NVIDIA driver: libcuda.so could not be loaded ({type(exc).__name__})") from None
    name = getattr(result[0], "name", str(result[0]))
    if name == "CUDA_ERROR_NO_DEVICE":
        raise NoGpu("the NVIDIA driver is loaded but sees no GPU (CUDA_ERROR_NO_DEVICE)")
    if int(result[0]) != 0:
        raise NoGpu(f"cuInit failed: {name}")
    _initialized = True
    return driver


def device_count() -> int:
    """How many GPUs the driver sees (NoGpu where there is no driver)."""
    driver = init_driver()
    return check(driver.cuDeviceGetCount(), "cuDeviceGetCount")


class BadDevice(ValueError):
    """A device index that this machine does not have."""


def require_device(index: int):
    """The CUdevice for an index, or BadDevice naming the devices there are."""
    count = device_count()
    if not 0 <= index < count:
        raise BadDevice(f"device {index} does not exist: this machine has {count} GPU(s), 0..{count - 1}")
    driver = init_driver()
    return check(driver.cuDeviceGet(index), "cuDeviceGet")


def package_version(name: str) -> str | None:
    """An installed distribution's version, None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def cupy_distribution() -> str | None:
    """Which CuPy distribution is installed (cupy-cuda13x, cupy-cuda12x, cupy), if any."""
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        if package_version(name):
            return name
    return None


def device_info(index: int) -> dict:
    """A GPU's name, compute capability and memory, read without creating a context."""
    driver = init_driver()
    dev = check(driver.cuDeviceGet(index), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    name = check(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")
    major = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    total = check(driver.cuDeviceTotalMem(dev), "cuDeviceTotalMem")
    flags, active = check(driver.cuDevicePrimaryCtxGetState(dev), "cuDevicePrimaryCtxGetState")
    return {
        "index": index,
        "name": name.split(b"\0", 1)[0].decode(),
        "compute_capability": f"{major}.{minor}",
        "memory_bytes": int(total),
        "primary_context_active": bool(active),
        "primary_context_flags": int(flags),
    }


def runtime_versions() -> dict:
    """Each copy of the CUDA runtime this process can reach, with its version.

    CuPy and cuda.bindings each link their own runtime statically: the numbers differ.
    """
    versions: dict[str, int | None] = {}
    try:
        import cupy

        versions["cupy"] = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:
        versions["cupy"] = None
    try:
        from cuda.bindings import runtime

        versions["cuda_bindings"] = check(runtime.cudaRuntimeGetVersion(), "cudaRuntimeGetVersion")
    except Exception:
        versions["cuda_bindings"] = None
    return versions


# Variables the CUDA driver reads that change what a lab sees or how fast it runs (the hardware queues a
# context sets up, which GPUs exist and in what order, when modules load, synchronous launches).
DRIVER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MODULE_LOADING", "CUDA_MODULE_DATA_LOADING",
                    "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_DEVICE_MAX_COPY_CONNECTIONS", "CUDA_LAUNCH_BLOCKING",
                    "CUDA_SCALE_LAUNCH_QUEUES")


def driver_variables() -> dict[str, str]:
    """The variables of DRIVER_VARIABLES that are set in this process, with their values."""
    return {name: os.environ[name] for name in DRIVER_VARIABLES if name in os.environ}


def capture(device: int = 0) -> dict:
    """The environment block of a LabResult (docs/schema.md): versions, the GPU and where it ran."""
    driver = init_driver()
    info = device_info(device)
    runtimes = runtime_versions()
    return {
        "driver_version": check(driver.cuDriverGetVersion(), "cuDriverGetVersion"),
        "runtime_version": runtimes.get("cupy"),
        "runtime_versions": runtimes,
        "gpu": info["name"],
        "device": device,
        "gpu_count": device_count(),  # what a skip for want of GPUs is checked against (ctxlab.records.skips)
        "compute_capability": info["compute_capability"],
        "gpu_uuid": gpu_uuid(device),
        "cupy": package_version(cupy_distribution() or "cupy"),
        "cuda_bindings": package_version("cuda-bindings"),
        "cupti_python": package_version("cupti-python"),
        "libraries": libraries(),
        "driver_variables": driver_variables(),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
    }


INTEROP_LIBRARIES = ("torch", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "numba-cuda", "cuda-core")


def libraries() -> dict[str, str | None]:
    """Installed versions of the libraries the interop lab uses (package metadata only: nothing is imported)."""
    return {name: package_version(name) for name in INTEROP_LIBRARIES}


def gpu_uuid(device: int) -> str | None:
    """The GPU's UUID as nvidia-smi prints it (GPU-xxxxxxxx-...), or None where the driver cannot say."""
    driver = init_driver()
    try:
        dev = check(driver.cuDeviceGet(device), "cuDeviceGet")
        raw = bytes(check(driver.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)[:16]
    except (CudaError, AttributeError, TypeError):
        return None
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _probe(what: str, fn) -> dict:
    try:
        return {"ok": True, **fn()}
    except NoGpu as exc:
        return {"ok": False, "problem": str(exc)}
    except CudaError as exc:
        return {"ok": False, "problem": str(exc)}
    except Exception as exc:
        return {"ok": False, "problem": f"{what}: {type(exc).__name__}: {exc}"}


def _driver_part() -> dict:
    driver = init_driver()
    count = device_count()
    mode = check(driver.cuModuleGetLoadingMode(), "cuModuleGetLoadingMode")
    return {
        "version": check(driver.cuDriverGetVersion(), "cuDriverGetVersion"),
        "devices": [device_info(i) for i in range(count)],
        "module_loading_mode": mode.name,
    }


def _cupy_part() -> dict:
    import cupy

    return {"version": cupy.__version__, "distribution": cupy_distribution(),
            "runtime_version": int(cupy.cuda.runtime.runtimeGetVersion())}


def _bindings_part() -> dict:
    from cuda.bindings import runtime

    return {"version": package_version("cuda-bindings"),
            "runtime_version": check(runtime.cudaRuntimeGetVersion(), "cudaRuntimeGetVersion")}


def _nvrtc_part() -> dict:
    from cuda.bindings import nvrtc

    major, minor = check(nvrtc.nvrtcVersion(), "nvrtcVersion")
    return {"version": f"{major}.{minor}"}


def _cupti_part() -> dict:
    from cupti import cupti

    version = package_version("cupti-python")
    library = package_version("nvidia-cuda-cupti") or package_version("nvidia-cuda-cupti-cu12")
    # A subscribe/unsubscribe pair loads libcupti and proves no other subscriber holds it.
    subscriber = cupti.subscribe(lambda *args: None, 0)
    cupti.unsubscribe(subscriber)
    return {"version": version, "library": library}


def doctor() -> dict:
    """Everything ctxlab needs, found or not, without creating a context."""
    report: dict[str, Any] = {
        "ctxlab": package_version("ctxlab"),
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING"),
        "driver": _probe("driver", _driver_part),
        "cupy": _probe("cupy", _cupy_part),
        "cuda_bindings": _probe("cuda-bindings", _bindings_part),
        "nvrtc": _probe("nvrtc", _nvrtc_part),
        "cupti": _probe("cupti", _cupti_part),
    }
    report["missing"] = [f"{key}: {value['problem']}" for key, value in report.items()
                         if isinstance(value, dict) and not value.get("ok", True)]
    return report
