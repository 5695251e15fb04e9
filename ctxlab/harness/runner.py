"""The one run path: a lab's scenarios in child processes, repeats, then the verdicts.

Used by ``ctxlab.run``, ``ctxlab check`` and every lab command. Scenarios run
side by side, each in its own process (those that need the GPU alone take it
through ``harness.gpu_lock``). A scenario in undefined-behaviour territory runs
``options.repeats`` times, each in a fresh process; its observations carry the
repeat index, and one repeat that crashes is an outcome of the distribution,
not a lab error, as long as another repeat answered.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ctxlab.claim import judge
from ctxlab.harness.gpu_lock import GPU, SLOTS
from ctxlab.harness.isolate import IsolatedFailure, run_isolated
from ctxlab.lab import Isolation, Lab, LabOptions, Scenario
from ctxlab.record import SILENT_WRONG, LabResult, Observation

Progress = Callable[[str], None]
ScenarioProgress = Callable[[int, int], None]


@dataclasses.dataclass(frozen=True)
class Job:
    """One child process: a scenario, and which repeat it is (None for a scenario run once)."""

    scenario: Scenario
    repeat: int | None

    @property
    def label(self) -> str:
        """The scenario's name, with the repeat's number when it is one."""
        return self.scenario.name + (f" #{self.repeat + 1}" if self.repeat is not None else "")


def jobs_for(scenarios: list[Scenario], repeats: int) -> list[Job]:
    """Every child process to start: undefined-behaviour scenarios once per repeat."""
    return [Job(s, r) for s in scenarios for r in (range(repeats) if s.undefined else (None,))]


def run_lab(lab: Lab, options: LabOptions, progress: Progress | None = None,
            on_progress: ScenarioProgress | None = None) -> LabResult:
    """Run every scenario of ``lab`` for ``options`` and judge its claims over what they observed."""
    from ctxlab.labs.common import capture_environment

    say = progress or (lambda message: None)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        environment = capture_environment(options.device)
    except IsolatedFailure as failure:  # the lab still runs; its record says why the environment is unknown
        environment = {"device": options.device, "unknown": f"{failure.kind}: {failure.message}"}
    scenarios = lab.scenarios(options)
    jobs = jobs_for(scenarios, options.repeats)
    width = max(1, min(options.jobs or os.cpu_count() or 1, len(jobs) or 1))
    with ThreadPoolExecutor(max_workers=width) as pool:
        outputs = list(pool.map(lambda job: _run_job(lab.name, job, options, say, on_progress), jobs))
    observations: list[Observation] = []
    metrics: dict = {}
    errors: list[dict] = []
    timings: dict[str, float] = {}
    for scenario in scenarios:
        mine = [(job, out, seconds) for job, (out, seconds) in zip(jobs, outputs, strict=True)
                if job.scenario is scenario]
        timings[scenario.name] = round(sum(seconds for _, _, seconds in mine), 3)
        answered = [(job, out) for job, out, _ in mine if isinstance(out, dict)]
        for job, out, _ in mine:
            if isinstance(out, dict):
                observations.extend(_tagged(out.get("observations", ()), job.repeat))
                metrics.update(out.get("metrics", {}))
            elif job.repeat is not None and answered:  # one repeat broke: an outcome, recorded as such
                observations.append(Observation(step="child", thread="-", context_id=None, what="repeat broke",
                                                value=out.to_dict(), scenario=scenario.name, repeat=job.repeat))
            else:
                errors.append({"scenario": job.label, **out.to_dict()})
    ran = [s.name for s in scenarios]
    return LabResult(lab=lab.name, started=started, seconds=time.perf_counter() - t0, environment=environment,
                     options=options.to_dict(), observations=tuple(observations),
                     claims=judge(lab.claims, observations, ran), errors=tuple(errors), metrics=metrics,
                     timings=timings, views=dict(lab.views), flags=tuple(silent_wrong_flags(observations)))


def _tagged(observations: Any, repeat: int | None) -> list[Observation]:
    if repeat is None:
        return list(observations)
    return [dataclasses.replace(o, repeat=repeat) for o in observations]


def _run_job(lab: str, job: Job, options: LabOptions, say: Progress,
             on_progress: ScenarioProgress | None) -> tuple[dict | IsolatedFailure, float]:
    """One child; a crash, hang or exception there becomes that job's failure and the lab goes on."""
    sc = job.scenario
    timeout = min(sc.timeout, options.scenario_timeout) if options.scenario_timeout else sc.timeout
    env = {**sc.env, **({"CTXLAB_TRACE": "1"} if options.trace else {})}
    with GPU.hold(sc.isolation is Isolation.GPU_ALONE), SLOTS:
        t = time.perf_counter()
        try:
            out = run_isolated(sc.target, *sc.args, timeout=timeout, env=env,
                               on_progress=on_progress if sc.reports_progress else None,
                               fresh=sc.isolation is Isolation.FRESH, **sc.kwargs)
        except IsolatedFailure as failure:
            say(f"{lab}: {job.label} {failure.kind}: {failure.message}")
            return failure, time.perf_counter() - t
    seconds = time.perf_counter() - t
    say(f"{lab}: {job.label} done in {seconds:.2f} s")
    return out, seconds


def silent_wrong_flags(observations: list[Observation]) -> Iterator[dict]:
    """Every recorded outcome that is a wrong value returned without an error."""
    for o in observations:
        for path, text in _strings(o.value, o.what):
            if text.startswith(SILENT_WRONG):
                yield {"flag": SILENT_WRONG, "scenario": o.scenario, "repeat": o.repeat, "step": o.step,
                       "where": path, "outcome": text}


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")
