"""The one run path: a lab's scenarios in child processes, repeats, then the verdicts.

Used by ``ctxlab.run``, ``ctxlab check`` and every lab command, in three parts:
``plan`` (the child processes a lab needs), ``execute`` (one child, under the
GPU lock and a slot, timed), ``assemble`` (observations, errors and verdicts).
``harness.pool`` runs the jobs of every planned lab in one pool: ``run_plans``
for ``ctxlab check``, ``run_lab`` (a check of one plan) for ``ctxlab.run`` and
the lab commands.

A scenario in undefined-behaviour territory runs ``options.repeats`` times, each
in a fresh process; its observations carry the repeat index, and one repeat
that crashes is an outcome of the distribution, not a lab error, as long as
another repeat answered.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

from ctxlab.claim import judge
from ctxlab.harness.batch import Item, run_batch
from ctxlab.harness.gpu_lock import GPU, SLOTS
from ctxlab.harness.isolate import ChildUsage, IsolatedFailure, run_isolated
from ctxlab.lab import Isolation, Lab, LabOptions, Scenario
from ctxlab.levels import FULL
from ctxlab.records.model import LabResult, Observation
from ctxlab.records.schema import SILENT_WRONG
from ctxlab.version import __version__

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

    @property
    def gpu_alone(self) -> bool:
        """It needs the GPU to itself (its figures read device-wide state)."""
        return self.scenario.isolation is Isolation.GPU_ALONE


@dataclasses.dataclass(frozen=True)
class JobResult:
    """What one child gave back (its value, or how it failed), and when it queued, started and ended."""

    out: dict | IsolatedFailure
    queued: float  # perf_counter seconds
    started: float  # after the GPU lock and a slot were held
    ended: float
    usage: ChildUsage | None = None  # None when the child died before it answered
    rerun: str | None = None  # why it ran in a fresh child after its shared child stopped

    @property
    def seconds(self) -> float:
        """The child's own wall time."""
        return self.ended - self.started


@dataclasses.dataclass
class LabPlan:
    """A lab about to run: its options, scenarios and jobs, and when it began."""

    lab: Lab
    options: LabOptions
    scenarios: list[Scenario]
    jobs: list[Job]
    started: str = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"))
    t0: float = dataclasses.field(default_factory=time.perf_counter)


@dataclasses.dataclass(frozen=True)
class Unit:
    """What one child runs: one job, or several SHARED jobs one after another (their indices in the plan).

    ``rerun``: why a job runs alone after the shared child it was planned in stopped early."""

    indices: tuple[int, ...]
    rerun: str | None = None


def units(planned: LabPlan) -> list[Unit]:
    """The plan's jobs by child: SHARED scenarios of one environment together (not with ``--isolation each``,
    nor traced: a trace is one scenario's), every other job alone."""
    options = planned.options
    groups: dict[tuple, list[int]] = {}
    out: list[Unit] = []
    for index, job in enumerate(planned.jobs):
        sc = job.scenario
        if (sc.isolation is Isolation.SHARED and job.repeat is None and options.isolation == "batched"
                and not options.trace):
            groups.setdefault(tuple(sorted(sc.env.items(), key=str)), []).append(index)
        else:
            out.append(Unit((index,)))
    return [Unit(tuple(g)) for g in groups.values()] + out


def jobs_for(scenarios: list[Scenario], repeats: int) -> list[Job]:
    """Every child process to start: undefined-behaviour scenarios once per repeat."""
    return [Job(s, r) for s in scenarios for r in (range(repeats) if s.undefined else (None,))]


def scenarios_at_level(lab: Lab, scenarios: list[Scenario], level: int) -> list[Scenario]:
    """The scenarios a run at ``level`` needs: those of the claims it judges (all of them at the full level)."""
    if level >= FULL:
        return scenarios
    needed = {name for claim in lab.claims if claim.lowest_level <= level for name in claim.scenarios}
    return [s for s in scenarios if s.name in needed]


def plan(lab: Lab, options: LabOptions) -> LabPlan:
    """The child processes ``lab`` needs with these options (at their level: ``ctxlab.levels``)."""
    scenarios = scenarios_at_level(lab, lab.scenarios(options), options.level)
    return LabPlan(lab, options, scenarios, jobs_for(scenarios, options.runs_per_scenario))


def environment_of(device: int) -> dict:
    """The environment block, read in a child so this process never initialises CUDA."""
    try:
        return run_isolated("ctxlab.cuda.environment:capture", device, timeout=60)
    except IsolatedFailure as failure:  # the lab still runs; its record says why the environment is unknown
        return {"device": device, "unknown": f"{failure.kind}: {failure.message}"}


def _timeout(sc: Scenario, options: LabOptions) -> float:
    return min(sc.timeout, options.scenario_timeout) if options.scenario_timeout else sc.timeout


def _env(sc: Scenario, options: LabOptions) -> dict:
    return {**sc.env, **({"CTXLAB_TRACE": "1"} if options.trace else {})}


def execute_unit(planned: LabPlan, unit: Unit, say: Progress,
                 on_progress: ScenarioProgress | None = None) -> tuple[list[tuple[int, JobResult]], list[Unit]]:
    """Run one unit: (job index, result) for each job that ran, and the units still to run: when a shared
    child stops early (its check failed, a scenario crashed or hung), that job and the rest of its batch,
    each alone in a fresh child, noted why (the caller runs them beside the others)."""
    lab, options = planned.lab.name, planned.options
    jobs = [planned.jobs[i] for i in unit.indices]
    if len(jobs) == 1:
        result = execute(lab, jobs[0], options, say, on_progress)
        return [(unit.indices[0], dataclasses.replace(result, rerun=unit.rerun) if unit.rerun else result)], []
    items = [Item(j.scenario.target, j.scenario.args, dict(j.scenario.kwargs), _timeout(j.scenario, options))
             for j in jobs]
    queued = time.perf_counter()
    with GPU.hold(False), SLOTS:
        run = run_batch(items, _env(jobs[0].scenario, options), planned.lab.clean_check)
    out = [(unit.indices[r.index], JobResult(r.out, queued, r.started, r.ended, r.usage)) for r in run.ran]
    for r in run.ran:
        say(f"{lab}: {jobs[r.index].label} " + (f"{r.out.kind}: {r.out.message}" if isinstance(r.out, IsolatedFailure)
                                                 else f"done in {r.ended - r.started:.2f} s (shared child)"))
    if run.stopped is None:
        return out, []
    at, why = run.stopped
    say(f"{lab}: the shared child stopped before {jobs[at].label} ({why}); {len(jobs) - at} scenario(s) re-run in "
        "fresh children")
    return out, [Unit((index,), why) for index in unit.indices[at:]]


def execute(lab: str, job: Job, options: LabOptions, say: Progress,
            on_progress: ScenarioProgress | None = None) -> JobResult:
    """One child; a crash, hang or exception there becomes that job's failure and the lab goes on."""
    sc = job.scenario
    timeout, env = _timeout(sc, options), _env(sc, options)
    queued = time.perf_counter()
    usage: list[ChildUsage] = []
    with GPU.hold(job.gpu_alone), SLOTS:
        started = time.perf_counter()
        try:
            out: dict | IsolatedFailure = run_isolated(
                sc.target, *sc.args, timeout=timeout, env=env,
                on_progress=on_progress if sc.reports_progress else None,
                fresh=sc.isolation is Isolation.FRESH, on_usage=usage.append, **sc.kwargs)
        except IsolatedFailure as failure:
            out = failure
        ended = time.perf_counter()
    if isinstance(out, IsolatedFailure):
        say(f"{lab}: {job.label} {out.kind}: {out.message}")
    else:
        say(f"{lab}: {job.label} done in {ended - started:.2f} s")
    return JobResult(out, queued, started, ended, usage[0] if usage else None)


def isolation_record(planned: LabPlan, results: list[JobResult]) -> dict:
    """How the jobs were isolated, for the result: the shared children's scenarios and every re-run."""
    shared = [[planned.jobs[i].label for i in unit.indices] for unit in units(planned) if len(unit.indices) > 1]
    reruns = [{"scenario": job.label, "why": result.rerun}
              for job, result in zip(planned.jobs, results, strict=True) if result.rerun]
    return {"mode": planned.options.isolation, "shared_children": shared, "re_run_fresh": reruns}


def assemble(planned: LabPlan, environment: dict, results: list[JobResult]) -> LabResult:
    """The lab's result from its jobs' results (in the order of ``planned.jobs``)."""
    observations: list[Observation] = []
    metrics: dict = {}
    errors: list[dict] = []
    timings: dict[str, float] = {}
    done = list(zip(planned.jobs, results, strict=True))
    for scenario in planned.scenarios:
        mine = [(job, result.out, result.seconds) for job, result in done if job.scenario is scenario]
        timings[scenario.name] = round(sum(seconds for _, _, seconds in mine), 3)
        answered = any(isinstance(out, dict) for _, out, _ in mine)
        for job, out, _ in mine:
            if isinstance(out, dict):
                observations.extend(_tagged(out.get("observations", ()), job.repeat))
                metrics.update(out.get("metrics", {}))
            elif job.repeat is not None and answered:  # one repeat broke: an outcome, recorded as such
                observations.append(Observation(step="child", thread="-", context_id=None, what="repeat broke",
                                                value=out.to_dict(), scenario=scenario.name, repeat=job.repeat))
            else:
                errors.append({"scenario": job.label, **out.to_dict()})
    ran = [s.name for s in planned.scenarios]
    lab = planned.lab
    environment = {**environment, "ctxlab": __version__}  # which judges gave these verdicts
    # Each skip is checked against the run's own environment record and the GPUs the lab needs.
    claims = judge(lab.claims, observations, ran, planned.options.level, environment=environment, gpus=lab.gpus)
    return LabResult(lab=lab.name, started=planned.started, seconds=time.perf_counter() - planned.t0,
                     environment=environment, options=planned.options.to_dict(), observations=tuple(observations),
                     claims=claims, errors=tuple(errors),
                     metrics=metrics,
                     timings=timings, views=dict(lab.views), flags=tuple(silent_wrong_flags(observations)),
                     isolation=isolation_record(planned, results))


def _tagged(observations: Any, repeat: int | None) -> list[Observation]:
    if repeat is None:
        return list(observations)
    return [dataclasses.replace(o, repeat=repeat) for o in observations]


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
