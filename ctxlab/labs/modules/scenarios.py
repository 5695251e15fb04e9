"""modules' scenarios, each run in a child process of its own (CUDA_MODULE_LOADING is read once, when CUDA
initialises), and the lab's list of them. Module and library loading are the subject of these experiments, so
the scenarios call cuda.bindings' module and library functions directly."""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check
from ctxlab.cuda.kernels import ProbeModule, _arch_of_current_context, compile_cubin
from ctxlab.lab import Isolation, LabOptions, Scenario
from ctxlab.labs.common import StepRecorder, cuda_recorder, record_skip, scenario_output
from ctxlab.labs.migrate.scenarios import cupy_kernel_reverse
from ctxlab.labs.modules.claims import BIG_MIB
from ctxlab.labs.modules.stub import parse_stub
from ctxlab.records import skips
from ctxlab.tracing.tracer import Tracer, TraceUnavailable

BIG_SOURCE = f"""
__device__ char big_array[{BIG_MIB} << 20];
__device__ long long probe_global = 0;
extern "C" __global__ void touch(long long k) {{ big_array[0] = 1; probe_global += k; }}
"""
WRITE_PRIMARY, WRITE_CREATED = 111, 222  # two-contexts: each context's global gets its own value
ADD_FIRST, WRITE_SECOND = 5, 77  # library-*: the kernel adds to the first context's global, a copy writes the second's


class LoadProbe:
    """What a load witness reads after each step: MODULE_LOADED events among the step's events, and how much
    device memory in use grew since the last step (set ``used`` to None to count afresh, e.g. per context)."""

    def __init__(self, cupti: bool | str, global_mib: int = BIG_MIB):
        self.cupti = cupti  # True, or why CUPTI could not watch
        self.global_mib = global_mib  # the size of the module's __device__ array, recorded for the claims
        self.used: int | None = None

    def __call__(self, events: list) -> dict:
        """MODULE_LOADED events among the step's events, and how much device memory in use grew."""
        grew = 0.0
        if not drv.current().none:
            free, total = drv.mem_get_info()
            used = total - free
            grew = 0.0 if self.used is None else (used - self.used) / 2**20
            self.used = used
        return {"module_loaded_events": module_loads(events), "memory_grew_mib": round(grew, 1),
                "cupti": self.cupti, "global_mib": self.global_mib}


def module_loads(events: list) -> int:
    """MODULE_LOADED resource events among a step's events (summarized labels or raw CUPTI events)."""
    return sum(e.get("name") == "MODULE_LOADED" if isinstance(e, dict) else str(e).count("[MODULE_LOADED]")
               for e in events)


def load_witness(scenario: str):
    """The step recorder of a loading scenario; without ``--trace``, a CUPTI resource tracer of its own."""
    rec = cuda_recorder(scenario)
    cupti: bool | str = True
    if rec.tracer is None:  # untraced run: MODULE_LOADED still needs CUPTI's resource domain
        try:
            tracer = Tracer(domains=("resource",)).__enter__()
            rec = cuda_recorder(scenario, tracer=tracer)
        except TraceUnavailable as exc:
            cupti = str(exc)
    return StepRecorder(scenario, "load witness", LoadProbe(cupti), rec=rec)


def _cubin(source: str) -> bytes:
    return compile_cubin(source, "modules_probe.cu", *_arch_of_current_context())


def _loading_mode(w) -> None:
    w.rec.add("start", "loading mode", check(init_driver().cuModuleGetLoadingMode()).name)


def module_loading(device: int, mode: str | None) -> dict:
    """cuModuleLoadData of a module with a 256 MiB global, step by step, under one CUDA_MODULE_LOADING."""
    driver = init_driver()
    w = load_witness(f"module-{mode or 'unset'}")
    _loading_mode(w)
    drv.set_current(drv.primary_retain(device))
    cubin = _cubin(BIG_SOURCE)  # NVRTC, no CUDA context work
    w.after("context created")
    module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    w.after("cuModuleLoadData")
    fn = check(driver.cuModuleGetFunction(module, b"touch"), "cuModuleGetFunction")
    w.after("cuModuleGetFunction")
    check(driver.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), ((1,), (ctypes.c_longlong,)), 0),
          "cuLaunchKernel")
    drv.synchronize()
    w.after("first launch")
    return w.output()


def two_contexts(device: int) -> dict:
    """The probe module loaded in the primary and in a created context: two modules, two globals?"""
    rec = cuda_recorder("two-contexts")
    primary = drv.primary_retain(device)
    drv.set_current(primary)
    a = ProbeModule.load()
    a.write_global(WRITE_PRIMARY)
    created = drv.create_context(device)
    b = ProbeModule.load()
    b.write_global(WRITE_CREATED)
    read_b = b.read_global()
    drv.pop()
    read_a = a.read_global()
    rec.add("both", "two contexts", {"module_primary": int(a.module), "module_created": int(b.module),
                                     "modules_differ": int(a.module) != int(b.module),
                                     "function_primary": int(a.add_fn), "function_created": int(b.add_fn),
                                     "global_primary": a.global_address, "global_created": b.global_address,
                                     "globals_differ": a.global_address != b.global_address,
                                     "wrote_primary": WRITE_PRIMARY, "wrote_created": WRITE_CREATED,
                                     "read_primary": read_a, "read_created": read_b,
                                     "values_kept_apart": (read_a, read_b) == (WRITE_PRIMARY, WRITE_CREATED),
                                     "contexts": [primary, created]})
    return scenario_output(rec)


def library(device: int, mode: str) -> dict:
    """cuLibraryLoadData under one CUDA_MODULE_LOADING: when it reaches the first context, then a second one."""
    driver = init_driver()
    w = load_witness(f"library-{mode}")
    _loading_mode(w)
    first = drv.primary_retain(device)
    drv.set_current(first)
    cubin = _cubin(BIG_SOURCE)
    w.after("context created")
    lib = check(driver.cuLibraryLoadData(cubin, [], [], 0, [], [], 0), "cuLibraryLoadData")
    w.after("cuLibraryLoadData")
    kernel = check(driver.cuLibraryGetKernel(lib, b"touch"), "cuLibraryGetKernel")
    w.after("cuLibraryGetKernel")
    fn_a = check(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
    w.after("cuKernelGetFunction")
    check(driver.cuLaunchKernel(fn_a, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), ((ADD_FIRST,), (ctypes.c_longlong,)),
                                0), "cuLaunchKernel")
    drv.synchronize()
    w.after("first launch")
    _second_context(w, device, lib, kernel, fn_a, first)
    return w.output()


def _second_context(w, device: int, lib, kernel, fn_a, first: int) -> None:
    """The library's kernel and global in a second context; then both globals read back."""
    driver = init_driver()
    global_a, _ = check(driver.cuLibraryGetGlobal(lib, b"probe_global"), "cuLibraryGetGlobal")
    second = drv.create_context(device)
    w.probe.used = None  # memory is counted per context from here
    w.after("second context created")
    fn_b = check(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
    w.after("cuKernelGetFunction in the second context")
    global_b, _ = check(driver.cuLibraryGetGlobal(lib, b"probe_global"), "cuLibraryGetGlobal")
    drv.copy_to_device(int(global_b), struct.pack("<q", WRITE_SECOND))
    read_b = struct.unpack("<q", drv.copy_from_device(int(global_b), 8))[0]
    drv.pop()
    read_a = struct.unpack("<q", drv.copy_from_device(int(global_a), 8))[0]
    w.rec.add("both", "library in two contexts",
              {"kernel": int(kernel), "function_a": int(fn_a), "function_b": int(fn_b),
               "functions_differ": int(fn_a) != int(fn_b), "global_a": int(global_a), "global_b": int(global_b),
               "globals_differ": int(global_a) != int(global_b), "added_a": ADD_FIRST, "wrote_b": WRITE_SECOND,
               "read_a": read_a, "read_b": read_b, "values_kept_apart": (read_a, read_b) == (ADD_FIRST, WRITE_SECOND),
               "contexts": [first, second]})


def _build_probe(rec) -> str | None:
    """Build nvcc_probe.cu into a shared library with nvcc --keep; record its stub. None (recorded as
    skipped) when nvcc is missing or fails."""
    compiler = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda/bin/nvcc")), None)
    if not compiler:
        record_skip(rec, skips.unsupported("nvcc is not on the PATH (nor in /usr/local/cuda/bin)"), step="build")
        return None
    work = tempfile.mkdtemp(prefix="ctxlab-nvcc-")
    source = os.path.join(work, "nvcc_probe.cu")
    with open(source, "w") as handle:
        handle.write(files("ctxlab.labs").joinpath("nvcc_probe.cu").read_text())
    library_path = os.path.join(work, "libnvcc_probe.so")
    build = subprocess.run([compiler, "--keep", f"--keep-dir={work}", "-shared", "-Xcompiler", "-fPIC",
                            "-o", library_path, source], check=False, capture_output=True, text=True, timeout=240)
    if build.returncode != 0:
        record_skip(rec, skips.unsupported(f"nvcc failed: {build.stderr.strip()[-400:]}"), step="build")
        return None
    stub_path = next(iter(glob.glob(os.path.join(work, "*.cudafe1.stub.c"))), None)
    stub_text = Path(stub_path).read_text() if stub_path else ""
    rec.add("build", "stub", {**parse_stub(stub_text), "file": os.path.basename(stub_path or ""),
                              "nvcc": build.args[0]}, context=(None, None))
    rec.add("build", "stub text", stub_text, context=(None, None))
    return library_path


def nvcc(device: int) -> dict:
    """A library built by nvcc: what its stub registers, the state after dlopen, the context its kernel ran in."""
    rec = cuda_recorder("nvcc")
    library_path = _build_probe(rec)
    if library_path is None:
        return scenario_output(rec)
    init_driver()
    library = ctypes.CDLL(library_path)  # runs the stub's static constructor
    state = drv.primary_state(device)
    rec.add("dlopen", "after dlopen", {"primary_active": state.active, "current": drv.current().handle})
    result = ctypes.c_int(0)
    status = library.tiny_run(ctypes.byref(result))
    library_context = drv.current().handle
    library_device = library.tiny_device()  # its runtime's device on this thread: the default, 0
    import cupy

    cupy.cuda.runtime.setDevice(library_device)  # CuPy's runtime copy, same device
    cupy_context = drv.current().handle
    rec.add("compare", "library runtime vs CuPy",
            {"status": status, "result": result.value, "library_context": library_context, "device": library_device,
             "library_runtime": library.tiny_runtime_version(), "cupy_runtime": cupy.cuda.runtime.runtimeGetVersion(),
             "cupy_context": cupy_context, "shared": library_context == cupy_context,
             "primary": drv.primary_retain(library_device)})
    return scenario_output(rec)


def scenarios(options: LabOptions) -> list[Scenario]:
    """Module and library loading under each CUDA_MODULE_LOADING, two contexts, nvcc's stub, CuPy's cache."""
    device = options.device

    def loading(name: str, function: Callable[..., dict], mode: str | None) -> Scenario:
        # Device memory in use is one of the load witnesses: these scenarios hold the GPU alone.
        # CUDA reads CUDA_MODULE_LOADING once, at initialisation (None: unset in the child).
        return Scenario(name, function, (device, mode), env={"CUDA_MODULE_LOADING": mode},
                        isolation=Isolation.GPU_ALONE, timeout=300)

    out = [loading(f"module-{mode or 'unset'}", module_loading, mode) for mode in ("EAGER", "LAZY", None)]
    out.append(Scenario("two-contexts", two_contexts, (device,), timeout=300))
    out += [loading(f"library-{mode}", library, mode) for mode in ("EAGER", "LAZY")]
    out.append(Scenario("nvcc", nvcc, (device,), timeout=300))
    # A kernel cached under one context, launched under another: undefined-behaviour territory, repeated.
    out.append(Scenario("cupy-cache", cupy_kernel_reverse, (device,), kwargs={"label": "cupy-cache"}, undefined=True))
    return out

