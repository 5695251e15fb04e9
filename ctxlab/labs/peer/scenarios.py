"""peer's scenarios, each run in a child process, and the lab's list of them for given options."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from ctxlab.cuda import driver as drv
from ctxlab.cuda import environment
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.errors import check
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import checked
from ctxlab.harness.threads import Choreography, Step
from ctxlab.lab import LabOptions, Scenario
from ctxlab.labs.common import StepRecorder, context_state, cuda_recorder, scenario_output, skipped_output
from ctxlab.labs.peer.claims import KINDS, RESETS, THREADS, VALUE, VALUE_AFTER, WITHOUT
from ctxlab.records import skips
from ctxlab.records.skips import Skip


class Start(NamedTuple):
    """A two-GPU scenario under way: the lab's GPU, the peer GPU, the scenario's recorder."""

    dev: int
    peer: int
    rec: Any


def _start(scenario: str, device: int) -> Start | dict:
    """The pair of GPUs and the recorder, or the skipped scenario's output where this machine cannot run it."""
    pair, why = pair_or_reason(device)
    if pair is None:
        assert why is not None  # pair_or_reason gives one or the other
        return skipped_output(scenario, why)
    return Start(pair[0], pair[1], cuda_recorder(scenario=scenario))


def pair_or_reason(device: int, need_access: bool = True) -> tuple[tuple[int, int] | None, Skip | None]:
    """``((device, peer), None)``: the lab's GPU and the next one; or ``(None, why)`` where the pair cannot run,
    ``why`` a hardware skip (``ctxlab.records.skips``): too few GPUs, counted, or a pair without peer access."""
    count = environment.device_count()  # through the module: a test stands in for it
    if count < 2:
        return None, skips.gpus(2, count)
    peer = (device + 1) % count
    if need_access:
        there, back = can_access(device, peer), can_access(peer, device)
        if not (there and back):
            return None, skips.peer_access(f"cuDeviceCanAccessPeer: GPU {device} -> GPU {peer}: {there}, back: "
                                           f"{back}; these GPUs cannot access each other's memory")
    return (device, peer), None


def can_access(device: int, peer: int) -> int:
    """cuDeviceCanAccessPeer(device, peer): 1 when ``device`` may access ``peer``'s memory directly."""
    return int(check(init_driver().cuDeviceCanAccessPeer(drv.as_device(device), drv.as_device(peer)),
                     "cuDeviceCanAccessPeer"))


def enable(peer_ctx: int) -> str:
    """cuCtxEnablePeerAccess(peer_ctx, 0) from the current context: the status's name, success included."""
    return drv.raw_status(init_driver().cuCtxEnablePeerAccess(drv.as_context(peer_ctx), 0), "cuCtxEnablePeerAccess")


def _context(device: int, kind: str) -> int:
    """A context on ``device`` made current on this thread: cuCtxCreate's, or the retained primary pushed."""
    if kind == "created":
        return drv.create_context(device)
    handle = drv.primary_retain(device)
    drv.push(handle)
    return handle


def _holding(value: int) -> int:
    """8 bytes of the current context's memory holding ``value``."""
    ptr = drv.mem_alloc(8)
    drv.copy_to_device(ptr, struct.pack("<q", value))
    return ptr


def _read(ptr: int) -> int:
    return struct.unpack("<q", drv.copy_from_device(ptr, 8))[0]


def _kernel_read(probe, src: int) -> int:
    """What a kernel of ``probe``'s context (current) reads at ``src``, through memory of that context."""
    out = _holding(-1)
    probe.read_through(src, out)
    drv.synchronize()
    return _read(out)


def _copy_peer(dst_ctx: int, src: int, src_ctx: int) -> int:
    """cuMemcpyPeer from ``src`` (of ``src_ctx``) into new memory of ``dst_ctx`` (current): the value copied."""
    dst = _holding(-1)
    check(init_driver().cuMemcpyPeer(dst, drv.as_context(dst_ctx), src, drv.as_context(src_ctx), 8), "cuMemcpyPeer")
    return _read(dst)


def _copy_dtod(src: int) -> int:
    """cuMemcpyDtoD from ``src`` (any device: unified addressing) into new memory of the current context."""
    dst = _holding(-1)
    check(init_driver().cuMemcpyDtoD(dst, src, 8), "cuMemcpyDtoD")
    return _read(dst)


def handoff(device: int, kind: str) -> dict:
    """A on ``device`` enables access toward P on the peer GPU on T1, is popped and pushed on T2, which copies
    and reads P's memory and enables again."""
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
        value = {"kind": kind, "current": drv.current().handle, "a": s["a"],
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

    pair, why = pair_or_reason(device, need_access=False)
    if pair is None:
        assert why is not None  # pair_or_reason gives one or the other
        return skipped_output(THREADS, why)
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


def scenarios(options: LabOptions) -> list[Scenario]:
    """Handoffs of both kinds, the reads without access (repeated: they may fault), the resets, the threads."""
    device = options.device
    return [*(Scenario(f"peer-handoff-{kind}", handoff, (device, kind)) for kind in KINDS),
            *(Scenario(f"peer-{variant}", without_access, (device, variant), undefined=True) for variant in WITHOUT),
            *(Scenario(f"peer-reset-{which}", primary_reset, (device, which)) for which in RESETS),
            Scenario(THREADS, thread_devices, (device,))]
