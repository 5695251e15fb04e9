"""peer: on two GPUs, is peer access a property of the context, and does it follow the context to another thread?

The lab runs on its device and the next one (``--device N`` pairs GPU N with GPU
(N+1) mod the count, so ``check --devices all`` on two GPUs runs 0->1 and 1->0).
Context A on the lab's GPU enables peer access toward a context P on the other
(cuDeviceCanAccessPeer first, then cuCtxEnablePeerAccess twice), is popped on
thread T1 and pushed on T2, which copies P's memory (cuMemcpyPeer, cuMemcpyDtoD)
and launches a kernel in A that reads it; once with cuCtxCreate contexts, once
with both primary contexts. Kernels that read the other GPU's memory without
access granted to their context (no context enabled it; only a sibling did; the
reverse direction) may fault, so they run repeated, each in a fresh process.
A primary context reset (of either GPU) shows whether access survives the
context being made again. ``thread-devices`` records each thread's runtime
device (cudaGetDevice/cudaSetDevice) and both primary contexts as two threads use them.

On a machine with one GPU every scenario records ``skipped`` with the reason.
The scenarios call cuda.bindings' peer-access and copy calls directly: they are
the subject of the experiment.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from ctxlab.claim import Claim, Inapplicable, Observations, one, repeats, silent_wrong, some, spread
from ctxlab.lab import Lab, LabOptions, Scenario
from ctxlab.labs.common import skipped_output

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


# ---------------------------------------------------------------- claims

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
    # The threads are the recorder's: the thread each observation was made on.
    enabled_on: dict[str | None, str] = {o.scenario: o.thread for o in obs
                                         if o.scenario in HANDOFF and o.what == "peer enabled"}
    return {"kinds": len(found),
            "detail": "; ".join(f"{_kind(o)}: enabled on {enabled_on.get(o.scenario, 'no thread recorded')}, used "
                                f"on {o.thread} (current: {'A' if o.value['current_is_a'] else 'not A'}): kernel "
                                f"read {o.value['kernel']}, enable again {o.value['enable_again']}" for o in found),
            "moved": all(enabled_on.get(o.scenario) not in (None, o.thread) and o.value["current_is_a"]
                         for o in found),
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


# ---------------------------------------------------------------- scenarios (children)

class Start(NamedTuple):
    """A two-GPU scenario under way: the lab's GPU, the peer GPU, the scenario's recorder."""

    dev: int
    peer: int
    rec: Any


def _start(scenario: str, device: int) -> Start | dict:
    """The pair of GPUs and the recorder, or the skipped scenario's output where this machine cannot run it."""
    from ctxlab.labs.common import cuda_recorder

    pair, why = pair_or_reason(device)
    if pair is None:
        return skipped_output(scenario, str(why))
    return Start(pair[0], pair[1], cuda_recorder(scenario=scenario))


def pair_or_reason(device: int, need_access: bool = True) -> tuple[tuple[int, int] | None, str | None]:
    """``((device, peer), None)``: the lab's GPU and the next one; or ``(None, why)`` where the pair cannot run."""
    from ctxlab.cuda.environment import device_count

    count = device_count()
    if count < 2:
        return None, f"needs 2 GPUs, this machine has {count}"
    peer = (device + 1) % count
    if need_access:
        there, back = can_access(device, peer), can_access(peer, device)
        if not (there and back):
            return None, (f"cuDeviceCanAccessPeer: GPU {device} -> GPU {peer}: {there}, back: {back}; these GPUs "
                          "cannot access each other's memory")
    return (device, peer), None


def can_access(device: int, peer: int) -> int:
    """cuDeviceCanAccessPeer(device, peer): 1 when ``device`` may access ``peer``'s memory directly."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    return int(check(init_driver().cuDeviceCanAccessPeer(drv.as_device(device), drv.as_device(peer)),
                     "cuDeviceCanAccessPeer"))


def enable(peer_ctx: int) -> str:
    """cuCtxEnablePeerAccess(peer_ctx, 0) from the current context: the status's name, success included."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver

    return drv.raw_status(init_driver().cuCtxEnablePeerAccess(drv.as_context(peer_ctx), 0), "cuCtxEnablePeerAccess")


def _context(device: int, kind: str) -> int:
    """A context on ``device`` made current on this thread: cuCtxCreate's, or the retained primary pushed."""
    from ctxlab.cuda import driver as drv

    if kind == "created":
        return drv.create_context(device)
    handle = drv.primary_retain(device)
    drv.push(handle)
    return handle


def _holding(value: int) -> int:
    """8 bytes of the current context's memory holding ``value``."""
    from ctxlab.cuda import driver as drv

    ptr = drv.mem_alloc(8)
    drv.copy_to_device(ptr, struct.pack("<q", value))
    return ptr


def _read(ptr: int) -> int:
    from ctxlab.cuda import driver as drv

    return struct.unpack("<q", drv.copy_from_device(ptr, 8))[0]


def _kernel_read(probe, src: int) -> int:
    """What a kernel of ``probe``'s context (current) reads at ``src``, through memory of that context."""
    from ctxlab.cuda import driver as drv

    out = _holding(-1)
    probe.read_through(src, out)
    drv.synchronize()
    return _read(out)


def _copy_peer(dst_ctx: int, src: int, src_ctx: int) -> int:
    """cuMemcpyPeer from ``src`` (of ``src_ctx``) into new memory of ``dst_ctx`` (current): the value copied."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    dst = _holding(-1)
    check(init_driver().cuMemcpyPeer(dst, drv.as_context(dst_ctx), src, drv.as_context(src_ctx), 8), "cuMemcpyPeer")
    return _read(dst)


def _copy_dtod(src: int) -> int:
    """cuMemcpyDtoD from ``src`` (any device: unified addressing) into new memory of the current context."""
    from ctxlab.cuda.environment import init_driver
    from ctxlab.cuda.errors import check

    dst = _holding(-1)
    check(init_driver().cuMemcpyDtoD(dst, src, 8), "cuMemcpyDtoD")
    return _read(dst)


def handoff(device: int, kind: str) -> dict:
    """A on ``device`` enables access toward P on the peer GPU on T1, is popped and pushed on T2, which copies
    and reads P's memory and enables again."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked
    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import scenario_output

    started = _start(f"peer-handoff-{kind}", device)
    if isinstance(started, dict):
        return started
    dev, peer, rec = started
    s: dict = {}

    def t1(_):
        s["p"] = _context(peer, kind)
        s["src"] = _holding(VALUE)
        drv.pop()
        s["a"] = _context(dev, kind)
        first, second = enable(s["p"]), enable(s["p"])
        s["probe"] = ProbeModule.load()
        rec.add("T1: enable", "peer enabled",
                {"kind": kind, "device": dev, "peer": peer, "can_access": can_access(dev, peer),
                 "can_access_back": can_access(peer, dev), "a": s["a"], "a_id": drv.context_id(s["a"]),
                 "p": s["p"], "p_id": drv.context_id(s["p"]),
                 "src_context_is_p": drv.pointer_context(s["src"]) == s["p"],
                 "first": first, "second": second})
        drv.pop()

    def t2(_):
        drv.push(s["a"])
        value = {"kind": kind, "current_is_a": drv.current().handle == s["a"],
                 "kernel": checked(lambda: _kernel_read(s["probe"], s["src"]), VALUE),
                 "memcpy_peer": checked(lambda: _copy_peer(s["a"], s["src"], s["p"]), VALUE),
                 "dtod": checked(lambda: _copy_dtod(s["src"]), VALUE)}
        value["enable_again"] = enable(s["p"])  # after the reads: had access been lost, this would grant it
        rec.add("T2: use", "peer after handoff", value)
        drv.pop()

    Choreography(["T1", "T2"], timeout=60).run([Step("T1", "enable", t1), Step("T2", "use", t2)])
    return scenario_output(rec)


def without_access(device: int, variant: str) -> dict:
    """A kernel reads the other GPU's memory from a context that was not granted access (may fault: repeated)."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import scenario_output

    started = _start(f"peer-{variant}", device)
    if isinstance(started, dict):
        return started
    dev, peer, rec = started
    p = drv.create_context(peer)
    p_src = _holding(VALUE)
    drv.pop()
    granted, a, a_src = "none", 0, 0
    if variant in ("sibling", "reverse"):
        a = drv.create_context(dev)  # A grants itself access to P's memory
        granted = enable(p)
        a_src = _holding(VALUE)
        drv.pop()
    if variant == "reverse":  # P reads A's memory: A's call granted access the other way only
        reader, reader_device, src, src_ctx = p, peer, a_src, a
        drv.push(p)
    else:  # a context on the lab's GPU that made no call (beside A, for the sibling)
        reader, reader_device, src, src_ctx = drv.create_context(dev), dev, p_src, p
    probe = ProbeModule.load()
    copied = checked(lambda: _copy_peer(reader, src, src_ctx), VALUE)  # copies need no peer access
    rec.add("read", "read without access",
            {"variant": variant, "reader_device": reader_device, "reader_id": drv.context_id(reader),
             "granted": granted, "memcpy_peer": copied, "kernel": checked(lambda: _kernel_read(probe, src), VALUE)})
    return scenario_output(rec)


def primary_reset(device: int, which: str) -> dict:
    """The lab GPU's primary context enables access toward the peer GPU's; one of them is reset and made again."""
    from ctxlab.cuda import driver as drv
    from ctxlab.cuda.kernels import ProbeModule
    from ctxlab.cuda.outcome import checked
    from ctxlab.labs.common import scenario_output

    started = _start(f"peer-reset-{which}", device)
    if isinstance(started, dict):
        return started
    dev, peer, rec = started
    p = _context(peer, "primary")
    src = _holding(VALUE)
    drv.pop()
    a = _context(dev, "primary")
    before = enable(p)
    read_before = checked(lambda: _kernel_read(ProbeModule.load(), src), VALUE)
    drv.pop()
    target = peer if which == "peer" else dev
    reset = drv.outcome(drv.primary_reset, target)["status"]
    active = drv.primary_state(target).active
    p2 = _context(peer, "primary")  # made again (retain) where it was reset
    src_after = _holding(VALUE_AFTER)
    drv.pop()
    a2 = _context(dev, "primary")
    after = enable(p2)
    read_after = checked(lambda: _kernel_read(ProbeModule.load(), src_after), VALUE_AFTER)
    rec.add("after reset", "peer after primary reset",
            {"reset": which, "reset_device": target, "reset_status": reset, "active_after_reset": active,
             "own_same_handle": a2 == a, "peer_same_handle": p2 == p, "enable_before": before,
             "read_before": read_before, "enable_after": after, "read_after": read_after})
    drv.pop()
    return scenario_output(rec)


def _devices_probe(devices: tuple[int, int]) -> Callable[[list], dict]:
    """A StepRecorder probe: this thread's runtime device and context, and both GPUs' primary contexts."""

    def probe(events: list) -> dict:
        import cupy

        from ctxlab.cuda import driver as drv
        from ctxlab.labs.common import context_state

        primaries = {}
        for d in devices:
            st = context_state(d)
            primaries[str(d)] = {"active": st["active"], "handle": st["primary"],
                                 "id": drv.outcome(drv.context_id, st["primary"] or 0).get("value")}
        st = context_state(devices[0], with_primary=False)
        return {"runtime_device": cupy.cuda.runtime.getDevice(), "current": st["current"],
                "current_id": st["current_id"], "primaries": primaries}

    return probe


def thread_devices(device: int) -> dict:
    """Thread A sets the pair's nonzero GPU; a new thread B reads its device before any call of its own (after
    A's cudaSetDevice) and after its cudaMalloc; both GPUs' primary contexts are read after every step."""
    import cupy

    from ctxlab.harness.threads import Choreography, Step
    from ctxlab.labs.common import StepRecorder

    pair, why = pair_or_reason(device, need_access=False)
    if pair is None:
        return skipped_output(THREADS, str(why))
    chosen = max(pair)  # never 0, so a thread that kept the default device is told apart
    s = StepRecorder(THREADS, "after", _devices_probe(pair), label="call")
    seen: dict = {}

    def step(name: str, key: str, action: Callable[[], Any] | None = None) -> Callable[[Any], None]:
        def run(_):
            if action is not None:
                action()
            seen[key] = s.after(name)
        return run

    Choreography(["A", "B"], timeout=60).run([
        Step("A", "start", step("A: before any call", "a_start")),
        Step("A", "set", step(f"A: cudaSetDevice({chosen})", "a_set", lambda: cupy.cuda.runtime.setDevice(chosen))),
        Step("B", "start", step("B: before any call", "b_start")),
        Step("B", "malloc", step("B: cudaMalloc", "b_malloc", lambda: cupy.cuda.runtime.malloc(256))),
        Step("A", "end", step("A: after B's cudaMalloc", "a_end")),
    ])
    bound = seen["b_malloc"]
    owner = [d for d, p in bound["primaries"].items() if bound["current"] and p["handle"] == bound["current"]]
    s.rec.add("summary", "thread devices",
              {"a_start": seen["a_start"]["runtime_device"], "set_device": chosen,
               "a_after_set": seen["a_set"]["runtime_device"], "a_end": seen["a_end"]["runtime_device"],
               "b_start": seen["b_start"]["runtime_device"], "b_end": bound["runtime_device"],
               "b_bound": f"GPU {owner[0]}'s primary context" if owner else f"context id {bound['current_id']}"})
    return s.output()


# ---------------------------------------------------------------- the lab

def scenarios(options: LabOptions) -> list[Scenario]:
    """Handoffs of both kinds, the reads without access (repeated: they may fault), the resets, the threads."""
    here, device = "ctxlab.labs.peer", options.device
    return [*(Scenario(f"peer-handoff-{kind}", f"{here}:handoff", (device, kind)) for kind in KINDS),
            *(Scenario(f"peer-{variant}", f"{here}:without_access", (device, variant), undefined=True)
              for variant in WITHOUT),
            *(Scenario(f"peer-reset-{which}", f"{here}:primary_reset", (device, which)) for which in RESETS),
            Scenario(THREADS, f"{here}:thread_devices", (device,))]


LAB = Lab(NAME, "On two GPUs, does peer access belong to the context and follow it to another thread, and what is "
                "each thread's current device?", LabOptions, CLAIMS, scenarios)
