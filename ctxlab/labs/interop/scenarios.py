"""interop's scenarios of areas 1 to 3 (each library alone, its references, all together), each run in a child,
and the lab's list of all its scenarios for given options."""

from __future__ import annotations

import signal
import threading

from ctxlab.cuda import driver as drv
from ctxlab.cuda.environment import init_driver
from ctxlab.cuda.outcome import status_name
from ctxlab.harness.recorder import Recorder
from ctxlab.lab import Isolation, LabOptions, Scenario
from ctxlab.labs.common import context_state, cuda_recorder, scenario_output, skipped_output
from ctxlab.labs.interop import blast, libs, memory, under
from ctxlab.labs.interop.claims import PAIRS, _exchange_name
from ctxlab.labs.interop.exchange import exchange
from ctxlab.labs.interop.fork import fork, start_methods
from ctxlab.labs.interop.libs import Missing, init_library, owner_context, primary_of, thread_use, version_of
from ctxlab.labs.interop.names import ENV, LIBRARIES


def _initialised(scenario: str, lib: str, device: int, state_before: bool = False) -> tuple[Recorder, dict, dict]:
    """One library in a fresh interpreter, the prologue of ``alone`` and ``refs``: the scenario's recorder, what
    ``init_library`` made, and (with ``state_before``) the context state just before it, else ``{}``. Raises
    ``Missing`` for a library that is not installed or cannot start here."""
    libs.require(lib)
    init_driver()
    rec = cuda_recorder(scenario)
    before = context_state(device) if state_before else {}
    return rec, init_library(lib, device), before


def alone(device: int, lib: str) -> dict:
    """One library in a fresh interpreter: the context it leaves current, its allocation, a fresh thread's use."""
    scenario = f"alone-{lib}"
    try:
        rec, made, before = _initialised(scenario, lib, device, state_before=True)
    except Missing as why:
        return skipped_output(scenario, why.skip)
    cur = drv.current()
    primary, primary_id = primary_of(device)
    owner = owner_context(made["pointer"])
    rec.add("init", "library context",
            {"library": lib, "version": version_of(lib), "call": made["call"], "active_before": before["active"],
             "current_before": before["current"], "current": cur.handle, "current_id": cur.id, "primary": primary,
             "primary_id": primary_id, "pointer": made["pointer"], "pointer_context": owner,
             "pointer_context_id": drv.outcome(drv.context_id, owner).get("value") if owner else None,
             "reported": made.get("reported")})
    out: dict = {}

    def fresh() -> None:
        out["current_before"] = drv.current().handle
        try:
            out["keep"] = thread_use(lib, device, out)
        except Exception as exc:  # what the library said, by name: the outcome of this thread's first use
            out["outcome"] = status_name(exc)[:300]
        after = drv.current()
        out["current_after"], out["current_after_id"] = after.handle, after.id
        out["pointer_context"] = owner_context(out.get("pointer"))

    worker = threading.Thread(target=fresh, name="fresh-thread")
    worker.start()
    worker.join(60)
    rec.add("fresh thread", "fresh thread",
            {"library": lib, "call": out.get("call", "(none)"), "outcome": out.get("outcome", "did not finish"),
             "current_before": out.get("current_before"), "current_after": out.get("current_after"),
             "current_after_id": out.get("current_after_id"), "primary": primary,
             "pointer_context": out.get("pointer_context"), "before_set_current": out.get("before_set_current")},
            context=(out.get("current_after"), out.get("current_after_id")))
    return scenario_output(rec)


def _count_references(device: int, rec, extra_fields: dict) -> None:
    """Release the primary context until the driver refuses: the releases accepted are the references held."""
    # The libraries' own teardown at exit meets a destroyed context: whatever it does after the result is sent,
    # the process ends within 20 s.
    signal.alarm(20)
    extra, refused, trail = 0, None, []
    for _ in range(16):
        status = drv.outcome(drv.primary_release, device)["status"]
        state = context_state(device, with_primary=False)
        trail.append(bool(state["active"]))
        if status != "CUDA_SUCCESS":
            refused = status
            break
        extra += 1
    rec.add("count", "references", {**extra_fields, "extra": extra, "refused": refused, "active_trail": trail,
                                    "inactive_after": not trail[-1] if trail else None}, context=(None, None))


def refs(device: int, lib: str) -> dict:
    """One library in a fresh interpreter: initialise it, then count the primary-context references it holds."""
    scenario = f"refs-{lib}"
    try:
        rec, made, _ = _initialised(scenario, lib, device)
    except Missing as why:
        return skipped_output(scenario, why.skip)
    rec.add("init", "initialised", {"library": lib, "version": version_of(lib), "call": made["call"]})
    _count_references(device, rec, {"library": lib, "version": version_of(lib)})
    return scenario_output(rec)


def together(device: int) -> dict:
    """Every library present, in one fresh interpreter, one after the other: the context each leaves current."""
    init_driver()
    rec = cuda_recorder("together")
    kept, loaded = [], []
    for lib in LIBRARIES:
        try:
            libs.require(lib)
            made = init_library(lib, device)
        except Missing as why:
            rec.add(lib, "together", {"library": lib, "present": False, "reason": str(why), "skip": why.skip})
            continue
        kept.append(made["keep"])
        loaded.append(lib)
        cur = drv.current()
        primary, primary_id = primary_of(device)
        owner = owner_context(made["pointer"])
        rec.add(lib, "together", {"library": lib, "present": True, "version": version_of(lib), "current": cur.handle,
                                  "current_id": cur.id, "primary": primary, "primary_id": primary_id,
                                  "pointer_context": owner,
                                  "pointer_context_id": drv.outcome(drv.context_id, owner).get("value")
                                  if owner else None})
    _count_references(device, rec, {"loaded": loaded})
    return scenario_output(rec)


def scenarios(options: LabOptions) -> list[Scenario]:
    """Each library alone and counted in fresh interpreters, all together, the exchanges, fork, then areas 4 to 7
    (under another context, blast radius, IPC and memory of no context)."""
    device = options.device
    out = [Scenario(f"alone-{lib}", alone, (device, lib), isolation=Isolation.FRESH, env=ENV)
           for lib in LIBRARIES]
    # Counting references releases the primary context to zero under live libraries: undefined behaviour
    # (on the H200 JAX's process once died by SIGSEGV there), so these repeat and a crash is an outcome.
    out += [Scenario(f"refs-{lib}", refs, (device, lib), isolation=Isolation.FRESH, env=ENV, undefined=True)
            for lib in LIBRARIES]
    out.append(Scenario("together", together, (device,), isolation=Isolation.FRESH, env=ENV,
                        undefined=True))
    # The exchanges share one child (harness.batch): each starts its two libraries (or finds them started) on
    # the primary context and leaves them so; none needs a fresh process.
    out += [Scenario(_exchange_name(p, c), exchange, (device, p, c, how), env=ENV,
                     isolation=Isolation.SHARED) for p, c, how in PAIRS]
    out += [Scenario("fork", fork, (device,), undefined=True, timeout=90, env=ENV),
            Scenario("start-methods", start_methods, (device,), undefined=True, timeout=180, env=ENV)]
    out += under.area_scenarios(device) + blast.area_scenarios(device) + memory.area_scenarios(device)
    return out
