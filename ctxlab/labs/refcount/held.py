"""What refcount's scenarios hold in a child (the lab's retains, the pointer it watches) and the steps they share."""

from __future__ import annotations

from collections.abc import Callable

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.outcome import checked
from ctxlab.harness.threads import Choreography, Step
from ctxlab.labs.common import StepRecorder, context_state
from ctxlab.labs.refcount.claims import KNOWN


class Held:
    """What the lab holds in a child: its retains of the primary context and the pointer whose validity it watches."""

    def __init__(self, device: int):
        self.device = device
        self.retains = 0
        self.pointer: int | None = None

    def probe(self, events: list) -> dict:
        """The step table's row: the thread's context and the primary state, the lab's retains, the pointer."""
        # No retain to read the primary handle here: this lab counts retains.
        value = {**context_state(self.device, with_primary=False), "lab_retains": self.retains}
        if self.pointer is not None:
            ptr = drv.outcome(drv.pointer_context, self.pointer)
            value["pointer_valid"] = ptr["ok"]
            value["pointer_status"] = ptr["status"]
        return value

    def retain(self) -> int:
        """cuDevicePrimaryCtxRetain, counted."""
        handle = drv.primary_retain(self.device)
        self.retains += 1
        return handle

    def release(self) -> str:
        """cuDevicePrimaryCtxRelease, counted when it succeeds; its status name."""
        out = drv.outcome(drv.primary_release, self.device)
        if out["ok"]:
            self.retains -= 1
        return out["status"]


def steps_of(scenario: str, held: Held):
    """The step recorder of a scenario: one "state" observation after each step."""
    return StepRecorder(scenario, "state", held.probe)


def known_array():
    """A CuPy array whose reduction is checked after each step, and its right sum."""
    import cupy

    a = cupy.arange(KNOWN, dtype=cupy.int64) * 3 + 1
    return a, 3 * KNOWN * (KNOWN - 1) // 2 + KNOWN


def small_sum() -> int:
    """A new CuPy allocation and kernel; its right answer is SMALL_SUM."""
    import cupy

    return int((cupy.arange(10) + 1).sum())


def release_past_zero(held: Held, steps, a, expected) -> tuple[int, str | None, dict | None]:
    """Release beyond the lab's retains until the driver refuses: (accepted, the refusal, the state after)."""
    extra, refused, last = 0, None, None
    for _ in range(8):
        status = held.release()
        last = steps.after(f"release beyond the lab's retains (#{extra + 1}): {status}")
        if status != "CUDA_SUCCESS":
            refused = status
            break
        extra += 1
        if last["active"] and a is not None:
            steps.rec.add("check", "reduction while still active",
                          {"sum": checked(lambda: int(a.sum()), expected), "expected": expected})
    return extra, refused, last


def destroyed_while_current_elsewhere(steps, what: str, destroy: Callable[[int], object], destroy_call: str,
                                      pushed: str, make: Callable[[], int] | None = None,
                                      handle: int | None = None) -> None:
    """Thread A destroys a context while it is current on thread B; B then calls into it (its current context,
    cuCtxSynchronize, cuMemAlloc), recorded as ``what``. The context is ``handle``, or the one ``make`` makes on
    A (left current on no thread); ``destroy(handle)`` destroys it, the step named ``A: <destroy_call>: STATUS``,
    B's push named ``pushed``."""
    driver = init_driver()
    s: dict = {}

    def b_push(c):
        drv.push(c)
        steps.after(pushed)
        return c

    def a_destroy(c):
        s["destroy"] = drv.outcome(destroy, c)["status"]
        steps.after(f"A: {destroy_call}: {s['destroy']}")
        return c

    def b_next(c):
        cur = drv.outcome(drv.current)
        sync = drv.raw_status(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        alloc = drv.outcome(drv.mem_alloc, 64)["status"]
        steps.rec.add("B next", what, {"destroy": s["destroy"], "handle": c,
                                       "current_after": cur["value"].handle if cur["ok"] else 0,
                                       "synchronize": sync, "alloc": alloc})
        return c

    plan = [Step("B", "push", b_push), Step("A", "destroy", a_destroy), Step("B", "next", b_next)]
    if make is not None:
        plan.insert(0, Step("A", "make", lambda _: make()))
    Choreography(["A", "B"], timeout=60).run(plan, handle)
