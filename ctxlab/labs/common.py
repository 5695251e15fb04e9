"""What scenarios share inside their child processes: the recorder bound to
CUDA, the thread's context state, what a scenario hands back, a green context
or the reason there is none, and the environment read in a child."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxlab.cuda import driver as drv
from ctxlab.cuda import green as greens
from ctxlab.harness.isolate import run_isolated
from ctxlab.harness.recorder import Recorder
from ctxlab.records import skips
from ctxlab.records.skips import Skip
from ctxlab.tracing.calls import summarize
from ctxlab.tracing.tracer import start_for_child


def cuda_recorder(scenario: str | None = None, tracer: Any = None) -> Recorder:
    """A recorder that stamps each observation with this thread's current context; its tracer is the
    one given, else the run's (--trace), else none."""

    def probe():
        view = drv.current()
        return (view.handle or None, view.id)

    return Recorder(context_probe=probe, scenario=scenario, tracer=tracer or start_for_child(), summarize=summarize)


def context_state(device: int, with_primary: bool = True) -> dict:
    """The calling thread's current context and the device's primary context, read without changing them.

    Each read is an ``outcome``: after a sticky error or a destroyed context the
    state is still recorded. The primary handle is read only while it is active:
    retaining an inactive primary context would create it.
    """
    cur = drv.outcome(drv.current)
    st = drv.outcome(drv.primary_state, device)
    state = {"current": cur["value"].handle if cur["ok"] else None,
             "current_id": cur["value"].id if cur["ok"] else None,
             "active": st["value"].active if st["ok"] else None,
             "flags": st["value"].flags if st["ok"] else None}
    if with_primary:
        state["primary"] = None
        if state["active"]:
            retained = drv.outcome(drv.primary_retain, device)
            if retained["ok"]:
                state["primary"] = retained["value"]
                drv.outcome(drv.primary_release, device)
    return state


def scenario_output(recorder: Recorder, metrics: dict | None = None) -> dict:
    """What a child scenario hands back to the parent."""
    return {"observations": recorder.observations, "metrics": metrics or {}}


def record_skip(rec: Recorder, why: Skip, step: str = "start") -> None:
    """Record that the scenario cannot run here: a ``skipped`` observation whose value is the structured reason
    (``ctxlab.records.skips``: its kind, its fields, the sentence), which its claims then carry. The one way a
    scenario records a skip: the reason's kind is what the run's environment record is checked against."""
    if not isinstance(why, dict) or why.get("kind") not in skips.KINDS or not str(why.get("why") or "").strip():
        raise TypeError(f"a skip is recorded with a structured reason (ctxlab.records.skips), not {why!r}")
    rec.add(step, "skipped", why, context=(None, None))


def skipped_output(scenario: str, why: Skip) -> dict:
    """A scenario that cannot run here: it records why (a structured reason, ``ctxlab.records.skips``), and its
    claims are ``skipped`` with that reason. No CUDA call is made (the reason may be that CUDA cannot do it here)."""
    rec = Recorder(scenario=scenario)
    record_skip(rec, why)
    return scenario_output(rec)


def green_or_skip(scenario: str, device: int, rec: Recorder | None = None) -> greens.GreenContext | dict:
    """The prologue of every scenario that needs a green context: the green context, or, where none can be made
    here, the scenario's output recording why (in ``rec`` when given, else in a recorder of its own that makes no
    CUDA call), so that its claims are ``skipped`` with that reason. Return it when it is a dict."""
    green, why = greens.make_or_reason(device)
    if green is not None:
        return green
    reason = skips.unsupported(why or "no green context can be made here")
    if rec is None:
        return skipped_output(scenario, reason)
    record_skip(rec, reason)
    return scenario_output(rec)


def capture_environment(device: int) -> dict:
    """The environment, read in a child so the parent never initialises CUDA."""
    return run_isolated("ctxlab.cuda.environment:capture", device, timeout=60)


class StepRecorder:
    """The one step recorder: after each step, the events it caused, then the state a probe reads.

    ``probe(events) -> dict`` reads the state after a step (the thread's context,
    the primary context, memory in use...); the events are taken first, so the
    probe's own calls are never counted as the step's. Every step becomes one
    observation of kind ``what`` whose value holds the step's name under ``label``.
    """

    def __init__(self, scenario: str, what: str, probe: Callable[[list], dict], label: str = "step",
                 rec: Recorder | None = None):
        self.rec = rec or cuda_recorder(scenario)
        self.what, self.probe, self.label = what, probe, label

    def after(self, step: str, events: list | None = None, **extra: Any) -> dict:
        """Record the state after ``step`` with ``extra`` fields; return the recorded value."""
        if events is None:
            events = self.rec.take_events()
        value = {self.label: step, **self.probe(events), **extra}
        # A probe that read the thread's context says so; otherwise the recorder reads it.
        context = (value["current"] or None, value.get("current_id")) if "current" in value else None
        self.rec.add(step, self.what, value, context=context, events=events)
        return value

    def output(self, metrics: dict | None = None) -> dict:
        """What the scenario hands back to the parent."""
        return scenario_output(self.rec, metrics)
