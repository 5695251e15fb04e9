"""refcount's scenarios, each run in a child process, and the lab's list of them for given options."""

from __future__ import annotations

import glob
import os
import re
import site
import sys

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver, package_version, runtime_versions
from ctxlab.cuda.outcome import checked
from ctxlab.lab import LabOptions, Scenario
from ctxlab.labs.common import cuda_recorder, scenario_output
from ctxlab.labs.refcount.claims import GREEN_SCENARIOS, KNOWN, PAST_ZERO, RUNTIME_VARIANTS, SMALL_SUM, version_text
from ctxlab.labs.refcount.green import green_destroy_elsewhere, green_primary_reset, green_reference
from ctxlab.labs.refcount.held import (
    Held,
    destroyed_while_current_elsewhere,
    known_array,
    release_past_zero,
    small_sum,
    steps_of,
)


def _runtime_call(call: str, device: int, held: Held, steps, arrays: dict) -> None:
    """One initialising runtime call, through CuPy's runtime copy or cuda.bindings' copy."""
    import cupy
    from cuda.bindings import runtime as bindings_runtime

    if call == "cupy cudaSetDevice":
        cupy.cuda.runtime.setDevice(device)
    elif call == "cupy cudaFree(0)":
        cupy.cuda.runtime.free(0)
    elif call == "cupy array":
        arrays["a"], arrays["expected"] = known_array()
        held.pointer = arrays["a"].data.ptr
    elif call == "cuda.bindings cudaSetDevice":
        bindings_runtime.cudaSetDevice(device)
    elif call == "cuda.bindings cudaFree(0)":
        bindings_runtime.cudaFree(0)
    else:
        raise ValueError(call)
    steps.after(call)


def runtime_reference(device: int, scenario: str, calls: tuple) -> dict:
    """Initialise through the given runtime calls, retain/release from the driver, then release past zero."""
    held = Held(device)
    steps = steps_of(scenario, held)
    init_driver()
    steps.after("start")
    arrays: dict = {}
    for call in calls:
        _runtime_call(call, device, held, steps, arrays)
    a, expected = arrays.get("a"), arrays.get("expected")
    with open("/proc/self/maps") as f:
        maps = sorted({line.split()[-1] for line in f if "libcudart" in line})
    initialised = sorted({call.split()[0] for call in calls})
    steps.rec.add("copies", "runtime copies", {"initialised": initialised, "versions": runtime_versions(),
                                               "shared_libcudart_mapped": maps,
                                               "note": "no libcudart mapped: each copy is linked into its module"
                                               if not maps else "shared libcudart mapped"})
    held.retain()
    held.retain()
    steps.after("lab retained twice")
    held.release()
    held.release()
    steps.after("lab released twice")
    if a is not None:
        steps.rec.add("check", "reduction", {"sum": int(a.sum()), "expected": expected})
    extra, refused, last = release_past_zero(held, steps, a, expected)
    steps.rec.add("summary", "extra releases accepted", {"extra": extra, "lab_retains": 2, "refused": refused,
                                                        "after_last": last, "calls": list(calls)})
    cur = drv.outcome(drv.current)
    # Undefined from here on: the array's context was released to zero under it.
    old = checked(lambda: int(a.sum()), expected) if a is not None else None
    steps.rec.add("after", "old data after destruction",
                  {"current": cur["value"].handle if cur["ok"] else 0, "reduction": old,
                   "new_allocation": checked(small_sum, SMALL_SUM)})
    steps.after("after the CuPy calls")
    return steps.output()


def release_without_retain(device: int) -> dict:
    """cuDevicePrimaryCtxRelease in a process that never retained the primary context."""
    steps = steps_of("release-without-retain", Held(device))
    init_driver()
    steps.after("start")
    out = drv.outcome(drv.primary_release, device)
    steps.rec.add("release", "release without retain", {"status": out["status"]})
    steps.after("after release")
    return steps.output()


def device_reset(device: int) -> dict:
    """cudaDeviceReset while the driver API holds a retain and CuPy holds an array and a cached kernel."""
    import cupy
    from cuda.bindings import runtime as bindings_runtime

    held = Held(device)
    steps = steps_of("device-reset", held)
    cupy.cuda.runtime.setDevice(device)
    a, expected = known_array()
    cached = int((a * 5).sum())  # compiles and loads a kernel CuPy keeps in its per-device cache
    held.pointer = a.data.ptr
    held.retain()
    before = steps.after("CuPy array, cached kernel, one driver retain")
    # CuPy does not wrap cudaDeviceReset; cuda.bindings' own runtime copy makes the call.
    bindings_runtime.cudaSetDevice(device)
    status = bindings_runtime.cudaDeviceReset()[0]
    after = steps.after(f"cudaDeviceReset (cuda.bindings runtime): {status.name}")
    old = checked(lambda: int(a.sum()), expected)
    nxt = checked(lambda: int((cupy.arange(KNOWN, dtype=cupy.int64) * 5).sum()), cached)
    steps.rec.add("after", "after cudaDeviceReset",
                  {"runtime": "cuda.bindings", "status": status.name, "lab_retains": held.retains,
                   "active": after["active"], "old_pointer_ok": bool(after.get("pointer_valid")),
                   "old_pointer_status": after.get("pointer_status"), "old_reduction": old, "next_cupy": nxt,
                   "id_before": before["current_id"], "current_after": after["current"]})
    steps.after("after the CuPy calls")
    ctx = drv.outcome(drv.primary_retain, device)
    steps.rec.add("after", "primary after reset",
                  {"retain": ctx["status"], "id": drv.outcome(drv.context_id, ctx.get("value", 0)).get("value")})
    return steps.output()


def primary_reset(device: int) -> dict:
    """cuDevicePrimaryCtxReset under the runtime's reference and a lab retain, then a new retain."""
    import cupy

    held = Held(device)
    steps = steps_of("primary-reset", held)
    cupy.cuda.runtime.setDevice(device)
    a, expected = known_array()
    held.pointer = a.data.ptr
    held.retain()
    before = steps.after("runtime initialised, one driver retain")
    status = drv.outcome(drv.primary_reset, device)["status"]
    after = steps.after(f"cuDevicePrimaryCtxReset: {status}")
    handle = drv.outcome(drv.primary_retain, device)
    if handle["ok"]:
        held.retains += 1
    again = steps.after("retained again")
    steps.rec.add("after", "after cuDevicePrimaryCtxReset",
                  {"status": status, "lab_retains": held.retains, "active": after["active"],
                   "old_pointer_status": after.get("pointer_status"), "id_before": before["current_id"],
                   "retain_after": handle["status"],
                   "id_after": drv.outcome(drv.context_id, handle.get("value", 0)).get("value"),
                   "active_after_retain": again["active"],
                   "old_reduction": checked(lambda: int(a.sum()), expected)})
    steps.after("after the CuPy call")
    return steps.output()


def _alive(ctx) -> bool:
    return drv.outcome(drv.context_id, ctx)["ok"]


def _attach_detach(driver, device: int, steps) -> None:
    """cuCtxAttach / cuCtxDetach on a created context: does a second detach destroy it?"""
    ctx = drv.create_context(device)
    steps.after("cuCtxCreate")
    attach = driver.cuCtxAttach(0)
    attach_status = drv.raw_status(attach, "cuCtxAttach")
    steps.after(f"cuCtxAttach: {attach_status}")
    first = drv.raw_status(driver.cuCtxDetach(drv.as_context(ctx)), "cuCtxDetach")
    alive1 = _alive(ctx)
    steps.after(f"cuCtxDetach: {first}")
    second = drv.raw_status(driver.cuCtxDetach(drv.as_context(ctx)), "cuCtxDetach")
    alive2 = _alive(ctx)
    steps.after(f"cuCtxDetach again: {second}")
    steps.rec.add("attach", "cuCtxAttach/cuCtxDetach",
                  {"attach": attach_status, "attached_handle": int(attach[1]) if len(attach) > 1 else None,
                   "first_detach": first, "alive_after_first_detach": alive1, "second_detach": second,
                   "alive_after_second_detach": alive2})
    if alive2:
        drv.destroy_context(ctx)
    if drv.current().handle:
        drv.set_current(0)


def _runtime_then_destroy(device: int, held: Held, steps) -> None:
    """CuPy allocates and runs kernels in a created context, then cuCtxDestroy: did the runtime retain it?"""
    import cupy

    ctx = drv.create_context(device)
    x = cupy.arange(KNOWN, dtype=cupy.int64)
    total = int((x * 2).sum())
    held.pointer = x.data.ptr
    owner = drv.pointer_context(x.data.ptr)
    used = steps.after(f"CuPy allocated and ran kernels in the created context (sum {total})")
    if used["current"] != ctx:
        drv.set_current(ctx)  # CuPy's first kernel bound the primary context (see migrate): put ctx back
    destroy = drv.outcome(drv.destroy_context, ctx)["status"]
    after = steps.after(f"cuCtxDestroy: {destroy}")
    steps.rec.add("destroy", "cuCtxDestroy after runtime use",
                  {"destroy": destroy, "alive_after": _alive(ctx), "allocation_context": owner, "created": ctx,
                   "cupy_left_created_current": used["current"] == ctx,
                   "id_after": drv.outcome(drv.context_id, ctx)["status"], "pointer_after": after.get("pointer_status"),
                   "next_cupy": checked(small_sum, SMALL_SUM)})
    held.pointer = None
    steps.after("after the next CuPy call")


def _destroy_elsewhere(device: int, steps) -> None:
    """Thread A makes a context and destroys it while it is current on thread B; B then calls into it."""

    def make() -> int:
        if drv.current().handle:
            drv.set_current(0)
        ctx = drv.create_context(device)
        drv.pop()
        return ctx

    destroyed_while_current_elsewhere(steps, "destroyed while current elsewhere", drv.destroy_context,
                                      "cuCtxDestroy", "B: pushed", make=make)


def created(device: int) -> dict:
    """cuCtxAttach/cuCtxDetach, runtime use then cuCtxDestroy, and destroy while current on another thread."""
    driver = init_driver()
    held = Held(device)
    steps = steps_of("created", held)
    _attach_detach(driver, device, steps)
    _runtime_then_destroy(device, held, steps)
    _destroy_elsewhere(device, steps)
    return steps.output()


def _cudart_version(text: str) -> int | None:
    found = re.search(r"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _header_candidates() -> list[str]:
    """Every cuda_runtime_api.h this process could be built against: CUDA_HOME/CUDA_PATH, /usr/local/cuda*, wheels."""
    roots = [os.environ[k] for k in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(k)]
    roots += sorted(glob.glob("/usr/local/cuda*"))
    dirs = [d for root in roots for d in [os.path.join(root, "include"),
                                          *sorted(glob.glob(os.path.join(root, "targets", "*", "include")))]]
    try:
        from cuda import pathfinder

        find = getattr(pathfinder, "find_nvidia_header_directory", None)
        found = find("cudart") if find else None
        if found:
            dirs.append(str(found))
    except (ImportError, RuntimeError, OSError, ValueError):
        pass  # no pathfinder, or one that does not know "cudart": the other places still count
    packages = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for base in packages:
        dirs += sorted(glob.glob(os.path.join(base, "nvidia", "*", "include")))
    paths, real = [], set()
    for d in dirs:
        path = os.path.join(d, "cuda_runtime_api.h")
        if os.path.isfile(path) and os.path.realpath(path) not in real:
            real.add(os.path.realpath(path))
            paths.append(path)
    return paths


def runtime_headers() -> list[dict]:
    """Each cuda_runtime_api.h found, with the CUDART_VERSION it defines and whether it declares cudaThreadExit."""
    out = []
    for path in _header_candidates():
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        out.append({"path": path, "cudart_version": _cudart_version(text),
                    "declares_cudaThreadExit": re.search(r"\bcudaThreadExit\s*\(", text) is not None})
    return out


def thread_exit(device: int) -> dict:
    """Does the runtime that runs still export cudaThreadExit (or declare it in the header of its exact version)?"""
    from cuda.bindings import runtime as bindings_runtime

    rec = cuda_recorder("thread-exit")
    # cuda.bindings is generated from its runtime version's headers: its API is what that runtime exports.
    versions = runtime_versions()
    headers = runtime_headers()
    ran = {v for v in versions.values() if v is not None}
    matched = next((h for h in headers if h["cudart_version"] in ran), None)
    rec.add("look", "cudaThreadExit",
            {"in_cuda_bindings": hasattr(bindings_runtime, "cudaThreadExit"),
             "cuda_bindings": package_version("cuda-bindings"), "runtime_versions": versions,
             "headers_seen": headers, "header": matched["path"] if matched else None,
             "in_header": bool(matched and matched["declares_cudaThreadExit"]),
             "header_version": version_text(matched["cudart_version"]).removeprefix("CUDA ") if matched else None,
             "cudaDeviceReset_in_cuda_bindings": hasattr(bindings_runtime, "cudaDeviceReset")},
            context=(None, None))
    return scenario_output(rec)


def scenarios(options: LabOptions) -> list[Scenario]:
    """Each way of initialising the runtime, then the release, reset and destroy experiments."""
    device = options.device
    out = [Scenario(name, runtime_reference, (device, name, calls), undefined=name in PAST_ZERO)
           for name, calls in RUNTIME_VARIANTS]
    green = {"green-reference": green_reference, "green-primary-reset": green_primary_reset,
             "green-destroy-elsewhere": green_destroy_elsewhere}
    return out + [
        Scenario("release-without-retain", release_without_retain, (device,)),
        Scenario("device-reset", device_reset, (device,), undefined=True),
        Scenario("primary-reset", primary_reset, (device,), undefined=True),
        Scenario("created", created, (device,), undefined=True),
        Scenario("thread-exit", thread_exit, (device,)),
        # Green contexts: each releases, resets or destroys under a green context, so each is repeated.
        *(Scenario(name, green[name], (device,), undefined=True) for name in GREEN_SCENARIOS),
    ]
