"""modules' claims: what the documentation says about loading modules and libraries into contexts, the facts
read from the scenarios' observations, and the predicates and evidence built from them. Pure: no CUDA."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlab.claim import (
    Claim,
    Facts,
    Inapplicable,
    Observations,
    decided,
    one,
    repeats,
    select,
    silent_wrong,
    some,
    spread,
)

NAME = "modules"
# When the module showed up: after each step, MODULE_LOADED events and device memory in use.
VIEWS = {"load witness": ("module_loaded_events", "memory_grew_mib")}
BIG_MIB = 256  # the probe module's __device__ array, in MiB (the scenarios record it with every witness)
SEEN_SHARE = 0.9  # growth of memory in use, as a share of that array, that counts as the module's global arriving
# What two-contexts writes into each context's global, and library-*'s kernel adds to the first context's and a
# copy writes into the second's. The scenarios record these; the values here are read only from recordings made
# before they did (labs/results/modules.json): those scenarios wrote exactly these.
WRITTEN = {"wrote_primary": 111, "wrote_created": 222}
LIBRARY_WRITTEN = {"added_a": 5, "wrote_b": 77}

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

STEPS_LIBRARY = ("context created", "cuLibraryLoadData", "cuLibraryGetKernel", "cuKernelGetFunction",
                 "first launch", "second context created", "cuKernelGetFunction in the second context")
SECOND_USE = "cuKernelGetFunction in the second context"
# Under LAZY the first context needs a function at cuKernelGetFunction, or at the launch at the latest.
LAZY_LOADS = (["cuKernelGetFunction", SECOND_USE], ["first launch", SECOND_USE])
FATBIN_REGISTRATION = ("__cudaRegisterBinary", "__cudaRegisterFatBinary", "__cudaRegisterLinkedBinary")


def _hex(handle: Any) -> str:
    return f"{handle:#x}" if handle else "none"


def _steps(steps: list[str]) -> str:
    return ", then ".join(steps) or "no step"


def _witnessed(obs: Observations, scenario: str) -> dict:
    """Where each witness saw the module (or library) arrive in a context: the steps, in order."""
    steps = [o.value for o in some(obs, "load witness", scenario)]
    cupti = steps[0]["cupti"]
    if cupti is not True:  # one of the two witnesses missing: not a verdict on the driver, a missing instrument
        raise Inapplicable(f"{scenario}: CUPTI was not there to witness MODULE_LOADED ({cupti}); device memory "
                           "alone does not show every context a module or library is loaded into")
    # The array's size as the scenario recorded it; recordings made before it did lack it (their array: BIG_MIB).
    seen_mib = steps[0].get("global_mib", BIG_MIB) * SEEN_SHARE
    return {"event": [v["step"] for v in steps if v["module_loaded_events"]],
            "memory": [v["step"] for v in steps if v["memory_grew_mib"] >= seen_mib], "seen_mib": seen_mib,
            "cupti": "CUPTI events" if cupti is True else f"no CUPTI events ({cupti})"}


def _where(w: dict) -> str:
    return (f"MODULE_LOADED at {_steps(w['event'])}; device memory in use grew by {w['seen_mib']:.0f} MiB or more "
            f"at {_steps(w['memory'])}")


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
    # Every witness that saw the module saw it at cuModuleLoadData, in both modes, and at least one saw it (an
    # empty set is not {"cuModuleLoadData"}).
    return all(set(seen) == {"cuModuleLoadData"} for seen in f["seen"].values())


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
    v = {**WRITTEN, **one(obs, "two contexts", "two-contexts").value}  # WRITTEN: see there
    # decided: recordings made before the scenario recorded both functions carry its own functions_differ
    differ = decided(v, "functions_differ", lambda primary, created: primary != created, "function_primary",
                     "function_created")
    return {"wrote_primary": v["wrote_primary"], "wrote_created": v["wrote_created"],
            "module_primary": _hex(v["module_primary"]), "module_created": _hex(v["module_created"]),
            "global_primary": _hex(v["global_primary"]), "global_created": _hex(v["global_created"]),
            "functions": "differ" if differ else "are the same",
            "read_primary": v["read_primary"], "read_created": v["read_created"],
            "apart": (v["module_primary"] != v["module_created"] and differ
                      and v["global_primary"] != v["global_created"]
                      and (v["read_primary"], v["read_created"]) == (v["wrote_primary"], v["wrote_created"]))}


def _facts_library_per_context(obs: Observations) -> dict:
    runs = some(obs, "library in two contexts")
    parts, apart, added, wrote = [], [], set(), set()
    for o in runs:
        v = {**LIBRARY_WRITTEN, **o.value}  # LIBRARY_WRITTEN: see there
        added.add(v["added_a"])
        wrote.add(v["wrote_b"])
        parts.append(f"{o.scenario}: functions {_hex(v['function_a'])} / {_hex(v['function_b'])}, globals "
                     f"{_hex(v['global_a'])} / {_hex(v['global_b'])}, read back {v['read_a']} / {v['read_b']}")
        apart.append(v["function_a"] != v["function_b"] and v["global_a"] != v["global_b"]
                     and (v["read_a"], v["read_b"]) == (v["added_a"], v["wrote_b"]))
    return {"per_run": "; ".join(parts), "runs": len(runs), "apart": apart,
            "added": " or ".join(map(str, sorted(added))) or "-", "wrote": " or ".join(map(str, sorted(wrote))) or "-"}


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
          "{module_created}, functions {functions}, globals at {global_primary} and {global_created}; wrote "
          "{wrote_primary} and {wrote_created}, read back {read_primary} and {read_created}",
          lambda f: f["apart"]),
    Claim("modules.library-per-context",
          "A library loaded once gives a function and a global per context that uses it.", LIBRARY_PER_CONTEXT,
          "promise", ("library-LAZY", "library-EAGER"), _facts_library_per_context,
          "cuLibraryLoadData once, one CUkernel used in two contexts, in {runs} run(s) (the first context's global "
          "should read {added} after the kernel added {added}, the second's {wrote} after a write): {per_run}",
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
