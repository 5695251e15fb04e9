"""refcount's green-context scenarios, each run in a child process: what a green context's reference on the
primary context keeps alive, and what a reset or a destroy elsewhere leaves of it."""

from __future__ import annotations

import struct

from ctxlab.cuda import driver as drv
from ctxlab.cuda import green as greens
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.kernels import ProbeModule
from ctxlab.cuda.outcome import checked
from ctxlab.labs.common import green_or_skip, record_skip
from ctxlab.labs.refcount.held import Held, destroyed_while_current_elsewhere, release_past_zero, steps_of
from ctxlab.records import skips


def _green_steps(scenario: str, device: int):
    """``(held, steps, None)``, or ``(None, None, output)`` recording why no green context can be made here."""
    held = Held(device)
    steps = steps_of(scenario, held)
    init_driver()
    why = greens.unavailable()
    if why:
        record_skip(steps.rec, skips.unsupported(why))
        return None, None, steps.output()
    return held, steps, None


def green_reference(device: int) -> dict:
    """The green context's reference on the primary context: the lab retains, makes a green context, releases,
    destroys it; then, with a second green context and no retain, releases past zero (undefined: repeated)."""
    held, steps, out = _green_steps("green-reference", device)
    if out is not None:
        return out
    steps.after("start")
    held.retain()
    green = green_or_skip("green-reference", device, steps.rec)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    created = steps.after("lab retain, then cuGreenCtxCreate")
    held.release()
    released = steps.after("lab released its retain; the green context lives")
    destroy = drv.outcome(greens.destroy, green)["status"]
    destroyed = steps.after(f"cuGreenCtxDestroy: {destroy}")
    steps.rec.add("summary", "green reference",
                  {"active_after_create": created["active"], "active_after_lab_release": released["active"],
                   "destroy": destroy, "active_after_destroy": destroyed["active"]})
    # Undefined from here: releasing the green context's own reference from under it.
    second = greens.create(device)
    steps.after("a second cuGreenCtxCreate, no retain of the lab's")
    extra, refused, last = release_past_zero(held, steps, None, None)
    destroy_after = drv.outcome(greens.destroy, second)["status"]
    steps.after(f"cuGreenCtxDestroy after the releases: {destroy_after}")
    steps.rec.add("summary", "green releases accepted", {"extra": extra, "refused": refused, "after_last": last,
                                                         "destroy_after": destroy_after})
    return steps.output()


def green_primary_reset(device: int) -> dict:
    """cuDevicePrimaryCtxReset while a green context is current with memory and a module in it; then use them."""
    held, steps, out = _green_steps("green-primary-reset", device)
    if out is not None:
        return out
    green = green_or_skip("green-primary-reset", device, steps.rec)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    known = 0x6EE2_7E5E
    drv.push(green.handle)
    ptr = drv.mem_alloc(8)
    drv.copy_to_device(ptr, struct.pack("<q", known))
    probe = ProbeModule.load()
    probe.write_global(7)
    held.pointer = ptr
    steps.after("green context current, with a cuMemAlloc and the probe module in it")
    reset = drv.outcome(drv.primary_reset, device)["status"]
    after = steps.after(f"cuDevicePrimaryCtxReset: {reset}")
    green_id = drv.outcome(drv.context_id, green.handle)

    def bumped() -> int:
        probe.add_to_global(1)
        drv.synchronize()
        return probe.read_global()

    old_data = checked(lambda: struct.unpack("<q", drv.copy_from_device(ptr, 8))[0], known)
    kernel = checked(bumped, 8)
    new_alloc = drv.outcome(drv.mem_alloc, 64)["status"]
    if drv.current().handle == green.handle:
        drv.outcome(drv.pop)
    destroy = drv.outcome(greens.destroy, green)["status"]
    held.pointer = None
    steps.after(f"cuGreenCtxDestroy: {destroy}")
    steps.rec.add("after", "green after primary reset",
                  {"reset": reset, "active_after": after["active"], "pointer_status": after.get("pointer_status"),
                   "green_id_after": green_id["value"] if green_id["ok"] else green_id["status"],
                   "old_data": old_data, "kernel": kernel, "new_alloc": new_alloc, "destroy": destroy})
    return steps.output()


def green_destroy_elsewhere(device: int) -> dict:
    """Thread A destroys a green context while it is current on thread B; B then calls into it."""
    held, steps, out = _green_steps("green-destroy-elsewhere", device)
    if out is not None:
        return out
    green = green_or_skip("green-destroy-elsewhere", device, steps.rec)
    if isinstance(green, dict):  # none here: why is recorded
        return green
    destroyed_while_current_elsewhere(steps, "green destroyed while current elsewhere",
                                      lambda _handle: greens.destroy(green), "cuGreenCtxDestroy",
                                      "B: pushed the green context", handle=green.handle)
    return steps.output()
