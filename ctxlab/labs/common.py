"""What every lab does around its steps: the recorder bound to CUDA, child
scenarios, and the LabResult at the end."""

from __future__ import annotations

import datetime
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Sequence

from ctxlab.claims import Claim, judge
from ctxlab.harness.gpu_lock import GPU, SLOTS
from ctxlab.harness.isolate import IsolatedFailure, run_isolated
from ctxlab.harness.recorder import Recorder
from ctxlab.record import LabResult, Observation


def cuda_recorder(scenario: str | None = None) -> Recorder:
    """A recorder that stamps each observation with this thread's current context."""
    from ctxlab.cuda import driver as drv
    from ctxlab.trace import start_for_child, summarize

    def probe():
        view = drv.current()
        return (view.handle or None, view.id)

    return Recorder(context_probe=probe, scenario=scenario, tracer=start_for_child(), summarize=summarize)


class Scenario(NamedTuple):
    """One isolated scenario of a lab: ``module:function`` called with ``args`` in a child."""

    name: str
    target: str
    args: tuple = ()
    kwargs: dict = {}
    timeout: float = 120.0
    env: dict | None = None
    fresh: bool = False  # a new interpreter with nothing imported (else the preloaded forkserver)
    exclusive: bool = False  # needs the GPU alone (device-wide memory readings, timings)
    on_progress: Callable | None = None


class LabRun:
    """Collects a lab's observations, figures and child-process errors, then judges."""

    def __init__(self, lab: str, options: dict, progress: Callable[[str], None] | None = None):
        self.lab = lab
        self.options = options
        self.progress = progress or (lambda message: None)
        self.started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.t0 = time.perf_counter()
        self.observations: list[Observation] = []
        self.metrics: dict = {}
        self.errors: list[dict] = []
        self.scenario_seconds: dict[str, float] = {}  # each child's wall time, for the check timings

    def run_all(self, scenarios: Sequence[Scenario]) -> None:
        """Run the scenarios side by side, each in its own process (exclusive ones alone);
        their observations join this run in the order given."""
        jobs = max(1, int(self.options.get("jobs") or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=min(jobs, len(scenarios) or 1)) as pool:
            outputs = list(pool.map(self._one, scenarios))
        for scenario, (out, seconds) in zip(scenarios, outputs):
            self.scenario_seconds[scenario.name] = round(seconds, 3)
            if isinstance(out, dict):
                self.observations.extend(out.get("observations", ()))
                self.metrics.update(out.get("metrics", {}))
            else:
                self.errors.append({"scenario": scenario.name, **out.to_dict()})

    def _one(self, sc: Scenario):
        """A crash, hang or exception in the child becomes an error of the scenario; the lab goes on."""
        cap = self.options.get("scenario_timeout")  # ctxlab check --timeout
        timeout = min(sc.timeout, cap) if cap else sc.timeout
        env = {**(sc.env or {}), **({"CTXLAB_TRACE": "1"} if self.options.get("trace") else {})}
        with GPU.hold(sc.exclusive), SLOTS:
            t = time.perf_counter()
            try:
                out = run_isolated(sc.target, *sc.args, timeout=timeout, env=env, on_progress=sc.on_progress,
                                   fresh=sc.fresh, **sc.kwargs)
            except IsolatedFailure as failure:
                self.progress(f"{self.lab}: {sc.name} {failure.kind}: {failure.message}")
                return failure, time.perf_counter() - t
        seconds = time.perf_counter() - t
        self.progress(f"{self.lab}: {sc.name} done in {seconds:.2f} s")
        return out, seconds

    def finish(self, environment: dict, claims: Sequence[Claim]) -> LabResult:
        return LabResult(lab=self.lab, started=self.started, seconds=time.perf_counter() - self.t0,
                         environment=environment, options=self.options,
                         observations=tuple(self.observations), claims=judge(claims, self.observations),
                         errors=tuple(self.errors), metrics=self.metrics,
                         timings=dict(self.scenario_seconds))


def context_state(device: int, with_primary: bool = True) -> dict:
    """The calling thread's current context and the device's primary context, read without changing them.

    Each read is an ``outcome``: after a sticky error or a destroyed context the
    state is still recorded. The primary handle is read only while it is active:
    retaining an inactive primary context would create it.
    """
    from ctxlab.cuda import driver as drv

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


def capture_environment(device: int) -> dict:
    """The environment, read in a child so the parent never initialises CUDA."""
    return run_isolated("ctxlab.cuda.environment:capture", device, timeout=60)
