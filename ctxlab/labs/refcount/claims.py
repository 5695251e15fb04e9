"""refcount's claims: the sources, the facts read from the scenarios' observations, the predicates and the evidence
templates. Pure: no CUDA."""

from __future__ import annotations

from typing import Any

from ctxlab.claim import (
    Claim,
    MissingObservation,
    Observations,
    decided,
    one,
    repeats,
    select,
    silent_wrong,
    some,
    spread,
)
from ctxlab.cuda.green import SOURCE_AS_PRIMARY, SOURCE_RETAINS
from ctxlab.records.model import Observation

NAME = "refcount"
KNOWN = 1000  # elements of the array whose reduction is checked after each step
SMALL_SUM = 55  # sum(arange(10) + 1): a new CuPy allocation's right answer
DESTROYED = "CUDA_ERROR_CONTEXT_IS_DESTROYED"
# The step table: after every step, the primary context's state, the lab's retains, the thread's context, the pointer.
VIEWS = {"state": ("active", "flags", "lab_retains", "current_id", "pointer_status")}

PRIMARY = ("CUDA Driver API, Primary Context Management: cuDevicePrimaryCtxRetain/Release/GetState/Reset "
           "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)")
PRIMARY_RESET = ("CUDA Driver API, cuDevicePrimaryCtxReset: 'Destroy all allocations and reset all state on the "
                 "primary context ... Explicitly destroys and cleans up all resources associated with the current "
                 "device in the current process ... Resetting the primary context does not release it' "
                 "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html)")
RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API': the runtime uses and retains "
                   "the device's primary context "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
OLD_TEXT = ("Old CUDA Runtime API text quoted by the user: 'the context's usage count is incremented by cuCtxAttach, "
            "decremented by cuCtxDetach ... cudaThreadExit'; cuCtxAttach/cuCtxDetach deprecated since CUDA 4.0 "
            "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX__DEPRECATED.html)")
DEVICE_RESET = ("CUDA Runtime API, cudaDeviceReset: 'Explicitly destroys and cleans up all resources associated with "
                "the current device in the current process' "
                "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
THREAD_EXIT = ("CUDA 13.0 release notes: the deprecated cudaThread* functions were removed; cudaThreadExit was "
               "cudaDeviceReset (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/)")
CTX_CREATE = ("CUDA Runtime API, 'Interactions with the CUDA Driver API': a context created with cuCtxCreate "
              "and made current is used by the runtime, which does not retain it; cuCtxDestroy "
              "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
CTX_DESTROY = ("CUDA Driver API, cuCtxDestroy: 'If ctx is current to other threads, then ctx will remain current to "
               "those threads, and attempting to access ctx from those threads will result in the error "
               "CUDA_ERROR_CONTEXT_IS_DESTROYED' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
NO_DOC = "no documentation promises this; recorded as observed"


RUNTIME_VARIANTS = (
    ("runtime-1", ("cupy cudaSetDevice", "cupy array")),
    ("runtime-2", ("cupy cudaSetDevice", "cupy array", "cuda.bindings cudaSetDevice", "cuda.bindings cudaFree(0)")),
    ("runtime-array-only", ("cupy array",)),
    ("runtime-setdevice-only", ("cupy cudaSetDevice",)),
    ("runtime-free0-only", ("cupy cudaFree(0)",)),
    ("runtime-bindings-only", ("cuda.bindings cudaSetDevice",)),
)
RUNTIME_SCENARIOS = tuple(name for name, _ in RUNTIME_VARIANTS)
# They hold an array, then release past zero and use it: undefined behaviour, repeated.
PAST_ZERO = ("runtime-1", "runtime-2", "runtime-array-only")


def version_text(version: Any) -> str:
    """A CUDART_VERSION-style number as ``CUDA 13.2``; ``not recorded`` when absent."""
    if not isinstance(version, int) or isinstance(version, bool):
        return "not recorded"
    return f"CUDA {version // 1000}.{version % 1000 // 10}"


def _by_repeat(observations: list) -> dict[Any, list]:
    """Observations grouped by the repeat that made them (None: a scenario run once)."""
    out: dict[Any, list] = {}
    for o in observations:
        out.setdefault(o.repeat, []).append(o)
    return out


def _runs(obs: Observations, scenario: str, answered: int) -> str:
    """How many runs the distribution holds, and how many broke before recording (the runner's "repeat broke")."""
    broke = len(select(obs, "repeat broke", scenario))
    return f"{answered} run(s)" + (f" (and {broke} that broke before recording)" if broke else "")


def _pointer_valid(value: dict) -> bool:
    """Whether cuPointerGetAttribute still found the old pointer after the reset."""
    return value.get("old_pointer_status") == "CUDA_SUCCESS" or bool(value.get("old_pointer_ok"))


def facts_runtime_reference(obs: Observations) -> dict:
    """Releases the driver accepted beyond the lab's retains, in every run of runtime-1."""
    found = [o.value for o in some(obs, "extra releases accepted", "runtime-1")]
    return {"repeats": len(found), "runs": _runs(obs, "runtime-1", len(found)),
            "extra": spread(v["extra"] for v in found),
            "lab_retains": spread(v["lab_retains"] for v in found), "refused": spread(v["refused"] for v in found),
            "without": sum(1 for v in found if v["extra"] < 1)}


def facts_reference_per_copy(obs: Observations) -> dict:
    """The runtime copies in the process and the references held after each way of initialising."""
    copies = one(obs, "runtime copies", "runtime-2").value
    counts: dict[str, list] = {}
    for o in some(obs, "extra releases accepted"):
        counts.setdefault(" + ".join(o.value["calls"]), []).append(o.value["extra"])
    return {"versions": ", ".join(f"{name}: {version_text(v)}" for name, v in copies["versions"].items()),
            "note": copies["note"], "counts": "; ".join(f"{calls}: {spread(n)}" for calls, n in counts.items())}


def _count_trail(summary: dict, states: list) -> tuple[bool, bool]:
    """(alive while references were left, inactive once the last accepted release took the count to zero)."""
    trail = [o.value["active"] for o in states if o.step.startswith("release beyond")]
    extra = summary["extra"]
    if extra < 1 or len(trail) < extra:
        return all(trail), False
    return all(trail[:extra - 1]), not trail[extra - 1] and not summary["after_last"]["active"]


def facts_primary_count(obs: Observations) -> dict:
    """Per run: active while releases left references, inactive once the count reached zero."""
    summaries = _by_repeat(some(obs, "extra releases accepted", "runtime-1"))
    states = _by_repeat(some(obs, "state", "runtime-1"))
    alive = inactive = 0
    for repeat, (summary, *_) in summaries.items():
        above, at_zero = _count_trail(summary.value, states.get(repeat, []))
        alive, inactive = alive + above, inactive + at_zero
    refused = [s.value["refused"] for found in summaries.values() for s in found]
    return {"repeats": len(summaries), "runs": _runs(obs, "runtime-1", len(summaries)), "alive": alive,
            "inactive": inactive, "refused": spread(refused),
            "accepted_all": sum(1 for r in refused if r is None)}


def facts_after_last_release(obs: Observations) -> dict:
    """What old data and a new CuPy allocation gave after the count reached zero, per run."""
    found = [o for o in some(obs, "old data after destruction") if o.scenario in PAST_ZERO]
    if not found:
        raise MissingObservation("old data after destruction in scenario " + " or ".join(PAST_ZERO))
    parts, outcomes = [], []
    for scenario in PAST_ZERO:
        mine = [o.value for o in found if o.scenario == scenario]
        if not mine:
            continue
        outcomes += [v["reduction"] for v in mine] + [v["new_allocation"] for v in mine]
        parts.append(f"{scenario} ({_runs(obs, scenario, len(mine))}): a context still current on the thread in "
                     f"{sum(1 for v in mine if v['current'])}, reduction over an array made before: "
                     f"{spread(v['reduction'] for v in mine)}, a new CuPy allocation: "
                     f"{spread(v['new_allocation'] for v in mine)}")
    return {"outcomes": "; ".join(parts), "silent_wrong": silent_wrong(outcomes)}


def facts_release_without_retain(obs: Observations) -> dict:
    """The status of a release with no retain."""
    return {"status": spread(v["status"] for v in repeats(obs, "release without retain", "release-without-retain"))}


def facts_device_reset(obs: Observations) -> dict:
    """The old pointer and CuPy's next results after cudaDeviceReset, in every run."""
    found = [o.value for o in some(obs, "after cudaDeviceReset", "device-reset")]
    return {"repeats": len(found), "runs": _runs(obs, "device-reset", len(found)),
            "runtime": spread(v["runtime"] for v in found),
            "status": spread(v["status"] for v in found), "lab_retains": spread(v["lab_retains"] for v in found),
            "valid": sum(1 for v in found if _pointer_valid(v)),
            "pointer": spread(v["old_pointer_status"] for v in found),
            "active": spread(v["active"] for v in found), "old_reduction": spread(v["old_reduction"] for v in found),
            "next_cupy": spread(v["next_cupy"] for v in found),
            "silent_wrong": silent_wrong([v["old_reduction"] for v in found] + [v["next_cupy"] for v in found])}


def facts_primary_reset(obs: Observations) -> dict:
    """The old pointer and the next retain's context after cuDevicePrimaryCtxReset, in every run."""
    found = [o.value for o in some(obs, "after cuDevicePrimaryCtxReset", "primary-reset")]
    return {"repeats": len(found), "runs": _runs(obs, "primary-reset", len(found)),
            "status": spread(v["status"] for v in found), "lab_retains": spread(v["lab_retains"] for v in found),
            "valid": sum(1 for v in found if _pointer_valid(v)),
            "pointer": spread(v["old_pointer_status"] for v in found),
            "active": spread(v["active"] for v in found),
            "ids": spread(f"{v['id_before']} -> {v['id_after']}" for v in found),
            "not_new": sum(1 for v in found if v["id_after"] is None or v["id_after"] == v["id_before"]),
            "old_reduction": spread(v["old_reduction"] for v in found),
            "silent_wrong": silent_wrong(v["old_reduction"] for v in found)}


def facts_attach_detach(obs: Observations) -> dict:
    """cuCtxAttach/cuCtxDetach statuses and whether the context lived, in every run."""
    found = [o.value for o in some(obs, "cuCtxAttach/cuCtxDetach", "created")]
    counted = sum(1 for v in found if v["attach"] == v["first_detach"] == "CUDA_SUCCESS"
                  and v["alive_after_first_detach"] and not v["alive_after_second_detach"])
    return {"repeats": len(found), "runs": _runs(obs, "created", len(found)), "counted": counted,
            "attach": spread(v["attach"] for v in found),
            "first_detach": spread(v["first_detach"] for v in found),
            "alive1": spread(v["alive_after_first_detach"] for v in found),
            "second_detach": spread(v["second_detach"] for v in found),
            "alive2": spread(v["alive_after_second_detach"] for v in found)}


def facts_runtime_does_not_retain(obs: Observations) -> dict:
    """cuCtxDestroy after CuPy used a created context, in every run."""
    found = [o.value for o in some(obs, "cuCtxDestroy after runtime use", "created")]
    gone = sum(1 for v in found if v["destroy"] == "CUDA_SUCCESS" and not v["alive_after"])
    return {"repeats": len(found), "runs": _runs(obs, "created", len(found)), "gone": gone,
            "destroy": spread(v["destroy"] for v in found),
            # decided: recordings made before the child recorded the allocation's context carry its own answer
            "in_created": sum(1 for v in found if decided(v, "allocation_in_created",
                                                          lambda owner, created: owner == created,
                                                          "allocation_context", "created")),
            "left_current": sum(1 for v in found if v.get("cupy_left_created_current")),
            "id_after": spread(v["id_after"] for v in found), "next_cupy": spread(v["next_cupy"] for v in found)}


def _destroyed_handle(obs: Observations, o: Observation) -> Any:
    """The context thread A destroyed; recordings made before the field name it in B's "B: pushed" state."""
    if o.value.get("handle") is not None:
        return o.value["handle"]
    pushed = [s for s in select(obs, "state", o.scenario) if s.repeat == o.repeat and s.step == "B: pushed"]
    if not pushed:
        raise MissingObservation("the destroyed context's handle (or B's state after the push) in scenario created")
    return pushed[0].value["current"]


def facts_destroy_elsewhere(obs: Observations) -> dict:
    """Thread B's current context and its calls after thread A destroyed the context, in every run."""
    found = some(obs, "destroyed while current elsewhere", "created")
    # the destroyed handle is cuCtxCreate's (never 0): current_after equal to it names that context
    still = sum(1 for o in found if o.value["current_after"] == _destroyed_handle(obs, o))
    values = [o.value for o in found]
    return {"repeats": len(found), "runs": _runs(obs, "created", len(found)), "still": still,
            "destroy": spread(v["destroy"] for v in values),
            "synchronize": spread(v["synchronize"] for v in values), "alloc": spread(v["alloc"] for v in values),
            "refused": sum(1 for v in values if v["synchronize"] == v["alloc"] == DESTROYED)}


def _header_text(header: dict) -> str:
    return f"{header['path']} (CUDART_VERSION {header.get('cudart_version')})"


def facts_thread_exit(obs: Observations) -> dict:
    """Whether the runtime that ran exports cudaThreadExit, or the header of its exact version declares it."""
    v = one(obs, "cudaThreadExit", "thread-exit").value
    # Recordings made before these fields: nothing says which runtime ran, so no header can be matched.
    versions = v.get("runtime_versions") or {}
    seen = v.get("headers_seen") or []
    ran = {n for n in versions.values() if isinstance(n, int)}
    matched = [h for h in seen if h.get("cudart_version") in ran]
    declared = [h for h in matched if h.get("declares_cudaThreadExit")]
    return {"exported": bool(v["in_cuda_bindings"]), "declared": bool(declared),
            "cuda_bindings": v.get("cuda_bindings") or "not recorded",
            "bindings_runtime": version_text(versions.get("cuda_bindings")),
            "cupy_runtime": version_text(versions.get("cupy")),
            "matched": ", ".join(f"{_header_text(h)} declares it: {bool(h.get('declares_cudaThreadExit'))}"
                                 for h in matched) or "none",
            "seen": ", ".join(_header_text(h) for h in seen) or "none recorded"}


# ---------------------------------------------------------------- green contexts

GREEN_SCENARIOS = ("green-reference", "green-primary-reset", "green-destroy-elsewhere")
GREEN_DESTROY = ("CUDA Driver API, cuGreenCtxDestroy says nothing of other threads; cuCtxFromGreenCtx: 'The validity "
                 "of the returned pContext is tied to hCtx' (https://docs.nvidia.com/cuda/cuda-driver-api/"
                 "group__CUDA__GREEN__CONTEXTS.html); recorded as observed")


def facts_green_retains(obs: Observations) -> dict:
    """Per run: the primary context alive after the lab's last release while a green context lived, gone after
    the green context was destroyed."""
    found = [o.value for o in some(obs, "green reference", "green-reference")]
    kept = sum(1 for v in found if v["active_after_create"] and v["active_after_lab_release"]
               and v["destroy"] == "CUDA_SUCCESS" and not v["active_after_destroy"])
    return {"repeats": len(found), "runs": _runs(obs, "green-reference", len(found)), "kept": kept,
            "after_create": spread(v["active_after_create"] for v in found),
            "after_release": spread(v["active_after_lab_release"] for v in found),
            "destroy": spread(v["destroy"] for v in found),
            "after_destroy": spread(v["active_after_destroy"] for v in found)}


def facts_green_releases(obs: Observations) -> dict:
    """Releases the driver accepted while only a green context held the primary context, and its destroy after."""
    found = [o.value for o in some(obs, "green releases accepted", "green-reference")]
    return {"runs": _runs(obs, "green-reference", len(found)), "extra": spread(v["extra"] for v in found),
            "refused": spread(v["refused"] for v in found),
            "inactive": sum(1 for v in found if v["after_last"] and not v["after_last"]["active"]),
            "destroy": spread(v["destroy_after"] for v in found)}


def facts_green_primary_reset(obs: Observations) -> dict:
    """What the green context's memory, module and next calls gave after cuDevicePrimaryCtxReset, in every run."""
    found = [o.value for o in some(obs, "green after primary reset", "green-primary-reset")]
    return {"runs": _runs(obs, "green-primary-reset", len(found)), "reset": spread(v["reset"] for v in found),
            "active": spread(v["active_after"] for v in found),
            "pointer": spread(v["pointer_status"] for v in found),
            "green_id": spread(v["green_id_after"] for v in found),
            "old_data": spread(v["old_data"] for v in found), "kernel": spread(v["kernel"] for v in found),
            "new_alloc": spread(v["new_alloc"] for v in found), "destroy": spread(v["destroy"] for v in found),
            "silent_wrong": silent_wrong([v["old_data"] for v in found] + [v["kernel"] for v in found])}


def facts_green_destroy_elsewhere(obs: Observations) -> dict:
    """Thread B's current context and its calls after thread A destroyed the green context, in every run."""
    found = [o.value for o in some(obs, "green destroyed while current elsewhere", "green-destroy-elsewhere")]
    return {"runs": _runs(obs, "green-destroy-elsewhere", len(found)),
            "still": sum(1 for v in found if v["current_after"] and v["current_after"] == v["handle"]),
            "destroy": spread(v["destroy"] for v in found), "synchronize": spread(v["synchronize"] for v in found),
            "alloc": spread(v["alloc"] for v in found)}


GREEN_CLAIMS = (
    Claim("refcount.green-retains-primary",
          "cuGreenCtxCreate retains the device's primary context and cuGreenCtxDestroy releases it: the primary "
          "context outlives the lab's last release while a green context lives, and goes when that green context is "
          "destroyed.", SOURCE_RETAINS, "promise", ("green-reference",), facts_green_retains,
          "over {runs}: the primary context was active after cuGreenCtxCreate: {after_create}; after the lab "
          "released its one retain: {after_release}; cuGreenCtxDestroy -> {destroy}; active after it: "
          "{after_destroy} (all four as documented in {kept})",
          lambda f: f["kept"] == f["repeats"]),
    Claim("refcount.green-release-count",
          "How many cuDevicePrimaryCtxRelease calls the driver accepts while only a green context holds the primary "
          "context, and what cuGreenCtxDestroy returns after them.", NO_DOC, "observation", ("green-reference",),
          facts_green_releases,
          "with a green context and no retain of the lab's, over {runs}: releases accepted: {extra}, the next "
          "returned {refused}; the primary context inactive after the last accepted one in {inactive}; "
          "cuGreenCtxDestroy afterwards -> {destroy}"),
    Claim("refcount.green-primary-reset",
          "What cuDevicePrimaryCtxReset does to a green context that is current, and to memory and modules made in "
          "it.", SOURCE_AS_PRIMARY + "; nothing promises what a reset does to a green context: recorded as observed",
          "observation", ("green-primary-reset",), facts_green_primary_reset,
          "cuDevicePrimaryCtxReset with a green context current, over {runs}: {reset}; primary context active after: "
          "{active}; the green context's memory (cuPointerGetAttribute): {pointer}, read back: {old_data}; its "
          "module's kernel: {kernel}; cuCtxGetId of its CUcontext: {green_id}; a new cuMemAlloc there: {new_alloc}; "
          "cuGreenCtxDestroy: {destroy}; wrong values returned without an error: {silent_wrong}"),
    Claim("refcount.green-destroy-while-current-elsewhere",
          "What a thread with a green context current sees after another thread destroyed that green context.",
          GREEN_DESTROY, "observation", ("green-destroy-elsewhere",), facts_green_destroy_elsewhere,
          "thread A's cuGreenCtxDestroy -> {destroy}; over {runs}, thread B's current context was still the "
          "destroyed green context's in {still}; on B, cuCtxSynchronize -> {synchronize}, cuMemAlloc -> {alloc}"),
)


CLAIMS = (
    Claim("refcount.runtime-holds-reference",
          "The runtime retains the primary context it uses: once it is initialised, the driver accepts at least "
          "one release beyond the lab's own retains.", RUNTIME_INTEROP, "promise", ("runtime-1",),
          facts_runtime_reference,
          "with CuPy's runtime initialised, over {runs}: releases the driver accepted beyond the lab's "
          "{lab_retains} retains: {extra}; the release after them returned {refused}",
          lambda f: f["without"] == 0, level=1),
    Claim("refcount.reference-per-runtime-copy",
          "How many references the primary context holds when several copies of the runtime are initialised.",
          NO_DOC, "observation", RUNTIME_SCENARIOS, facts_reference_per_copy,
          "runtime copies in the process: {versions} ({note}); releases accepted beyond the lab's own after {counts}"),
    Claim("refcount.primary-count",
          "The primary context lives while its retain count is above zero and is destroyed when it reaches zero.",
          PRIMARY, "promise", ("runtime-1",), facts_primary_count,
          "over {runs} releasing past the lab's retains: the primary context stayed active while "
          "references were left in {alive}, was inactive after the last accepted release in {inactive}; the "
          "release after it returned {refused}",
          lambda f: f["alive"] == f["inactive"] == f["repeats"] and f["accepted_all"] == 0, level=1),
    Claim("refcount.after-last-release",
          "What the runtime and earlier data see after the primary context was released to zero under it.",
          NO_DOC, "observation", PAST_ZERO, facts_after_last_release,
          "after the last release: {outcomes}; wrong values returned without an error: {silent_wrong}"),
    Claim("refcount.release-without-retain",
          "cuDevicePrimaryCtxRelease without a prior retain.", NO_DOC, "observation", ("release-without-retain",),
          facts_release_without_retain, "cuDevicePrimaryCtxRelease with no retain: {status}"),
    Claim("refcount.device-reset-destroys",
          "cudaDeviceReset destroys the allocations of the device's primary context while the lab still holds driver "
          "retains on it: the old pointer is invalid afterwards, and no CuPy result after it (over the old array, "
          "or from a new allocation and a kernel cached before the reset) is a wrong value without an error.",
          DEVICE_RESET, "promise", ("device-reset",), facts_device_reset,
          "cudaDeviceReset through the {runtime} runtime ({status}) with {lab_retains} driver retain(s) held, over "
          "{runs}: the old pointer was still valid in {valid} (cuPointerGetAttribute: {pointer}); "
          "primary context active after: {active}; CuPy reduction over the old array: {old_reduction}; a new CuPy "
          "allocation and cached kernel: {next_cupy}; wrong values returned without an error: {silent_wrong}",
          lambda f: f["valid"] == 0 and f["silent_wrong"] == 0),
    Claim("refcount.primary-reset",
          "cuDevicePrimaryCtxReset destroys the primary context's allocations and state although it is still "
          "retained: the old pointer is invalid afterwards, and the next retain gives a new context.",
          PRIMARY_RESET, "promise", ("primary-reset",), facts_primary_reset,
          "cuDevicePrimaryCtxReset ({status}) on the primary context CuPy's runtime uses, over {runs}: "
          "the old pointer was still valid in {valid} (cuPointerGetAttribute: {pointer}); primary context active "
          "after: {active}; context id before the reset -> after the next retain: {ids} (the same, or no context, "
          "in {not_new}); the lab's retains at the end: {lab_retains}; CuPy reduction over the old array: "
          "{old_reduction}; wrong values returned without an error: {silent_wrong}",
          lambda f: f["valid"] == 0 and f["not_new"] == 0),
    Claim("refcount.attach-detach-count",
          "A context's lifetime is a usage count moved by cuCtxAttach and cuCtxDetach.", OLD_TEXT, "old-text",
          ("created",), facts_attach_detach,
          "on a cuCtxCreate context, over {runs}: cuCtxAttach -> {attach}; cuCtxDetach -> {first_detach}, "
          "context alive after: {alive1}; a second cuCtxDetach -> {second_detach}, context alive after: {alive2}",
          lambda f: f["counted"] == f["repeats"]),
    Claim("refcount.runtime-does-not-retain-created",
          "The runtime uses a cuCtxCreate context that is current but neither retains nor releases it.",
          CTX_CREATE, "promise", ("created",), facts_runtime_does_not_retain,
          "over {runs}: CuPy's allocation belonged to the created context in {in_created}, CuPy's kernels "
          "left it current in {left_current}; cuCtxDestroy -> {destroy}, the context gone afterwards in {gone} "
          "(cuCtxGetId: {id_after}); the next CuPy call: {next_cupy}",
          lambda f: f["gone"] == f["in_created"] == f["repeats"]),
    Claim("refcount.destroy-while-current-elsewhere",
          "A context destroyed by one thread while current on another stays current there, and that thread's "
          "calls return CUDA_ERROR_CONTEXT_IS_DESTROYED.", CTX_DESTROY, "promise", ("created",),
          facts_destroy_elsewhere,
          "thread A's cuCtxDestroy -> {destroy}; over {runs}, thread B's current context was still the "
          "destroyed one in {still}; on B, cuCtxSynchronize -> {synchronize}, cuMemAlloc -> {alloc}",
          lambda f: f["still"] == f["refused"] == f["repeats"]),
    Claim("refcount.thread-exit",
          "cudaThreadExit releases the runtime's context (old text).", THREAD_EXIT, "old-text", ("thread-exit",),
          facts_thread_exit,
          "cuda.bindings {cuda_bindings} (its runtime: {bindings_runtime}; CuPy's runtime: {cupy_runtime}) "
          "exports cudaThreadExit: {exported}; cuda_runtime_api.h of the runtime version that ran: {matched}; "
          "headers found: {seen}",
          lambda f: f["exported"] or f["declared"]),
    *GREEN_CLAIMS,
)
