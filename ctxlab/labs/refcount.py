"""refcount: what keeps a context alive, and what release and reset destroy.

The old text says a context's lifetime is a usage count moved by
cuCtxAttach/cuCtxDetach and decremented by cudaThreadExit. Today the primary
context has a reference count (cuDevicePrimaryCtxRetain/Release) that each
copy of the runtime in the process also holds. Every scenario runs in a fresh
child process: a reset or an over-release leaves the process unusable.
"""

from __future__ import annotations

from ctxlab.claims import Claim, documented, old_text, one, select

NAME = "refcount"
KNOWN = 1000  # elements of the array whose reduction is checked after each step
# The step table: after every step, the primary context's state, the lab's retains, the thread's context, the pointer.
VIEWS = {"state": ("active", "flags", "lab_retains", "current_id", "pointer_status")}

PRIMARY = ("CUDA Driver API, Primary Context Management: cuDevicePrimaryCtxRetain/Release/GetState/Reset "
           "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)")
RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API': the runtime uses and retains "
                   "the device's primary context (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
OLD_TEXT = ("Old CUDA Runtime API text quoted by the user: 'the context's usage count is incremented by cuCtxAttach, "
            "decremented by cuCtxDetach ... cudaThreadExit'; cuCtxAttach/cuCtxDetach deprecated since CUDA 4.0 "
            "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX__DEPRECATED.html)")
DEVICE_RESET = ("CUDA Runtime API, cudaDeviceReset: 'Explicitly destroys and cleans up all resources associated with "
                "the current device in the current process' (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
THREAD_EXIT = ("CUDA 13.0 release notes: the deprecated cudaThread* functions were removed; cudaThreadExit was "
               "cudaDeviceReset (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/)")
CTX_CREATE = ("CUDA Runtime API, 'Interactions with the CUDA Driver API': a context created with cuCtxCreate "
              "and made current is used by the runtime, which does not retain it; cuCtxDestroy "
              "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
NO_DOC = "no documentation promises this; recorded as observed"


# ---------------------------------------------------------------- claims

def _extra(obs, scenario):
    o = one(obs, "extra releases accepted", scenario)
    return o.value


def judge_runtime_reference(obs):
    v = _extra(obs, "runtime-1")
    return documented(v["extra"] >= 1,
                      f"with CuPy's runtime initialised, the driver accepted {v['extra']} release(s) beyond the lab's "
                      f"{v['lab_retains']} retains before the primary context went inactive: the runtime holds a reference",
                      f"no release beyond the lab's own was accepted: the runtime holds no reference ({v})")


def judge_reference_per_copy(obs):
    copies = one(obs, "runtime copies", "runtime-2").value
    counts = [f"{' + '.join(o.value['calls'])}: {o.value['extra']}" for o in select(obs, "extra releases accepted")]
    return "observed", (f"runtime copies in the process: {', '.join(f'{k} {v}' for k, v in copies['versions'].items())} "
                        f"({copies['note']}); references held beyond the lab's after " + "; ".join(counts))


def judge_primary_count(obs):
    v = _extra(obs, "runtime-1")
    last = v["after_last"]
    return documented(not last["active"],
                      f"the primary context went inactive when the count reached zero; the next release "
                      f"returned {v['refused']}",
                      f"the primary context stayed active after every reference was released: {last}")


def judge_release_destroys(obs):
    o = one(obs, "old data after destruction", "runtime-1")
    return "observed", (f"after the last release the runtime still had handle {o.value['current']:#x} current; "
                        f"reduction over an array made before: {o.value['reduction']}; a new CuPy allocation: "
                        f"{o.value['new_allocation']}")


def judge_release_without_retain(obs):
    o = one(obs, "release without retain", "release-without-retain")
    return "observed", f"cuDevicePrimaryCtxRelease with no retain: {o.value['status']}"


def judge_device_reset(obs):
    o = one(obs, "after cudaDeviceReset", "device-reset")
    v = o.value
    return documented(not v["old_pointer_ok"],
                      f"cudaDeviceReset ({v['runtime']}) destroyed the allocations although the driver API held "
                      f"{v['lab_retains']} retain(s): old pointer {v['old_pointer_status']}; primary active after: "
                      f"{v['active']}; next CuPy reduction over the old array: {v['old_reduction']}; new CuPy "
                      f"allocation and cached kernel: {v['next_cupy']}",
                      f"allocations survived cudaDeviceReset: {v}")


def judge_primary_reset(obs):
    reset = one(obs, "after cuDevicePrimaryCtxReset", "primary-reset").value
    return "observed", (f"cuDevicePrimaryCtxReset with {reset['lab_retains']} lab retain(s) and the runtime's: "
                        f"old pointer {reset['old_pointer_status']}, active after {reset['active']}, "
                        f"context id {reset['id_before']} -> {reset['id_after']}; release only drops the count")


def judge_attach_detach(obs):
    v = one(obs, "cuCtxAttach/cuCtxDetach", "created").value
    works = v["attach"] == "CUDA_SUCCESS" and v["first_detach"] == "CUDA_SUCCESS" and v["alive_after_first_detach"]
    return old_text(works and not v["alive_after_second_detach"],
                    f"deprecated but still exported: attach -> {v['attach']}, detach -> {v['first_detach']} "
                    f"(context alive), second detach -> {v['second_detach']} destroyed it: they still move a usage count",
                    f"attach -> {v['attach']}, detach -> {v['first_detach']}, alive after one detach: "
                    f"{v['alive_after_first_detach']}, after two: {v['alive_after_second_detach']}; the live count is "
                    f"the primary context's retain/release")


def judge_runtime_does_not_retain(obs):
    v = one(obs, "cuCtxDestroy after runtime use", "created").value
    return documented(v["destroy"] == "CUDA_SUCCESS" and not v["alive_after"],
                      f"cuCtxDestroy succeeded after CuPy allocated in the context (allocation there: "
                      f"{v.get('allocation_in_created')}) and the context was gone ({v['id_after']}): the runtime held "
                      f"no reference; next CuPy call: {v['next_cupy']}"
                      + ("" if v.get("cupy_left_created_current", True) else
                         "; CuPy's first kernel had meanwhile made the primary context current on the thread"),
                      f"the runtime kept the context alive: {v}")


def judge_destroy_elsewhere(obs):
    v = one(obs, "destroyed while current elsewhere", "created").value
    return "observed", (f"thread B had the context current while thread A destroyed it: cuCtxGetCurrent on B -> "
                        f"{v['current_after']:#x}, cuCtxSynchronize -> {v['synchronize']}, cuMemAlloc -> {v['alloc']}")


def judge_thread_exit(obs):
    v = one(obs, "cudaThreadExit", "thread-exit").value
    present = v["in_cuda_bindings"] or v["in_header"]
    return old_text(present, f"cudaThreadExit is still there: {v}",
                    f"absent from the runtime we run (cuda.bindings {v['cuda_bindings']}: no cudaThreadExit"
                    f"{'; cuda_runtime_api.h of CUDA ' + v['header_version'] + ' does not declare it' if v['header_version'] else ''}); "
                    f"use cudaDeviceReset")


CLAIMS = (
    Claim("refcount.runtime-holds-reference",
          "The runtime retains the primary context it uses: releasing it from the driver API only after the "
          "runtime's reference is gone makes it inactive.", RUNTIME_INTEROP, judge_runtime_reference),
    Claim("refcount.reference-per-runtime-copy",
          "How many references the primary context holds when several copies of the runtime are initialised.",
          NO_DOC, judge_reference_per_copy),
    Claim("refcount.primary-count",
          "The primary context lives while its retain count is above zero and is destroyed when it reaches zero.",
          PRIMARY, judge_primary_count),
    Claim("refcount.after-last-release",
          "What the runtime and earlier data see after the primary context was released to zero under it.",
          NO_DOC, judge_release_destroys),
    Claim("refcount.release-without-retain",
          "cuDevicePrimaryCtxRelease without a prior retain.", NO_DOC, judge_release_without_retain),
    Claim("refcount.device-reset-destroys",
          "cudaDeviceReset destroys all allocations of the device's primary context at once, whoever else retains it.",
          DEVICE_RESET, judge_device_reset),
    Claim("refcount.primary-reset",
          "cuDevicePrimaryCtxReset compared with cuDevicePrimaryCtxRelease.", PRIMARY, judge_primary_reset),
    Claim("refcount.attach-detach-count",
          "A context's lifetime is a usage count moved by cuCtxAttach and cuCtxDetach.", OLD_TEXT,
          judge_attach_detach),
    Claim("refcount.runtime-does-not-retain-created",
          "The runtime uses a cuCtxCreate context that is current but neither retains nor releases it.",
          CTX_CREATE, judge_runtime_does_not_retain),
    Claim("refcount.destroy-while-current-elsewhere",
          "What a thread gets when the context current on it is destroyed by another thread.", NO_DOC,
          judge_destroy_elsewhere),
    Claim("refcount.thread-exit",
          "cudaThreadExit releases the runtime's context (old text).", THREAD_EXIT, judge_thread_exit),
)


# ---------------------------------------------------------------- helpers run in children

class Tracker:
    """Records the step table: primary state, the lab's retains, current context, pointer validity."""

    def __init__(self, scenario: str, device: int):
        from ctxlab.labs.common import cuda_recorder

        self.rec = cuda_recorder(scenario)
        self.device = device
        self.retains = 0
        self.pointer: int | None = None

    def state(self, step: str) -> dict:
        from ctxlab.cuda import driver as drv
        from ctxlab.labs.common import context_state

        events = self.rec.take_events()  # what the step caused, before our own probing
        # No retain to read the primary handle here: this lab counts retains.
        value = {**context_state(self.device, with_primary=False), "lab_retains": self.retains}
        if self.pointer is not None:
            ptr = drv.outcome(drv.pointer_context, self.pointer)
            value["pointer_valid"] = ptr["ok"]
            value["pointer_status"] = ptr["status"]
        self.rec.add(step, "state", value, context=(value["current"] or None, value["current_id"]), events=events)
        return value

    def retain(self):
        from ctxlab.cuda import driver as drv

        handle = drv.primary_retain(self.device)
        self.retains += 1
        return handle

    def release(self) -> str:
        from ctxlab.cuda import driver as drv

        out = drv.outcome(drv.primary_release, self.device)
        if out["ok"]:
            self.retains -= 1
        return out["status"]


def _cupy_outcome(fn) -> str:
    from ctxlab.cuda.errors import from_exception

    try:
        return f"ok ({fn()})"
    except Exception as exc:
        err = from_exception(exc)
        return err.name if err else f"{type(exc).__name__}: {exc}"


def _known_array():
    import cupy

    a = cupy.arange(KNOWN, dtype=cupy.int64) * 3 + 1
    return a, 3 * KNOWN * (KNOWN - 1) // 2 + KNOWN


def _runtime_call(call: str, device: int, t: "Tracker", held: dict) -> None:
    """One initialising runtime call, through CuPy's runtime copy or cuda.bindings' copy."""
    import cupy
    from cuda.bindings import runtime as bindings_runtime

    if call == "cupy cudaSetDevice":
        cupy.cuda.runtime.setDevice(device)
    elif call == "cupy cudaFree(0)":
        cupy.cuda.runtime.free(0)
    elif call == "cupy array":
        held["a"], held["expected"] = _known_array()
        t.pointer = held["a"].data.ptr
    elif call == "cuda.bindings cudaSetDevice":
        bindings_runtime.cudaSetDevice(device)
    elif call == "cuda.bindings cudaFree(0)":
        bindings_runtime.cudaFree(0)
    else:
        raise ValueError(call)
    t.state(call)


def runtime_reference(device: int, scenario: str, calls: tuple) -> dict:
    """Initialise through the given runtime calls, retain/release from the driver, then release past zero."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver, runtime_versions
    from ctxlab.labs.common import scenario_output

    t = Tracker(scenario, device)
    init_driver()
    t.state("start")
    held: dict = {}
    for call in calls:
        _runtime_call(call, device, t, held)
    a, expected = held.get("a"), held.get("expected")
    maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libcudart" in line})
    initialised = sorted({call.split()[0] for call in calls})
    t.rec.add("copies", "runtime copies", {"initialised": initialised, "versions": runtime_versions(),
                                          "shared_libcudart_mapped": maps,
                                          "note": "no libcudart mapped: each copy is linked into its module"
                                          if not maps else "shared libcudart mapped"})
    t.retain()
    t.retain()
    t.state("lab retained twice")
    t.release()
    t.release()
    t.state("lab released twice")
    if a is not None:
        t.rec.add("check", "reduction", {"sum": int(a.sum()), "expected": expected})
    extra, refused, last = 0, None, None
    for _ in range(8):
        status = t.release()
        last = t.state(f"release beyond the lab's retains (#{extra + 1}): {status}")
        if status != "CUDA_SUCCESS":
            refused = status
            break
        extra += 1
        if last["active"] and a is not None:
            t.rec.add("check", "reduction while still active",
                      {"sum": _cupy_outcome(lambda: int(a.sum())), "expected": expected})
    t.rec.add("summary", "extra releases accepted", {"extra": extra, "lab_retains": 2, "refused": refused,
                                                    "after_last": last, "calls": list(calls)})
    cur = drv.outcome(drv.current)
    old = _cupy_outcome(lambda: int(a.sum()) == expected and f"sum {expected}, correct") if a is not None else None
    new = _cupy_outcome(lambda: int((cupy.arange(10) + 1).sum()))
    t.rec.add("after", "old data after destruction",
              {"current": cur["value"].handle if cur["ok"] else 0, "reduction": old, "new_allocation": new})
    t.state("after the CuPy calls")
    return scenario_output(t.rec)


def release_without_retain(device: int) -> dict:
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.labs.common import scenario_output

    t = Tracker("release-without-retain", device)
    init_driver()
    t.state("start")
    out = drv.outcome(drv.primary_release, device)
    t.rec.add("release", "release without retain", {"status": out["status"]})
    t.state("after release")
    return scenario_output(t.rec)


def device_reset(device: int) -> dict:
    """cudaDeviceReset while the driver API holds a retain and CuPy holds an array and a cached kernel."""
    import cupy
    from cuda.bindings import runtime as bindings_runtime

    from ctxlab.cuda import driver as drv
    from ctxlab.labs.common import scenario_output

    t = Tracker("device-reset", device)
    cupy.cuda.runtime.setDevice(device)
    a, expected = _known_array()
    cached = int((a * 5).sum())  # compiles and loads a kernel CuPy keeps in its per-device cache
    t.pointer = a.data.ptr
    t.retain()
    before = t.state("CuPy array, cached kernel, one driver retain")
    # CuPy does not wrap cudaDeviceReset; cuda.bindings' own runtime copy makes the call.
    bindings_runtime.cudaSetDevice(device)
    status = bindings_runtime.cudaDeviceReset()[0]
    after = t.state(f"cudaDeviceReset (cuda.bindings runtime): {status.name}")
    old = _cupy_outcome(lambda: int(a.sum()) == expected and f"sum {expected}, correct")
    nxt = _cupy_outcome(lambda: int((cupy.arange(KNOWN, dtype=cupy.int64) * 5).sum()) == cached and "correct")
    t.rec.add("after", "after cudaDeviceReset",
              {"runtime": "cuda.bindings", "status": status.name, "lab_retains": t.retains,
               "active": after["active"], "old_pointer_ok": bool(after.get("pointer_valid")),
               "old_pointer_status": after.get("pointer_status"), "old_reduction": old, "next_cupy": nxt,
               "id_before": before["current_id"], "current_after": after["current"]})
    t.state("after the CuPy calls")
    ctx = drv.outcome(drv.primary_retain, device)
    t.rec.add("after", "primary after reset", {"retain": ctx["status"],
                                              "id": drv.outcome(drv.context_id, ctx.get("value", 0)).get("value")})
    return scenario_output(t.rec)


def primary_reset(device: int) -> dict:
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.labs.common import scenario_output

    t = Tracker("primary-reset", device)
    cupy.cuda.runtime.setDevice(device)
    a, expected = _known_array()
    t.pointer = a.data.ptr
    t.retain()
    before = t.state("runtime initialised, one driver retain")
    status = drv.outcome(drv.primary_reset, device)["status"]
    after = t.state(f"cuDevicePrimaryCtxReset: {status}")
    handle = drv.outcome(drv.primary_retain, device)
    if handle["ok"]:
        t.retains += 1
    again = t.state("retained again")
    t.rec.add("after", "after cuDevicePrimaryCtxReset",
              {"status": status, "lab_retains": t.retains, "active": after["active"],
               "old_pointer_status": after.get("pointer_status"), "id_before": before["current_id"],
               "id_after": drv.outcome(drv.context_id, handle.get("value", 0)).get("value"),
               "active_after_retain": again["active"],
               "old_reduction": _cupy_outcome(lambda: int(a.sum()) == expected and "correct")})
    t.state("after the CuPy call")
    return scenario_output(t.rec)


def created(device: int) -> dict:
    """cuCtxAttach/cuCtxDetach, runtime use then cuCtxDestroy, and destroy while current on another thread."""
    import cupy

    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import scenario_output

    driver = init_driver()
    t = Tracker("created", device)

    def alive(ctx) -> bool:
        return drv.outcome(drv.context_id, ctx)["ok"]

    # 1. cuCtxAttach / cuCtxDetach on a created context.
    ctx = drv.create_context(device)
    t.state("cuCtxCreate")
    attach = driver.cuCtxAttach(0)
    attach_status = drv.raw_status(attach, "cuCtxAttach")
    t.state(f"cuCtxAttach: {attach_status}")
    first = drv.raw_status(driver.cuCtxDetach(drv.as_context(ctx)), "cuCtxDetach")
    alive1 = alive(ctx)
    t.state(f"cuCtxDetach: {first}")
    second = drv.raw_status(driver.cuCtxDetach(drv.as_context(ctx)), "cuCtxDetach")
    alive2 = alive(ctx)
    t.state(f"cuCtxDetach again: {second}")
    t.rec.add("attach", "cuCtxAttach/cuCtxDetach",
              {"attach": attach_status, "attached_handle": int(attach[1]) if len(attach) > 1 else None,
               "first_detach": first, "alive_after_first_detach": alive1, "second_detach": second,
               "alive_after_second_detach": alive2})
    if alive2:
        drv.destroy_context(ctx)
    if drv.current().handle:
        drv.set_current(0)

    # 2. The runtime inside a created context, then cuCtxDestroy.
    ctx2 = drv.create_context(device)
    x = cupy.arange(KNOWN, dtype=cupy.int64)
    total = int((x * 2).sum())
    t.pointer = x.data.ptr
    in_created = drv.pointer_context(x.data.ptr) == ctx2
    used = t.state(f"CuPy allocated and ran kernels in the created context (sum {total})")
    if used["current"] != ctx2:
        drv.set_current(ctx2)  # CuPy's first kernel bound the primary context (see migrate): put ctx2 back
    destroy = drv.outcome(drv.destroy_context, ctx2)["status"]
    after = t.state(f"cuCtxDestroy: {destroy}")
    t.rec.add("destroy", "cuCtxDestroy after runtime use",
              {"destroy": destroy, "alive_after": alive(ctx2), "allocation_in_created": in_created,
               "cupy_left_created_current": used["current"] == ctx2,
               "id_after": drv.outcome(drv.context_id, ctx2)["status"], "pointer_after": after.get("pointer_status"),
               "next_cupy": _cupy_outcome(lambda: int((cupy.arange(10) + 1).sum()))})
    t.pointer = None
    t.state("after the next CuPy call")

    # 3. Destroyed by thread A while current on thread B.
    s: dict = {}

    def a_make(_):
        if drv.current().handle:
            drv.set_current(0)
        s["ctx"] = drv.create_context(device)
        drv.pop()
        return s["ctx"]

    def b_push(c):
        drv.push(c)
        t.state("B: pushed")
        return c

    def a_destroy(c):
        s["destroy"] = drv.outcome(drv.destroy_context, c)["status"]
        t.state(f"A: cuCtxDestroy: {s['destroy']}")
        return c

    def b_next(c):
        cur = drv.outcome(drv.current)
        sync = drv.raw_status(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        alloc = drv.outcome(drv.mem_alloc, 64)["status"]
        t.rec.add("B next", "destroyed while current elsewhere",
                  {"destroy": s["destroy"], "current_after": cur["value"].handle if cur["ok"] else 0,
                   "synchronize": sync, "alloc": alloc})
        return c

    Choreography(["A", "B"], timeout=60).run([Step("A", "make", a_make), Step("B", "push", b_push),
                                              Step("A", "destroy", a_destroy), Step("B", "next", b_next)])
    return scenario_output(t.rec)


def thread_exit(device: int) -> dict:
    import glob
    import re

    from cuda.bindings import runtime as bindings_runtime

    from ctxlab.cuda.environment import package_version
    from ctxlab.labs.common import cuda_recorder, scenario_output

    rec = cuda_recorder("thread-exit")
    headers = sorted(glob.glob("/usr/local/cuda*/include/cuda_runtime_api.h")) + \
        sorted(glob.glob("/usr/local/cuda*/targets/*/include/cuda_runtime_api.h"))
    header, in_header, header_version = None, False, None
    if headers:
        header = headers[0]
        text = open(header).read()
        in_header = re.search(r"\bcudaThreadExit\s*\(", text) is not None
        cuda_h = header.replace("cuda_runtime_api.h", "cuda.h")
        try:
            version = int(re.search(r"#define CUDA_VERSION (\d+)", open(cuda_h).read()).group(1))
            header_version = f"{version // 1000}.{version % 1000 // 10}"
        except (OSError, AttributeError):
            header_version = None
    rec.add("look", "cudaThreadExit",
            {"in_cuda_bindings": hasattr(bindings_runtime, "cudaThreadExit"),
             "cuda_bindings": package_version("cuda-bindings"), "header": header, "in_header": in_header,
             "header_version": header_version,
             "cudaDeviceReset_in_cuda_bindings": hasattr(bindings_runtime, "cudaDeviceReset")},
            context=(None, None))
    return scenario_output(rec)


# ---------------------------------------------------------------- the lab

RUNTIME_VARIANTS = (
    ("runtime-1", ("cupy cudaSetDevice", "cupy array")),
    ("runtime-2", ("cupy cudaSetDevice", "cupy array", "cuda.bindings cudaSetDevice", "cuda.bindings cudaFree(0)")),
    ("runtime-array-only", ("cupy array",)),
    ("runtime-setdevice-only", ("cupy cudaSetDevice",)),
    ("runtime-free0-only", ("cupy cudaFree(0)",)),
    ("runtime-bindings-only", ("cuda.bindings cudaSetDevice",)),
)

SCENARIOS = tuple((name, "runtime_reference", (name, calls)) for name, calls in RUNTIME_VARIANTS) + (
    ("release-without-retain", "release_without_retain", ()),
    ("device-reset", "device_reset", ()),
    ("primary-reset", "primary_reset", ()),
    ("created", "created", ()),
    ("thread-exit", "thread_exit", ()),
)


def run(options: dict, progress=None):
    from ctxlab.labs.common import LabRun, Scenario, capture_environment

    device = options["device"]
    lab = LabRun(NAME, options, progress)
    environment = capture_environment(device)
    lab.run_all([Scenario(name, f"ctxlab.labs.refcount:{func}", (device, *extra)) for name, func, extra in SCENARIOS])
    return lab.finish(environment, CLAIMS)
