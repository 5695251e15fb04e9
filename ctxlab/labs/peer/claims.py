"""peer's claims: the sources, the facts read from the scenarios' observations, the predicates and the evidence
templates. Pure: no CUDA."""

from __future__ import annotations

from typing import Any

from ctxlab.claim import Claim, Inapplicable, Observations, decided, one, repeats, silent_wrong, some, spread

NAME = "peer"
VALUE = 0x0DE1_1CA7_0001  # what P's memory holds (a kernel or copy that gets it read the right memory)
VALUE_AFTER = 0x0DE1_1CA7_0002  # written after a primary reset
ENABLED, ALREADY = "CUDA_SUCCESS", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"
KINDS = ("created", "primary")
WITHOUT = ("none", "sibling", "reverse")  # kernels reading the other GPU without access granted to their context
RESETS = ("peer", "own")  # whose primary context is reset

PEER_DOC = ("CUDA Driver API, Peer Context Memory Access "
            "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PEER__ACCESS.html)")
ENABLE_SOURCE = (f"{PEER_DOC}: cuCtxEnablePeerAccess: 'on success all allocations from peerContext will immediately "
                 "be accessible by the current context'; 'Returns CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED if direct "
                 "access of peerContext from the current context has already been enabled.'")
FOLLOWS_SOURCE = (f"{ENABLE_SOURCE}; CUDA Driver API, Context Management: cuCtxPopCurrent/cuCtxPushCurrent move a "
                  "context between host threads (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__CTX.html)")
COPY_SOURCE = ("CUDA Driver API, Memory Management: cuMemcpyPeer 'Copies from device memory in one context to device "
               "memory in another context'; cuMemcpyDtoD between devices through Unified Addressing "
               "(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MEM.html)")
UNIDIRECTIONAL = (f"{PEER_DOC}: cuCtxEnablePeerAccess: 'Note that access granted by this call is unidirectional and "
                  "that in order to access memory from the current context in peerContext, a separate symmetric call "
                  "to cuCtxEnablePeerAccess() is required.' It does not say what an access without it does; "
                  "recorded as observed")
RESET_SOURCE = ("CUDA Driver API, cuDevicePrimaryCtxReset: 'Destroy all allocations and reset all state on the primary "
                "context' (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__PRIMARY__CTX.html); nothing says "
                "what becomes of peer access; recorded as observed")
SET_DEVICE = ("CUDA Runtime API, cudaSetDevice: 'Sets device as the current device for the calling host thread.' "
              "(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__DEVICE.html)")
PRIMARY_PER_DEVICE = ("CUDA Runtime API, cudaSetDevice: 'This call will bind the primary context of the specified "
                      "device to the calling thread' (https://docs.nvidia.com/cuda/cuda-runtime-api/"
                      "group__CUDART__DEVICE.html); which primary contexts exist as threads use them is recorded as "
                      "observed")


HANDOFF = tuple(f"peer-handoff-{kind}" for kind in KINDS)
WITHOUT_ACCESS = tuple(f"peer-{variant}" for variant in WITHOUT)
RESET = tuple(f"peer-reset-{which}" for which in RESETS)
THREADS = "thread-devices"


def _kind(o) -> str:
    return o.scenario.removeprefix("peer-handoff-")


def _facts_enable(obs: Observations) -> dict:
    found = some([o for o in obs if o.scenario in HANDOFF], "peer enabled")
    return {"calls": "; ".join(f"{_kind(o)}: GPU {o.value['device']} -> GPU {o.value['peer']}: {o.value['first']}, "
                               f"then {o.value['second']}" for o in found),
            "can_access": spread(f"{o.value['can_access']}/{o.value['can_access_back']}" for o in found),
            "all": [(o.value["first"], o.value["second"]) for o in found]}


def _facts_follows(obs: Observations) -> dict:
    found = some([o for o in obs if o.scenario in HANDOFF], "peer after handoff")
    # The threads are the recorder's: the thread each observation was made on (looked up for found's scenarios only).
    enabled_on: dict[str | None, str] = {o.scenario: o.thread for o in obs if o.what == "peer enabled"}
    # T2's current context against A's handle; recordings made before T2 recorded both carry its current_is_a
    on_a = [decided(o.value, "current_is_a", lambda current, a: current == a, "current", "a") for o in found]
    return {"kinds": len(found),
            "detail": "; ".join(f"{_kind(o)}: enabled on {enabled_on.get(o.scenario, 'no thread recorded')}, used "
                                f"on {o.thread} (current: {'A' if is_a else 'not A'}): kernel "
                                f"read {o.value['kernel']}, enable again {o.value['enable_again']}"
                                for o, is_a in zip(found, on_a, strict=True)),
            "moved": all(enabled_on.get(o.scenario) not in (None, o.thread) and is_a
                         for o, is_a in zip(found, on_a, strict=True)),
            "kernels_correct": all(o.value["kernel"] == "correct" for o in found),
            "still_enabled": all(o.value["enable_again"] == ALREADY for o in found)}


def _facts_copies(obs: Observations) -> dict:
    found = some([o for o in obs if o.scenario in HANDOFF], "peer after handoff")
    return {"detail": "; ".join(f"{_kind(o)}: cuMemcpyPeer {o.value['memcpy_peer']}, cuMemcpyDtoD {o.value['dtod']}"
                                for o in found),
            "correct": all(o.value["memcpy_peer"] == o.value["dtod"] == "correct" for o in found)}


def _facts_without(obs: Observations) -> dict:
    out: dict[str, Any] = {}
    reads: list = []
    for variant in WITHOUT:
        found = repeats(obs, "read without access", f"peer-{variant}")
        reads += [v["kernel"] for v in found]
        copies = spread(v["memcpy_peer"] for v in found)
        out[variant] = f"kernel {spread(v['kernel'] for v in found)}, cuMemcpyPeer {copies}"
    return {**out, "silent_wrong": silent_wrong(reads)}


def _facts_reset(obs: Observations) -> dict:
    out: dict[str, Any] = {}
    for which in RESETS:
        v = one(obs, "peer after primary reset", f"peer-reset-{which}").value
        out[which] = (f"reset of GPU {v['reset_device']}'s primary context {v['reset_status']} (active after: "
                      f"{v['active_after_reset']}); enable before {v['enable_before']}, read before "
                      f"{v['read_before']}; "
                      f"primary contexts made again (same handles: own {v['own_same_handle']}, peer "
                      f"{v['peer_same_handle']}); enable again {v['enable_after']}, read after {v['read_after']}")
    return out


def _facts_set_device(obs: Observations) -> dict:
    v = one(obs, "thread devices", THREADS).value
    if v["a_start"] == v["set_device"]:  # A's call changed nothing: nothing could reach B
        raise Inapplicable(f"{THREADS}: thread A started on device {v['set_device']}, the device it then set: "
                           "the run cannot tell a per-thread device from a per-process one")
    # A's choice stays A's; B keeps the device a thread starts with (A's own before its call).
    return {**v, "unchanged": v["a_after_set"] == v["a_end"] == v["set_device"]
            and v["b_start"] == v["b_end"] == v["a_start"]}


def _facts_primaries(obs: Observations) -> dict:
    v = one(obs, "thread devices", THREADS).value
    steps = some([o for o in obs if o.scenario == THREADS], "after")
    timeline = "; ".join(f"{o.value['call']} ({o.thread}): device {o.value['runtime_device']}, current id "
                         f"{o.value['current_id']}, primaries " + ", ".join(
                             f"GPU {d}: {'active id ' + str(p['id']) if p['active'] else 'inactive'}"
                             for d, p in sorted(o.value["primaries"].items())) for o in steps)
    return {"timeline": timeline, "b_bound": v["b_bound"]}


CLAIMS = (
    Claim("peer.enable-once",
          "cuCtxEnablePeerAccess from a context toward a context on another GPU succeeds once; a second call returns "
          "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED.", ENABLE_SOURCE, "promise", HANDOFF, _facts_enable,
          "{calls} (cuDeviceCanAccessPeer there and back: {can_access})",
          lambda f: all(first == ENABLED and second == ALREADY for first, second in f["all"])),
    Claim("peer.access-follows-context",
          "Peer access a context enabled stays usable by that context after it is popped on one thread and pushed "
          "on another: a kernel it launches there reads the peer GPU's memory, and enabling again reports it "
          "already enabled.", FOLLOWS_SOURCE, "promise", HANDOFF, _facts_follows, "{detail}",
          lambda f: f["moved"] and f["kernels_correct"] and f["still_enabled"]),
    Claim("peer.copies-between-contexts",
          "On the thread the context moved to, cuMemcpyPeer and cuMemcpyDtoD copy the peer GPU's memory into the "
          "context's memory with the right values.", COPY_SOURCE, "promise", HANDOFF, _facts_copies, "{detail}",
          lambda f: f["correct"]),
    Claim("peer.without-access",
          "What a kernel reading the other GPU's memory gets when its own context was not granted access: no context "
          "enabled it, only a sibling context on the same GPU did, or the reverse direction (no symmetric call).",
          UNIDIRECTIONAL, "observation", WITHOUT_ACCESS, _facts_without,
          "no context enabled access: {none}; a sibling context did: {sibling}; reverse direction: {reverse}; "
          "silent wrong results: {silent_wrong}"),
    Claim("peer.primary-reset",
          "What a primary context reset does to peer access enabled in the primary context: is it enabled again "
          "when the context is made again?", RESET_SOURCE, "observation", RESET, _facts_reset,
          "peer GPU: {peer}. Own GPU: {own}"),
    Claim("peer.set-device-per-thread",
          "cudaSetDevice changes the runtime's current device of the calling host thread only: another thread's "
          "device stays what it was.", SET_DEVICE, "promise", (THREADS,), _facts_set_device,
          "thread A: device {a_start} at start, {a_after_set} after cudaSetDevice({set_device}), {a_end} at the end; "
          "new thread B: device {b_start} before any call of its own (after A's cudaSetDevice), {b_end} after its "
          "cudaMalloc", lambda f: f["unchanged"]),
    Claim("peer.primary-per-device",
          "Each device's primary context as two threads use the runtime on different devices.", PRIMARY_PER_DEVICE,
          "observation", (THREADS,), _facts_primaries, "{timeline}; B's cudaMalloc bound {b_bound}"),
)
