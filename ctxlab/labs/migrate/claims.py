"""migrate's claims: the sources, the facts read from the scenarios' observations, the predicates and the evidence
templates. Pure: no CUDA."""

from __future__ import annotations

from ctxlab.claim import Claim, Observations, decided, hexed, one, repeats, select, silent_wrong, some, spread
from ctxlab.cuda.green import SOURCE_AS_PRIMARY, SOURCE_ONE_THREAD, SOURCE_PARTITION

NAME = "migrate"
KINDS = ("primary", "created")  # what --context both (the default) relays
GREEN = "green"
CONTEXTS = (*KINDS, GREEN, "both", "all")  # --context: one kind, both (primary and created), all three
ARRAY_LEN = 1 << 13  # 64 KiB: one block reduces it in a few microseconds
GLOBAL_START = 1000
GLOBAL_STEP = 3  # the probe kernel adds this at every handoff
MAX_HANDOFFS = 10_000_000
TIMELINE_HANDOFFS = 8  # handoffs per context kind recorded step by step; the rest are counted

RUNTIME_INTEROP = ("CUDA Runtime API, 'Interactions with the CUDA Driver API' "
                   "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DRIVER.html)")
POINTER_ATTR = ("CUDA Driver API, cuPointerGetAttribute: CU_POINTER_ATTRIBUTE_CONTEXT "
                "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html)")
CTX_MGMT = ("CUDA Driver API, Context Management: cuCtxPushCurrent/cuCtxSetCurrent; Green Contexts: "
            "'a green context can be current to only one thread at a time' "
            "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
ADDRESS_SPACE = ("CUDA Programming Guide, Driver API, Context: 'each context has its own distinct address space' "
                 "(https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#context); against CUDA Driver "
                 "API, Unified Addressing: one virtual address space for all allocations of the process "
                 "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__UNIFIED.html)")
INVALID_CONTEXT = ("CUDA Driver API, CUresult: 'CUDA_ERROR_INVALID_CONTEXT = 201: This most frequently indicates "
                   "that there is no context bound to the current thread' "
                   "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html)")
NO_DOC = "no documentation promises this; recorded as observed"


HANDOFF = tuple(f"handoff-{kind}" for kind in KINDS)
CONCURRENT = tuple(f"concurrent-{kind}" for kind in KINDS)
UNBOUND = tuple(f"unbound-{kind}" for kind in KINDS)
GREEN_SCENARIOS = ("handoff-green", "concurrent-green", "green-sm", "green-memory", "green-cupy")


def _within(obs: Observations, scenarios: tuple[str, ...]) -> list:
    """Only the observations of ``scenarios`` (the green scenarios record kinds the others read too)."""
    return [o for o in obs if o.scenario in scenarios]


def _final_right(final: dict | None, handoffs: int) -> bool:
    """Every element 1 more and the global ``GLOBAL_STEP`` more for each handoff (None: never read back)."""
    if not final:
        return False
    return (final["element_added_min"] == final["element_added_max"] == handoffs
            and final["global"] == GLOBAL_START + GLOBAL_STEP * handoffs)


def final_values_right(summary: dict) -> bool:
    """Whether a relay's read-back at the end is what its handoffs added. The relay records what it read
    (relay.py's finish); deciding is here. A relay recorded before it did carries ``final_ok``, its own answer."""
    return bool(decided(summary, "final_ok", _final_right, "final", "handoffs"))


def relay_lost(summary: dict) -> bool:
    """A relay is lost on any mismatch, any handoff not verified, or a wrong final value."""
    return bool(summary["mismatches"]) or summary["verified"] != summary["handoffs"] or not final_values_right(summary)


def _facts_state_travels(obs, scenarios: tuple[str, ...] = HANDOFF):
    summaries = some(_within(obs, scenarios), "handoffs verified")
    lost = [o for o in summaries if relay_lost(o.value)]
    return {"verified": sum(o.value["verified"] for o in summaries),
            "handoffs": sum(o.value["handoffs"] for o in summaries),
            "mismatches": sum(o.value["mismatches"] for o in summaries), "kinds_lost": len(lost),
            "final_ok": sum(final_values_right(o.value) for o in summaries), "kinds": len(summaries),
            "per_kind": ", ".join(f"{o.scenario}: {o.value['verified']} of {o.value['handoffs']}" for o in summaries),
            "first": next((o.value["first_mismatch"] for o in lost if o.value["first_mismatch"]), "none")}


def _facts_pointer_context(obs):
    allocs = some(_within(obs, HANDOFF + CONCURRENT), "allocation context")
    other = [o.value for o in allocs if o.value["pointer_context"] != o.value["current_context"]]
    return {"allocations": len(allocs), "elsewhere": len(other), "example": other[0] if other else "none"}


def _current_on_both(threads: dict, still: int, context: int) -> bool:
    """The context made was current on both threads after their driver work, and still on the first at the check."""
    return threads["A"]["current"] == threads["B"]["current"] == still == context


def _worked_on_both(threads: dict, context: int, global_value: int) -> bool:
    """Both threads' cuMemAlloc belongs to the context made, and both increments reached its global (set to 0)."""
    return all(t["ok"] and t["pointer_context"] == context for t in threads.values()) and global_value == 2


def _facts_several_threads(obs):
    both = [o.value for o in some(obs, "current on two threads")]
    # decided: recordings made before the check recorded the threads carry the child's both_current and both_worked
    return {"kinds": len(both),
            "current_on_both": sum(bool(decided(v, "both_current", _current_on_both, "threads", "still", "context"))
                                   for v in both),
            "worked_on_both": sum(bool(decided(v, "both_worked", _worked_on_both, "threads", "context", "global"))
                                  for v in both),
            "globals": ", ".join(f"{v['kind']}: {v['global']}" for v in both)}


def _facts_cupy_current(obs):
    obs = _within(obs, HANDOFF + CONCURRENT + ("cupy-caches",))
    allocs = some(obs, "cupy allocation")
    first = [f"{o.value['current_before_id']} -> {o.value['current_after_id']}"
             for o in select(obs, "cupy first kernel")]
    parts = [f"first CuPy kernel under a cuCtxCreate context: current context id {spread(first)}"] if first else []
    parts += [f"{o.value['kind']} context, thread {o.value['thread']}: {o.value['outcome']}"
              for o in select(obs, "cupy on a thread sharing the context")]
    return {"allocations": len(allocs),
            "moved": sum(o.value["current_before"] != o.value["current_after"] for o in allocs),
            "elsewhere": sum(o.value["pointer_context"] != o.value["current_before"] for o in allocs),
            "more": "; ".join(parts) or "nothing else recorded"}


def _facts_runtime_binds_primary(obs):
    found = some(obs, "runtime call without context")
    # the handles compared are cuCtxGetCurrent's after cudaMalloc, cuDevicePrimaryCtxRetain's and the allocation's
    # owner (CU_POINTER_ATTRIBUTE_CONTEXT), each recorded: the comparisons are the claim's
    return {"threads": len(found),
            "bound_primary": sum(1 for o in found if o.value["current_after"] == o.value["primary"]),
            "in_primary": sum(1 for o in found if o.value["pointer_context"] == o.value["primary"]),
            "in_owner_context": sum(o.value["pointer_context"] == o.value["owner_context"] for o in found
                                    if o.scenario == "unbound-created"),
            "devices": ", ".join(f"{o.scenario}: device {o.value['runtime_device']} (owner on "
                                 f"{o.value['owner_device']})" for o in found)}


def _facts_driver_without_context(obs):
    found = some(obs, "driver call without context")
    return {"statuses": spread(f"{o.value['call']} -> {o.value['status']}" for o in found),
            "all": [o.value["status"] for o in found]}


def _facts_cupy_pool(obs):
    found = repeats(obs, "cupy pool block reused across contexts", "cupy-caches")
    return {"runs": len(found),
            "reused": spread("reused" if v["same_block"] else "did not reuse" for v in found),
            "block_context_id": spread(v["block_context_id"] for v in found),
            "current_context_id": spread(v["current_context_id"] for v in found),
            "per_context_pool": spread(v["per_context_pool"] for v in found)}


def _facts_cupy_kernels(obs):
    found = some(obs, "cupy cached kernel in other context")
    by_direction: dict[str, list] = {}
    for o in found:
        by_direction.setdefault(f"{o.value['first_used_in']} -> {o.value['launched_in']}", []).append(
            o.value["outcome"])
    return {"outcomes": "; ".join(f"{d}: {spread(v)}" for d, v in by_direction.items()),
            "silent_wrong": silent_wrong(o.value["outcome"] for o in found)}


def _facts_address_space(obs):
    v = one(obs, "cross-context dereference", "cross-context").value
    return {**v, "read_ok": v["value_read"] == v["value_written"], "value_read": hexed(v["value_read"]),
            "value_written": hexed(v["value_written"])}


# ---------------------------------------------------------------- green contexts (--context green or all)

def _facts_green_state(obs):
    made = one(obs, "green context made", "handoff-green").value
    return {**_facts_state_travels(obs, ("handoff-green",)), "group_sms": made["group_sms"],
            "device_sms": made["device_sms"]}


def _facts_green_two_threads(obs):
    found = repeats(obs, "green current on two threads", "concurrent-green")
    threads = [t for v in found for t in v["threads"].values()]
    launched = sum(t.get("launches_ok", 0) for t in threads)
    tried = sum(t.get("launches_tried", 0) for t in threads)
    return {"runs": len(found), "push": spread(t.get("push") for t in threads),
            "both_current": sum(1 for v in found if all(t.get("current_is_green") for t in v["threads"].values())),
            "launched": launched, "tried": tried,
            "launch_errors": spread(e for t in threads for e in t.get("launch_errors", {})) if tried != launched
            else "none",
            "global": spread(v["global"] for v in found), "expected": spread(v["expected_global"] for v in found),
            "cupy": spread(t.get("cupy") for t in threads),
            "broke": spread(t.get("error") or "none" for t in threads),
            "silent_wrong": silent_wrong([v["global"] for v in found] + [t.get("cupy") for t in threads])}


def _facts_green_sms(obs):
    v = one(obs, "green sm ids", "green-sm").value
    return {key: v[key] for key in ("group_sms", "green_resource_sms", "device_sms", "blocks", "primary_distinct",
                                    "null_stream_distinct", "green_stream_distinct")}


def _owner_name(v: dict) -> str:
    return {v["green"]: "the green context's CUcontext", v["primary"]: "the primary context"}.get(
        v["pointer_context"], "another context")


def _facts_green_memory(obs):
    v = one(obs, "green allocation", "green-memory").value
    return {"owner": _owner_name(v), "owner_id": v["pointer_context_id"], "green_id": v["green_id"],
            "primary_id": v["primary_id"], "same_handle": v["green"] == v["primary"],
            "primary_reads_green": v["primary_reads_green"], "green_reads_primary": v["green_reads_primary"]}


def _facts_green_cupy(obs):
    v = one(obs, "cupy under green", "green-cupy").value
    return {**v, "owner": ("the green context" if v["allocation_owner_id"] == v["green_id"] else
                           "the primary context" if v["allocation_owner_id"] == v["primary_id"] else
                           f"context id {v['allocation_owner_id']}")}


GREEN_CLAIMS = (
    Claim("migrate.green-state-follows-context",
          "A green context's CUcontext (from cuCtxFromGreenCtx) can be popped from one thread and pushed onto "
          "another like a primary context, and runtime state (allocations, __device__ globals, streams) moves with it.",
          SOURCE_AS_PRIMARY, "promise", ("handoff-green",), _facts_green_state,
          "green context of {group_sms} of {device_sms} SMs: {verified} of {handoffs} handoffs verified: {mismatches} "
          "mismatches of pointer context, global address, stream context or values (first: {first}); final array "
          "and global as expected in {final_ok} of {kinds} relays",
          lambda f: f["kinds_lost"] == 0),  # every handoff verified and the final values right, in every relay
    Claim("migrate.green-one-thread-at-a-time",
          "What happens when a green context is made current on two threads at once, which the documentation rules "
          "out (does the driver refuse the second thread, and do both threads' results come out right?).",
          SOURCE_ONE_THREAD, "observation", ("concurrent-green",), _facts_green_two_threads,
          "over {runs} run(s), two threads pushed the green context: cuCtxPushCurrent -> {push}; current on both "
          "threads at once in {both_current}; kernel launches from both threads at once: {launched} of {tried} "
          "accepted (errors: {launch_errors}); the global after them: {global} (expected {expected}); a CuPy "
          "reduction on each thread: {cupy}; threads that broke: {broke}; wrong values returned without an error: "
          "{silent_wrong}"),
    Claim("migrate.green-sm-partition",
          "Kernels launched in a green context run only on its partition's SMs: the distinct SMs a launch used are "
          "no more than the SMs of the group the green context was made from.", SOURCE_PARTITION, "promise",
          ("green-sm",), _facts_green_sms,
          "{blocks} blocks recording %smid: in the green context (group of {group_sms} SMs, cuGreenCtxGetDevResource "
          "says {green_resource_sms}) they ran on {null_stream_distinct} distinct SMs from the NULL stream and on "
          "{green_stream_distinct} from a cuGreenCtxStreamCreate stream; in the primary context on "
          "{primary_distinct} of the device's {device_sms}",
          lambda f: all(0 < f[k] <= f["group_sms"] for k in ("null_stream_distinct", "green_stream_distinct"))),
    Claim("migrate.green-allocation-owner",
          "Which context CU_POINTER_ATTRIBUTE_CONTEXT names for memory allocated with a green context current.",
          NO_DOC, "observation", ("green-memory",), _facts_green_memory,
          "cuMemAlloc under the green context: CU_POINTER_ATTRIBUTE_CONTEXT names {owner} (id {owner_id}; the green "
          "context's CUcontext has id {green_id}, the primary context {primary_id}; the same handle: {same_handle})"),
    Claim("migrate.green-memory-shared-with-primary",
          "The green context's CUcontext is treated as the primary context where resources do not matter: memory "
          "allocated under it is used by kernels in the primary context, and the primary context's memory by kernels "
          "in the green context.", SOURCE_AS_PRIMARY, "promise", ("green-memory",), _facts_green_memory,
          "a kernel in the primary context read memory allocated under the green context: {primary_reads_green}; a "
          "kernel in the green context read the primary context's memory: {green_reads_primary}",
          lambda f: f["primary_reads_green"] == f["green_reads_primary"] == "correct"),
    Claim("migrate.green-cupy",
          "What CuPy does with a green context current (does its first kernel move the thread off it, as with "
          "cuCtxCreate contexts?).", NO_DOC, "observation", ("green-cupy",), _facts_green_cupy,
          "with the green context (id {green_id}) current: current context id after a CuPy allocation "
          "{after_alloc_id}, after CuPy's first kernel {after_kernel_id} (primary context: {primary_id}); the "
          "allocation belongs to {owner}; the kernel's result: {kernel}"),
)


CLAIMS = (
    Claim("migrate.state-follows-context",
          "Runtime state (allocations, __device__ globals, streams) belongs to the CUcontext and moves with it "
          "when the context is popped from one thread and pushed onto another.", RUNTIME_INTEROP, "promise",
          HANDOFF, _facts_state_travels,
          "{verified} of {handoffs} handoffs verified ({per_kind}): {mismatches} mismatches of pointer context, "
          "global address, stream context or values (first: {first}); final array and global as expected in "
          "{final_ok} of {kinds} relays",
          # every handoff verified and the final values right, in every relay
          lambda f: f["kinds_lost"] == 0, level=1),
    Claim("migrate.pointer-belongs-to-context",
          "CU_POINTER_ATTRIBUTE_CONTEXT names the context in which an allocation was made.", POINTER_ATTR,
          "promise", HANDOFF + CONCURRENT, _facts_pointer_context,
          "{allocations} cuMemAlloc allocations; {elsewhere} named a context other than the one current when they "
          "were made (first: {example})",
          lambda f: f["elsewhere"] == 0, level=1),
    Claim("migrate.current-on-several-threads",
          "A (non-green) context can be current on several host threads at the same time.", CTX_MGMT, "promise",
          CONCURRENT, _facts_several_threads,
          "{kinds} context kind(s) pushed on a second thread while current on the first: current on both in "
          "{current_on_both}, allocations and kernels on both threads worked in {worked_on_both} (global after "
          "two increments: {globals})",
          lambda f: f["current_on_both"] == f["worked_on_both"] == f["kinds"], level=1),
    Claim("migrate.cupy-current-context",
          "What CuPy does with the context current on the calling thread (pushed, created, shared).", NO_DOC,
          "observation", HANDOFF + CONCURRENT + ("cupy-caches",), _facts_cupy_current,
          "{allocations} CuPy allocations: {moved} changed the thread's current context, {elsewhere} landed "
          "outside the context current before the call; {more}"),
    Claim("migrate.runtime-binds-primary",
          "A first runtime call (cudaMalloc) on a thread with no current context makes the primary context of the "
          "device it runs on current there, and allocates in that context (which device that is, is recorded).",
          RUNTIME_INTEROP, "promise", UNBOUND,
          _facts_runtime_binds_primary,
          "{threads} thread(s) with no context made a first runtime call (cudaMalloc): {bound_primary} got their "
          "device's primary context current, {in_primary} allocations belong to it, {in_owner_context} to a "
          "cuCtxCreate context current on another thread ({devices})",
          lambda f: f["bound_primary"] == f["in_primary"] == f["threads"], level=1),
    Claim("migrate.driver-call-without-context",
          "A driver call that needs a context returns CUDA_ERROR_INVALID_CONTEXT on a thread with no context "
          "current ('no context bound to the current thread').", INVALID_CONTEXT, "promise", UNBOUND,
          _facts_driver_without_context, "on a thread that never received the context: {statuses}",
          lambda f: set(f["all"]) == {"CUDA_ERROR_INVALID_CONTEXT"}),
    Claim("migrate.cupy-pool-across-contexts",
          "CuPy's default memory pool under a context other than the primary one.", NO_DOC, "observation",
          ("cupy-caches",), _facts_cupy_pool,
          "over {runs} run(s), CuPy's default pool (per device) {reused} a block freed under a cuCtxCreate context for "
          "a caller in the primary context: the new array belongs to context id {block_context_id}, the current one "
          "is {current_context_id}; with a MemoryPool made under the primary context: {per_context_pool}"),
    Claim("migrate.cupy-kernel-cache-across-contexts",
          "CuPy's compiled-kernel cache when the current context changes.", NO_DOC, "observation",
          ("cupy-caches", "cupy-kernel-reverse"), _facts_cupy_kernels,
          "a CuPy kernel cached under one context, launched under another: {outcomes}; wrong values returned "
          "without an error: {silent_wrong}"),
    Claim("migrate.own-address-space",
          "Each context has its own address space: memory of one context cannot be dereferenced in another.",
          ADDRESS_SPACE, "old-text", ("cross-context",), _facts_address_space,
          "a kernel in context {reader_context_id} dereferenced memory allocated in context {owner_context_id} on "
          "the same device: {outcome}, read {value_read} (written {value_written})",
          lambda f: not f["read_ok"]),
    *GREEN_CLAIMS,
)
