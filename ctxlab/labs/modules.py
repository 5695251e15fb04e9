"""modules: how and when modules get into a context, from nvcc's registration stub to lazy loading.

Each scenario runs in its own child process (CUDA_MODULE_LOADING is read once,
when CUDA initialises). Witnesses of a load, recorded after every step by the
shared step recorder: CUPTI's MODULE_LOADED resource event where CUPTI works,
and device memory in use (cuMemGetInfo): the probe module carries a large
``__device__`` array whose memory appears when the module is really loaded into
a context. Module and library loading are the subject of these experiments, so
the scenarios call cuda.bindings' module and library functions directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlab.claim import (
    Claim,
    Facts,
    Observations,
    one,
    repeats,
    select,
    silent_wrong,
    some,
    spread,
)
from ctxlab.lab import Isolation, Lab, LabOptions, Scenario

NAME = "modules"
# When the module showed up: after each step, MODULE_LOADED events and device memory in use.
VIEWS = {"load witness": ("module_loaded_events", "memory_grew_mib")}
BIG_MIB = 256
SEEN_MIB = BIG_MIB * 0.9  # growth of memory in use that counts as the module's global arriving

LAZY_DEFAULT = ("CUDA Programming Guide, Lazy Loading (https://docs.nvidia.com/cuda/cuda-programming-guide/"
                "04-special-topics/lazy-loading.html): change history '12.2: Lazy loading enabled by default for "
                "Linux'; 'As of CUDA 12.3 lazy Loading is enabled by default on all platforms, but can be controlled "
                "via the CUDA_MODULE_LOADING environment variable'")
LAZY = ("CUDA Programming Guide, Lazy Loading: with CUDA_MODULE_LOADING=LAZY 'loading a module (cuModuleLoad*()) "
        "will not be loading kernels immediately, instead it will delay loading of a kernel until "
        "cuModuleGetFunction()' (https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/"
        "lazy-loading.html)")
MODULE_LOAD = ("CUDA Driver API, cuModuleLoad: 'The CUDA driver API does not attempt to lazily allocate the resources "
               "needed by a module' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)")
LIBRARY = ("CUDA Driver API, cuLibraryLoadData: under EAGER the library 'is loaded eagerly into all contexts at the "
           "time of the call and future contexts at the time of creation'; under LAZY it 'is not immediately loaded "
           "onto all existent contexts and will only be loaded when a function is needed for that context, such as a "
           "kernel launch' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__LIBRARY.html)")
LIBRARY_PER_CONTEXT = ("CUDA Driver API, Library Management: cuKernelGetFunction returns the function of a "
                       "context-independent CUkernel for the current context, cuLibraryGetGlobal the global for the "
                       "current context (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__LIBRARY.html)")
PER_CONTEXT = ("CUDA Driver API, Module Management: cuModuleLoadData loads a module into the current context; its "
               "functions and globals belong to that context "
               "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)")
INITIALIZATION = ("CUDA Programming Guide, Initialization: 'As of CUDA 12.0, the cudaInitDevice() and cudaSetDevice() "
                  "calls initialize the runtime and the primary context associated with the specified device. Absent "
                  "these calls, the runtime will implicitly use device 0 and self-initialize as needed to process "
                  "other runtime API requests' (https://docs.nvidia.com/cuda/cuda-c-programming-guide/"
                  "index.html#initialization); CUDA Runtime API, Interactions with the CUDA Driver API: 'The CUDA "
                  "Runtime API will automatically initialize the primary context for a device at the first CUDA "
                  "Runtime API call which requires an active context' "
                  "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html). nvcc's registration "
                  "calls (__cudaRegisterFatBinary/Function/Var, from the host stub's static constructor) are "
                  "none of those calls")
NO_DOC = "no documentation promises this; recorded as observed"

BIG_SOURCE = f"""
__device__ char big_array[{BIG_MIB} << 20];
__device__ long long probe_global = 0;
extern "C" __global__ void touch(long long k) {{ big_array[0] = 1; probe_global += k; }}
"""

STEPS_MODULE = ("context created", "cuModuleLoadData", "cuModuleGetFunction", "first launch")
STEPS_LIBRARY = ("context created", "cuLibraryLoadData", "cuLibraryGetKernel", "cuKernelGetFunction",
                 "first launch", "second context created", "cuKernelGetFunction in the second context")
SECOND_USE = "cuKernelGetFunction in the second context"
# Under LAZY the first context needs a function at cuKernelGetFunction, or at the launch at the latest.
LAZY_LOADS = (["cuKernelGetFunction", SECOND_USE], ["first launch", SECOND_USE])
FATBIN_REGISTRATION = ("__cudaRegisterBinary", "__cudaRegisterFatBinary", "__cudaRegisterLinkedBinary")


# ---------------------------------------------------------------- claims

def _hex(handle: Any) -> str:
    return f"{handle:#x}" if handle else "none"


def _steps(steps: list[str]) -> str:
    return ", then ".join(steps) or "no step"


def _witnessed(obs: Observations, scenario: str) -> dict:
    """Where each witness saw the module (or library) arrive in a context: the steps, in order."""
    steps = [o.value for o in some(obs, "load witness", scenario)]
    cupti = steps[0]["cupti"]
    return {"event": [v["step"] for v in steps if v["module_loaded_events"]],
            "memory": [v["step"] for v in steps if v["memory_grew_mib"] >= SEEN_MIB],
            "cupti": "CUPTI events" if cupti is True else f"no CUPTI events ({cupti})"}


def _where(w: dict) -> str:
    return (f"MODULE_LOADED at {_steps(w['event'])}; device memory in use grew by {SEEN_MIB:.0f} MiB or more at "
            f"{_steps(w['memory'])}")


def _facts_module_load(obs: Observations) -> dict:
    out = {}
    for mode in ("EAGER", "LAZY"):
        w = _witnessed(obs, f"module-{mode}")
        seen = w["event"][:1] + w["memory"][:1]  # each witness's first sighting
        out[mode] = {"mode": one(obs, "loading mode", f"module-{mode}").value, "where": _where(w), "seen": seen,
                     "cupti": w["cupti"]}
    return {"eager": out["EAGER"]["where"], "eager_mode": out["EAGER"]["mode"], "lazy": out["LAZY"]["where"],
            "lazy_mode": out["LAZY"]["mode"], "cupti": out["LAZY"]["cupti"],
            "seen": {mode: v["seen"] for mode, v in out.items()}}


def _expect_module_load(f: Facts) -> bool:
    # Every witness that saw the module saw it at cuModuleLoadData, in both modes, and at least one saw it.
    return all(seen and set(seen) == {"cuModuleLoadData"} for seen in f["seen"].values())


def library_facts(mode: str) -> Callable[[Observations], dict]:
    """Facts for where the library appeared in a context under one loading mode."""
    def facts(obs: Observations) -> dict:
        w = _witnessed(obs, f"library-{mode}")
        loads = [s for s in STEPS_LIBRARY if s in w["event"] or s in w["memory"]]
        return {"mode": one(obs, "loading mode", f"library-{mode}").value, "loads": loads,
                "appeared": _steps(loads), "where": _where(w), "cupti": w["cupti"]}
    return facts


def _facts_default_mode(obs: Observations) -> dict:
    unset, lazy = _witnessed(obs, "module-unset"), _witnessed(obs, "module-LAZY")
    return {"mode": one(obs, "loading mode", "module-unset").value, "unset": _where(unset), "lazy": _where(lazy),
            "same": (unset["event"], unset["memory"]) == (lazy["event"], lazy["memory"])}


def _facts_per_context(obs: Observations) -> dict:
    v = one(obs, "two contexts", "two-contexts").value
    return {"module_primary": _hex(v["module_primary"]), "module_created": _hex(v["module_created"]),
            "global_primary": _hex(v["global_primary"]), "global_created": _hex(v["global_created"]),
            "functions": "differ" if v["functions_differ"] else "are the same",
            "read_primary": v["read_primary"], "read_created": v["read_created"],
            "apart": (v["module_primary"] != v["module_created"] and v["functions_differ"]
                      and v["global_primary"] != v["global_created"]
                      and (v["read_primary"], v["read_created"]) == (111, 222))}


def _facts_library_per_context(obs: Observations) -> dict:
    runs = some(obs, "library in two contexts")
    parts, apart = [], []
    for o in runs:
        v = o.value
        parts.append(f"{o.scenario}: functions {_hex(v['function_a'])} / {_hex(v['function_b'])}, globals "
                     f"{_hex(v['global_a'])} / {_hex(v['global_b'])}, read back {v['read_a']} / {v['read_b']}")
        apart.append(v["function_a"] != v["function_b"] and v["global_a"] != v["global_b"]
                     and (v["read_a"], v["read_b"]) == (5, 77))
    return {"per_run": "; ".join(parts), "runs": len(runs), "apart": apart}


def _facts_nvcc(obs: Observations) -> dict:
    stub = one(obs, "stub", "nvcc").value
    after = one(obs, "after dlopen", "nvcc").value
    calls = stub["registration_calls"]
    return {"registration": ", ".join(calls) or "no registration call",
            "expands": ", ".join(f"{m} -> {f}" for m, f in stub.get("expands_to", {}).items()) or "nothing",
            "constructor": "a static constructor" if stub["static_constructor"] else "no static constructor",
            "primary": {True: "active", False: "inactive"}.get(after["primary_active"], after["primary_active"]),
            "current": _hex(after["current"]),
            "registers": any(c in calls for c in FATBIN_REGISTRATION), "static": bool(stub["static_constructor"]),
            "primary_active": after["primary_active"], "current_handle": after["current"]}


def _expect_nvcc(f: Facts) -> bool:
    return f["registers"] and f["static"] and f["primary_active"] is False and not f["current_handle"]


def _facts_nvcc_runtime(obs: Observations) -> dict:
    v = one(obs, "library runtime vs CuPy", "nvcc").value
    return {"library_runtime": v["library_runtime"], "cupy_runtime": v["cupy_runtime"], "status": v["status"],
            "result": v["result"], "device": v.get("device", 0), "library_context": _hex(v["library_context"]),
            "cupy_context": _hex(v["cupy_context"]), "primary": _hex(v.get("primary")),
            "same": "the same handle" if v["shared"] else "different handles"}


def _facts_cupy_cache(obs: Observations) -> dict:
    runs = repeats(obs, "cupy cached kernel in other context", "cupy-cache")
    broke = [o.value.get("kind", "?") for o in select(obs, "repeat broke", "cupy-cache")]
    return {"runs": len(runs) + len(broke), "outcomes": spread(v["outcome"] for v in runs),
            "first": spread(v["first"] for v in runs), "silent_wrong": silent_wrong(v["outcome"] for v in runs),
            "broke": spread(broke) if broke else "none"}


CLAIMS = (
    Claim("modules.module-load-is-immediate",
          "cuModuleLoadData loads the module and allocates its globals at once, lazy loading or not "
          "(only kernels wait for cuModuleGetFunction).", MODULE_LOAD + "; " + LAZY, "promise",
          ("module-EAGER", "module-LAZY"), _facts_module_load,
          "EAGER (cuModuleGetLoadingMode: {eager_mode}): {eager}. LAZY ({lazy_mode}): {lazy} ({cupti})",
          _expect_module_load),
    Claim("modules.library-lazy-at-first-use",
          "Under lazy loading a library is loaded into a context only when that context first needs one of its "
          "functions (cuKernelGetFunction, or a launch).", LIBRARY, "promise", ("library-LAZY",), library_facts("LAZY"),
          "with CUDA_MODULE_LOADING=LAZY (cuModuleGetLoadingMode: {mode}) the library appeared in a context at: "
          "{appeared} ({where}; {cupti})",
          lambda f: f["loads"] in LAZY_LOADS),
    Claim("modules.library-eager-everywhere",
          "Under eager loading a library is loaded into the current context at cuLibraryLoadData and into "
          "contexts created later at their creation.", LIBRARY, "promise", ("library-EAGER",), library_facts("EAGER"),
          "with CUDA_MODULE_LOADING=EAGER (cuModuleGetLoadingMode: {mode}) the library appeared in a context at: "
          "{appeared} ({where}; {cupti})",
          lambda f: f["loads"] == ["cuLibraryLoadData", "second context created"]),
    Claim("modules.default-loading-mode",
          "With CUDA_MODULE_LOADING unset, modules load lazily (the default on Linux since CUDA 12.2).",
          LAZY_DEFAULT, "promise", ("module-unset", "module-LAZY"), _facts_default_mode,
          "with CUDA_MODULE_LOADING unset, cuModuleGetLoadingMode reports {mode}; the module arrived: {unset} "
          "(with LAZY: {lazy})",
          lambda f: f["mode"] == "CU_MODULE_LAZY_LOADING" and f["same"]),
    Claim("modules.per-context-instances",
          "A module loaded in two contexts gives each its own module, functions and globals.", PER_CONTEXT,
          "promise", ("two-contexts",), _facts_per_context,
          "the same cubin loaded in the primary and a created context: modules {module_primary} and "
          "{module_created}, functions {functions}, globals at {global_primary} and {global_created}; wrote 111 and "
          "222, read back {read_primary} and {read_created}",
          lambda f: f["apart"]),
    Claim("modules.library-per-context",
          "A library loaded once gives a function and a global per context that uses it.", LIBRARY_PER_CONTEXT,
          "promise", ("library-LAZY", "library-EAGER"), _facts_library_per_context,
          "cuLibraryLoadData once, one CUkernel used in two contexts, in {runs} run(s) (the first context's global "
          "should read 5 after the kernel added 5, the second's 77 after a write): {per_run}",
          lambda f: all(f["apart"])),
    Claim("modules.nvcc-registration-makes-no-context",
          "nvcc's host stub registers the fatbinary, kernels and variables from a static constructor, and that "
          "registration creates no context: after the library is loaded the primary context is inactive and no "
          "context is current.", INITIALIZATION, "promise", ("nvcc",), _facts_nvcc,
          "the stub nvcc wrote registers through {registration} (expanding to: {expands}) from {constructor}; after "
          "dlopen of the library: primary context {primary}, context current on the thread: {current}",
          _expect_nvcc),
    Claim("modules.nvcc-library-runtime",
          "Which context the kernel of a separately built library runs in, next to CuPy.", NO_DOC, "observation",
          ("nvcc",), _facts_nvcc_runtime,
          "the library's own runtime ({library_runtime}) launched its kernel (status {status}, result {result}) on "
          "device {device} in context {library_context}; CuPy's runtime ({cupy_runtime}) on that device uses "
          "{cupy_context} ({same}); the device's primary context: {primary}"),
    Claim("modules.cupy-kernel-cache",
          "CuPy's per-device kernel cache when another context is current.", NO_DOC, "observation",
          ("cupy-cache",), _facts_cupy_cache,
          "a CuPy kernel compiled and loaded under the primary context (there: {first}), launched with a "
          "cuCtxCreate context current, over {runs} run(s): {outcomes}; wrong values returned without an error: "
          "{silent_wrong}; runs that crashed: {broke}"),
)


# ---------------------------------------------------------------- scenarios (children)

class LoadProbe:
    """What a load witness reads after each step: MODULE_LOADED events among the step's events, and how much
    device memory in use grew since the last step (set ``used`` to None to count afresh, e.g. per context)."""

    def __init__(self, cupti: bool | str):
        self.cupti = cupti  # True, or why CUPTI could not watch
        self.used: int | None = None

    def __call__(self, events: list) -> dict:
        """MODULE_LOADED events among the step's events, and how much device memory in use grew."""
        from ctxlab.cuda import driver as drv

        grew = 0.0
        if not drv.current().none:
            free, total = drv.mem_get_info()
            used = total - free
            grew = 0.0 if self.used is None else (used - self.used) / 2**20
            self.used = used
        return {"module_loaded_events": module_loads(events), "memory_grew_mib": round(grew, 1),
                "cupti": self.cupti}


def module_loads(events: list) -> int:
    """MODULE_LOADED resource events among a step's events (summarized labels or raw CUPTI events)."""
    return sum(e.get("name") == "MODULE_LOADED" if isinstance(e, dict) else str(e).count("[MODULE_LOADED]")
               for e in events)


def load_witness(scenario: str):
    """The step recorder of a loading scenario; without ``--trace``, a CUPTI resource tracer of its own."""
    from ctxlab.labs.common import StepRecorder, cuda_recorder
    from ctxlab.trace import Tracer, TraceUnavailable

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
    from ctxlab.cuda.kernels import _arch_of_current_context, compile_cubin

    return compile_cubin(source, "modules_probe.cu", *_arch_of_current_context())


def _loading_mode(w) -> None:
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    w.rec.add("start", "loading mode", check(init_driver().cuModuleGetLoadingMode()).name)


def module_loading(device: int, mode: str | None) -> dict:
    """cuModuleLoadData of a module with a 256 MiB global, step by step, under one CUDA_MODULE_LOADING."""
    import ctypes

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

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
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder("two-contexts")
    primary = drv.primary_retain(device)
    drv.set_current(primary)
    a = ProbeModule.load()
    a.write_global(111)
    created = drv.create_context(device)
    b = ProbeModule.load()
    b.write_global(222)
    read_b = b.read_global()
    drv.pop()
    read_a = a.read_global()
    rec.add("both", "two contexts", {"module_primary": int(a.module), "module_created": int(b.module),
                                     "modules_differ": int(a.module) != int(b.module),
                                     "functions_differ": int(a.add_fn) != int(b.add_fn),
                                     "global_primary": a.global_address, "global_created": b.global_address,
                                     "globals_differ": a.global_address != b.global_address,
                                     "read_primary": read_a, "read_created": read_b,
                                     "values_kept_apart": (read_a, read_b) == (111, 222),
                                     "contexts": [primary, created]})
    return scenario_output(rec)


def library(device: int, mode: str) -> dict:
    """cuLibraryLoadData under one CUDA_MODULE_LOADING: when it reaches the first context, then a second one."""
    import ctypes

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

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
    check(driver.cuLaunchKernel(fn_a, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), ((5,), (ctypes.c_longlong,)), 0),
          "cuLaunchKernel")
    drv.synchronize()
    w.after("first launch")
    _second_context(w, device, lib, kernel, fn_a, first)
    return w.output()


def _second_context(w, device: int, lib, kernel, fn_a, first: int) -> None:
    """The library's kernel and global in a second context; then both globals read back."""
    import struct

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    driver = init_driver()
    global_a, _ = check(driver.cuLibraryGetGlobal(lib, b"probe_global"), "cuLibraryGetGlobal")
    second = drv.create_context(device)
    w.probe.used = None  # memory is counted per context from here
    w.after("second context created")
    fn_b = check(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
    w.after("cuKernelGetFunction in the second context")
    global_b, _ = check(driver.cuLibraryGetGlobal(lib, b"probe_global"), "cuLibraryGetGlobal")
    drv.copy_to_device(int(global_b), struct.pack("<q", 77))
    read_b = struct.unpack("<q", drv.copy_from_device(int(global_b), 8))[0]
    drv.pop()
    read_a = struct.unpack("<q", drv.copy_from_device(int(global_a), 8))[0]
    w.rec.add("both", "library in two contexts",
              {"kernel": int(kernel), "function_a": int(fn_a), "function_b": int(fn_b),
               "functions_differ": int(fn_a) != int(fn_b), "global_a": int(global_a), "global_b": int(global_b),
               "globals_differ": int(global_a) != int(global_b), "read_a": read_a, "read_b": read_b,
               "values_kept_apart": (read_a, read_b) == (5, 77), "contexts": [first, second]})


def _build_probe(rec) -> str | None:
    """Build nvcc_probe.cu into a shared library with nvcc --keep; record its stub. None (recorded as
    skipped) when nvcc is missing or fails."""
    import glob
    import os
    import shutil
    import subprocess
    import tempfile
    from importlib.resources import files
    from pathlib import Path

    from ctxlab.stub import parse_stub

    compiler = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda/bin/nvcc")), None)
    if not compiler:
        rec.add("build", "skipped", "nvcc is not on the PATH (nor in /usr/local/cuda/bin)", context=(None, None))
        return None
    work = tempfile.mkdtemp(prefix="ctxlab-nvcc-")
    source = os.path.join(work, "nvcc_probe.cu")
    with open(source, "w") as handle:
        handle.write(files("ctxlab.labs").joinpath("nvcc_probe.cu").read_text())
    library_path = os.path.join(work, "libnvcc_probe.so")
    build = subprocess.run([compiler, "--keep", f"--keep-dir={work}", "-shared", "-Xcompiler", "-fPIC",
                            "-o", library_path, source], check=False, capture_output=True, text=True, timeout=240)
    if build.returncode != 0:
        rec.add("build", "skipped", f"nvcc failed: {build.stderr.strip()[-400:]}", context=(None, None))
        return None
    stub_path = next(iter(glob.glob(os.path.join(work, "*.cudafe1.stub.c"))), None)
    stub_text = Path(stub_path).read_text() if stub_path else ""
    rec.add("build", "stub", {**parse_stub(stub_text), "file": os.path.basename(stub_path or ""),
                              "nvcc": build.args[0]}, context=(None, None))
    rec.add("build", "stub text", stub_text, context=(None, None))
    return library_path


def nvcc(device: int) -> dict:
    """A library built by nvcc: what its stub registers, the state after dlopen, the context its kernel ran in."""
    import ctypes

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder, scenario_output

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


# ---------------------------------------------------------------- the lab

def scenarios(options: LabOptions) -> list[Scenario]:
    """Module and library loading under each CUDA_MODULE_LOADING, two contexts, nvcc's stub, CuPy's cache."""
    here, device = "ctxlab.labs.modules", options.device

    def loading(name: str, function: str, mode: str | None) -> Scenario:
        # Device memory in use is one of the load witnesses: these scenarios hold the GPU alone.
        # CUDA reads CUDA_MODULE_LOADING once, at initialisation (None: unset in the child).
        return Scenario(name, f"{here}:{function}", (device, mode), env={"CUDA_MODULE_LOADING": mode},
                        isolation=Isolation.GPU_ALONE, timeout=300)

    out = [loading(f"module-{mode or 'unset'}", "module_loading", mode) for mode in ("EAGER", "LAZY", None)]
    out.append(Scenario("two-contexts", f"{here}:two_contexts", (device,), timeout=300))
    out += [loading(f"library-{mode}", "library", mode) for mode in ("EAGER", "LAZY")]
    out.append(Scenario("nvcc", f"{here}:nvcc", (device,), timeout=300))
    # A kernel cached under one context, launched under another: undefined-behaviour territory, repeated.
    out.append(Scenario("cupy-cache", "ctxlab.labs.migrate:cupy_kernel_reverse", (device,),
                        kwargs={"label": "cupy-cache"}, undefined=True))
    return out


LAB = Lab(NAME, "How and when are modules loaded into a context, from nvcc's stub to lazy loading?", LabOptions,
          CLAIMS, scenarios, views=VIEWS)
