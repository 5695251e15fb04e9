"""What every lab does around its steps: the recorder bound to CUDA, child
scenarios, and the LabResult at the end."""

from __future__ import annotations

import datetime
import time
from typing import Callable, Sequence

from ctxlab.claims import Claim, judge
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

    def in_child(self, scenario: str, target: str, *args, timeout: float = 120.0, env: dict | None = None,
                 on_progress=None, fresh: bool = False, **kwargs) -> dict | None:
        """Run one scenario in its own process; its observations join this run.

        A crash, hang or exception there is recorded as an error of the
        scenario, with the child's output tail, and the lab goes on.
        """
        self.progress(f"{self.lab}: {scenario} ...")
        t = time.perf_counter()
        cap = self.options.get("scenario_timeout")  # ctxlab check --timeout
        timeout = min(timeout, cap) if cap else timeout
        try:
            env = {**(env or {}), **({"CTXLAB_TRACE": "1"} if self.options.get("trace") else {})}
            out = run_isolated(target, *args, timeout=timeout, env=env, on_progress=on_progress, fresh=fresh,
                               **kwargs)
        except IsolatedFailure as failure:
            self.errors.append({"scenario": scenario, **failure.to_dict()})
            self.progress(f"{self.lab}: {scenario} {failure.kind}: {failure.message}")
            return None
        self.observations.extend(out.get("observations", ()))
        self.metrics.update(out.get("metrics", {}))
        self.progress(f"{self.lab}: {scenario} done in {time.perf_counter() - t:.2f} s")
        return out

    def finish(self, environment: dict, claims: Sequence[Claim]) -> LabResult:
        return LabResult(lab=self.lab, started=self.started, seconds=time.perf_counter() - self.t0,
                         environment=environment, options=self.options,
                         observations=tuple(self.observations), claims=judge(claims, self.observations),
                         errors=tuple(self.errors), metrics=self.metrics)


def scenario_output(recorder: Recorder, metrics: dict | None = None) -> dict:
    """What a child scenario hands back to the parent."""
    return {"observations": recorder.observations, "metrics": metrics or {}}


def capture_environment(device: int) -> dict:
    """The environment, read in a child so the parent never initialises CUDA."""
    return run_isolated("ctxlab.cuda.environment:capture", device, timeout=60)
