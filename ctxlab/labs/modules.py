"""modules: how and when modules get into a context, from nvcc's registration stub to lazy loading.

Each scenario runs in a fresh child process (CUDA_MODULE_LOADING is read once,
when CUDA initialises). Witnesses of a load: CUPTI's MODULE_LOADED resource
event where CUPTI works, and device memory in use (cuMemGetInfo): the probe
module carries a large ``__device__`` array whose memory appears when the
module is really loaded into the context.
"""

from __future__ import annotations

from ctxlab.claims import Claim, MissingObservation, documented, one, select, unless_skipped

NAME = "modules"
# When the module showed up: after each step, MODULE_LOADED events and device memory in use.
VIEWS = {"load witness": ("module_loaded_events", "memory_grew_mib")}
BIG_MIB = 256

LAZY = ("CUDA Programming Guide, Lazy Loading: with CUDA_MODULE_LOADING=LAZY (default on Linux since 12.2) "
        "'loading a module (cuModuleLoad*()) will not be loading kernels immediately, instead it will delay loading "
        "of a kernel until cuModuleGetFunction()'; the runtime loads each module at the first use of one of its kernels "
        "or variables (https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/lazy-loading.html)")
MODULE_LOAD = ("CUDA Driver API, cuModuleLoad: 'The CUDA driver API does not attempt to lazily allocate the resources "
               "needed by a module' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)")
LIBRARY = ("CUDA Driver API, Library Management: cuLibraryLoadData loads context-independently: eagerly into every "
           "context at the call and into contexts created later, or, with lazy loading, into a context when it first "
           "uses the library; cuKernelGetFunction/cuLibraryGetGlobal give the per-context function and global "
           "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__LIBRARY.html)")
PER_CONTEXT = ("CUDA Driver API, Module Management: a module is loaded into the current context; its functions "
               "and globals belong to that context (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MODULE.html)")
NVCC = ("CUDA Runtime API, 'Interactions with the CUDA Driver API' and nvcc's host stub: registration "
        "(__cudaRegisterFatBinary/Function/Var) runs in a static constructor and creates no context; the runtime "
        "loads the module at its first use (https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html)")
NO_DOC = "no documentation promises this; recorded as observed"

BIG_SOURCE = f"""
__device__ char big_array[{BIG_MIB} << 20];
__device__ long long probe_global = 0;
extern "C" __global__ void touch(long long k) {{ big_array[0] = 1; probe_global += k; }}
"""

STEPS_MODULE = ("context created", "cuModuleLoadData", "cuModuleGetFunction", "first launch")
STEPS_LIBRARY = ("context created", "cuLibraryLoadData", "cuLibraryGetKernel", "cuKernelGetFunction",
                 "first launch", "second context created", "cuKernelGetFunction in the second context")


# ---------------------------------------------------------------- claims

def _loaded_at(obs, scenario):
    """The step at which the module was first seen loaded, by each witness."""
    steps = select(obs, "load witness", scenario)
    if not steps:
        raise MissingObservation(f"load witness in {scenario}")
    by_event = next((o.value["step"] for o in steps if o.value["module_loaded_events"]), None)
    by_memory = next((o.value["step"] for o in steps if o.value["memory_grew_mib"] >= BIG_MIB * 0.9), None)
    return {"event": by_event, "memory": by_memory, "cupti": steps[0].value["cupti"],
            "mode": one(obs, "loading mode", scenario).value}


def judge_module_load(obs):
    eager, lazy = _loaded_at(obs, "module-EAGER"), _loaded_at(obs, "module-LAZY")
    at = {mode: v["memory"] or v["event"] for mode, v in (("EAGER", eager), ("LAZY", lazy))}
    return documented(at["EAGER"] == at["LAZY"] == "cuModuleLoadData",
                      f"cuModuleLoadData loaded the module and allocated its {BIG_MIB} MiB global at once under "
                      f"EAGER and LAZY alike (MODULE_LOADED and memory both at {at['LAZY']}); lazy loading defers "
                      f"only the kernel code, which neither witness sees",
                      f"module resources appeared at EAGER {at['EAGER']}, LAZY {at['LAZY']}, not at cuModuleLoadData")


def _library_loads(obs, mode):
    """Steps at which the library appeared in a context (MODULE_LOADED or its global's memory)."""
    return [o.value["step"] for o in select(obs, "load witness", f"library-{mode}")
            if o.value["module_loaded_events"] or o.value["memory_grew_mib"] >= BIG_MIB * 0.9]


def library_judge(mode: str, expected: list[str], says: str):
    """Judge where the library appeared under one loading mode against where the documentation puts it."""
    def judge(obs):
        loads = _library_loads(obs, mode)
        return documented(loads == expected, f"under {mode} the library went into {says}: " + ", then ".join(loads),
                          f"under {mode} the library appeared at: {', '.join(loads) or 'no step'}")
    return judge


judge_library_lazy = library_judge("LAZY", ["cuKernelGetFunction", "cuKernelGetFunction in the second context"],
                                   "each context only when that context first used it")
judge_library_eager = library_judge("EAGER", ["cuLibraryLoadData", "second context created"],
                                    "the current context at cuLibraryLoadData and the second one when it was created")


def judge_default_mode(obs):
    v = one(obs, "loading mode", "module-unset").value
    return "observed", f"with CUDA_MODULE_LOADING unset, cuModuleGetLoadingMode reports {v}"


def judge_per_context(obs):
    v = one(obs, "two contexts", "two-contexts").value
    return documented(v["modules_differ"] and v["globals_differ"] and v["values_kept_apart"],
                      f"the same cubin loaded in the primary and a created context: two modules, two functions, "
                      f"globals at {v['global_primary']:#x} and {v['global_created']:#x}; writes stayed apart "
                      f"({v['read_primary']} / {v['read_created']})",
                      f"module state shared between contexts: {v}")


def judge_library(obs):
    v = one(obs, "library in two contexts", "library-LAZY").value
    return documented(v["functions_differ"] and v["globals_differ"] and v["values_kept_apart"],
                      f"cuLibraryLoadData once, one CUkernel; cuKernelGetFunction and cuLibraryGetGlobal gave a "
                      f"function and a global per context (globals {v['global_a']:#x}, {v['global_b']:#x}), values "
                      f"kept apart",
                      f"library state shared between contexts: {v}")


def judge_nvcc(obs):
    unless_skipped(obs, "nvcc")
    stub = one(obs, "stub", "nvcc").value
    loaded = one(obs, "after dlopen", "nvcc").value
    ok = stub["static_constructor"] and not stub["creates_context"] and not loaded["primary_active"]
    return documented(ok, f"the stub registers {', '.join(stub['registration_calls'])} from a static constructor; "
                          f"loading the library ran it and left the primary context inactive with no context "
                          f"current", f"registration or loading made a context: stub {stub}, after load {loaded}")


def judge_nvcc_runtime(obs):
    unless_skipped(obs, "nvcc")
    v = one(obs, "library runtime vs CuPy", "nvcc").value
    return "observed", (f"the library's own runtime ({v['library_runtime']}) launched its kernel (result "
                        f"{v['result']}) on device {v.get('device', 0)} in context {v['library_context']:#x}; CuPy's "
                        f"runtime ({v['cupy_runtime']}) on that device uses {v['cupy_context']:#x}: "
                        f"{'the same primary context' if v['shared'] else 'different contexts'}")


def judge_cupy_cache(obs):
    v = one(obs, "cupy cached kernel in other context", "cupy-cache").value
    return "observed", (f"a CuPy kernel compiled and loaded under the primary context, launched with a cuCtxCreate "
                        f"context current: {v['outcome']}")


CLAIMS = (
    Claim("modules.module-load-is-immediate",
          "cuModuleLoadData loads the module and allocates its globals at once, lazy loading or not "
          "(only kernels wait for cuModuleGetFunction).", MODULE_LOAD + "; " + LAZY, judge_module_load),
    Claim("modules.library-lazy-at-first-use",
          "Under lazy loading a library is loaded into a context at that context's first use of it.", LIBRARY,
          judge_library_lazy),
    Claim("modules.library-eager-everywhere",
          "Under eager loading a library is loaded into the current context at cuLibraryLoadData and into "
          "contexts created later at their creation.", LIBRARY, judge_library_eager),
    Claim("modules.default-loading-mode", "The loading mode when CUDA_MODULE_LOADING is unset.", NO_DOC,
          judge_default_mode),
    Claim("modules.per-context-instances",
          "A module loaded in two contexts gives each its own module, functions and globals.", PER_CONTEXT,
          judge_per_context),
    Claim("modules.library-per-context",
          "A library loaded once gives a function and a global per context that uses it.", LIBRARY, judge_library),
    Claim("modules.nvcc-registration-makes-no-context",
          "nvcc's registration stub runs at load time and creates no context.", NVCC, judge_nvcc),
    Claim("modules.nvcc-library-runtime",
          "Which context the kernel of a separately built library runs in, next to CuPy.", NO_DOC,
          judge_nvcc_runtime),
    Claim("modules.cupy-kernel-cache", "CuPy's per-device kernel cache when another context is current.", NO_DOC,
          judge_cupy_cache),
)


# ---------------------------------------------------------------- scenarios (children)

class Witness:
    """After each step: MODULE_LOADED events since the last step and the growth of device memory in use."""

    def __init__(self, scenario: str):
        from ctxlab.labs.common import cuda_recorder
        from ctxlab.trace import Tracer, TraceUnavailable

        self.rec = cuda_recorder(scenario)
        try:
            self.tracer = self.rec.tracer or Tracer(domains=("resource",)).__enter__()
            self.cupti = True
        except TraceUnavailable as exc:
            self.tracer, self.cupti = None, str(exc)
        self.used = None

    def step(self, name: str, **extra) -> dict:
        from ctxlab.cuda import driver as drv

        events = self.tracer.drain() if self.tracer else []
        loaded = [e for e in events if e.get("name") == "MODULE_LOADED"]
        grew = 0.0
        cur = drv.current()
        if not cur.none:
            free, total = drv.mem_get_info()
            used = total - free
            grew = 0.0 if self.used is None else (used - self.used) / 2**20
            self.used = used
        value = {"step": name, "module_loaded_events": len(loaded), "memory_grew_mib": round(grew, 1),
                 "cupti": self.cupti, **extra}
        self.rec.add(name, "load witness", value, events=[f"[{e['name']}]" for e in events if e.get("name")])
        return value


def _cubin(source: str) -> bytes:
    from ctxlab.cuda.kernels import _arch_of_current_context, compile_cubin

    return compile_cubin(source, "modules_probe.cu", *_arch_of_current_context())


def module_loading(device: int, mode: str | None) -> dict:
    import ctypes

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    driver = init_driver()
    scenario = f"module-{mode or 'unset'}"
    w = Witness(scenario)
    w.rec.add("start", "loading mode", check(driver.cuModuleGetLoadingMode()).name)
    drv.set_current(drv.primary_retain(device))
    cubin = _cubin(BIG_SOURCE)  # NVRTC, no CUDA context work
    w.step("context created")
    module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData")
    w.step("cuModuleLoadData")
    fn = check(driver.cuModuleGetFunction(module, b"touch"), "cuModuleGetFunction")
    w.step("cuModuleGetFunction")
    check(driver.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), ((1,), (ctypes.c_longlong,)), 0),
          "cuLaunchKernel")
    drv.synchronize()
    w.step("first launch")
    return {"observations": w.rec.observations}


def two_contexts(device: int) -> dict:
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.labs.common import cuda_recorder

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
    return {"observations": rec.observations}


def library(device: int, mode: str) -> dict:
    import ctypes
    import struct

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    driver = init_driver()
    w = Witness(f"library-{mode}")
    w.rec.add("start", "loading mode", check(driver.cuModuleGetLoadingMode()).name)
    first = drv.primary_retain(device)
    drv.set_current(first)
    cubin = _cubin(BIG_SOURCE)
    w.step("context created")
    lib = check(driver.cuLibraryLoadData(cubin, [], [], 0, [], [], 0), "cuLibraryLoadData")
    w.step("cuLibraryLoadData")
    kernel = check(driver.cuLibraryGetKernel(lib, b"touch"), "cuLibraryGetKernel")
    w.step("cuLibraryGetKernel")
    fn_a = check(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
    w.step("cuKernelGetFunction")
    check(driver.cuLaunchKernel(fn_a, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), ((5,), (ctypes.c_longlong,)), 0),
          "cuLaunchKernel")
    drv.synchronize()
    w.step("first launch")
    global_a, _ = check(driver.cuLibraryGetGlobal(lib, b"probe_global"), "cuLibraryGetGlobal")
    second = drv.create_context(device)
    w.used = None  # memory is counted per context from here
    w.step("second context created")
    fn_b = check(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
    w.step("cuKernelGetFunction in the second context")
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
    return {"observations": w.rec.observations}


def nvcc(device: int) -> dict:
    import ctypes
    import glob
    import os
    import shutil
    import subprocess
    import tempfile
    from importlib.resources import files

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import cuda_recorder
    from ctxlab.stub import parse_stub

    rec = cuda_recorder("nvcc")
    compiler = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda/bin/nvcc")), None)
    if not compiler:
        rec.add("build", "skipped", "nvcc is not on the PATH (nor in /usr/local/cuda/bin)", context=(None, None))
        return {"observations": rec.observations}
    work = tempfile.mkdtemp(prefix="ctxlab-nvcc-")
    source = os.path.join(work, "nvcc_probe.cu")
    with open(source, "w") as handle:
        handle.write(files("ctxlab.labs").joinpath("nvcc_probe.cu").read_text())
    library_path = os.path.join(work, "libnvcc_probe.so")
    build = subprocess.run([compiler, "--keep", f"--keep-dir={work}", "-shared", "-Xcompiler", "-fPIC",
                            "-o", library_path, source], capture_output=True, text=True, timeout=240)
    if build.returncode != 0:
        rec.add("build", "skipped", f"nvcc failed: {build.stderr.strip()[-400:]}", context=(None, None))
        return {"observations": rec.observations}
    stub_path = next(iter(glob.glob(os.path.join(work, "*.cudafe1.stub.c"))), None)
    stub_text = open(stub_path).read() if stub_path else ""
    rec.add("build", "stub", {**parse_stub(stub_text), "file": os.path.basename(stub_path or ""),
                              "nvcc": build.args[0]}, context=(None, None))
    rec.add("build", "stub text", stub_text, context=(None, None))
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
    return {"observations": rec.observations}


# (name, function, arguments, environment, exclusive: device memory in use is one of its witnesses)
SCENARIOS = (
    ("module-EAGER", "module_loading", ("EAGER",), {"CUDA_MODULE_LOADING": "EAGER"}, True),
    ("module-LAZY", "module_loading", ("LAZY",), {"CUDA_MODULE_LOADING": "LAZY"}, True),
    ("module-unset", "module_loading", (None,), {"CUDA_MODULE_LOADING": None}, True),
    ("two-contexts", "two_contexts", (), {}, False),
    ("library-EAGER", "library", ("EAGER",), {"CUDA_MODULE_LOADING": "EAGER"}, True),
    ("library-LAZY", "library", ("LAZY",), {"CUDA_MODULE_LOADING": "LAZY"}, True),
    ("nvcc", "nvcc", (), {}, False),
)


def run(options: dict, progress=None):
    from ctxlab.labs.common import LabRun, Scenario, capture_environment

    device = options["device"]
    lab = LabRun(NAME, options, progress)
    environment = capture_environment(device)
    scenarios = [Scenario(name, f"ctxlab.labs.modules:{func}", (device, *extra), timeout=300, env=env,
                          exclusive=exclusive) for name, func, extra, env, exclusive in SCENARIOS]
    scenarios.append(Scenario("cupy-cache", "ctxlab.labs.migrate:cupy_kernel_reverse", (device,),
                              kwargs={"label": "cupy-cache"}))
    lab.run_all(scenarios)
    return lab.finish(environment, CLAIMS)
