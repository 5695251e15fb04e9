"""Every lab's child processes in one pool: what ``ctxlab check`` runs.

All jobs of all planned labs share one pool: the cores, at most 8 by default
(the driver makes contexts one process at a time: see ``gpu_lock``). The
jobs that need the GPU alone go first, back to back (each holds the GPU
exclusively, so they are a serial chain whatever the order: started first, they
never wait for shared jobs to drain); then the others, longest first when their
durations are known from a baseline run. A lab's result is assembled, and
reported, as soon as its last job ends. The schedule (when each job queued,
started and ended) is what ``check --profile`` prints.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ctxlab.harness.gpu_lock import default_children
from ctxlab.harness.runner import (
    Job,
    JobResult,
    LabPlan,
    Progress,
    ScenarioProgress,
    Unit,
    assemble,
    environment_of,
    execute_unit,
    plan,
    units,
)
from ctxlab.lab import Lab, LabOptions
from ctxlab.records.model import LabResult


@dataclasses.dataclass(frozen=True)
class Slot:
    """One child of one lab's plan, as scheduled: one job, or several shared ones (``harness.batch``)."""

    plan: LabPlan
    unit: Unit

    @property
    def job(self) -> Job:
        """Its first job (for a single job, the job)."""
        return self.plan.jobs[self.unit.indices[0]]

    @property
    def jobs(self) -> list[Job]:
        """Every job it runs."""
        return [self.plan.jobs[i] for i in self.unit.indices]


@dataclasses.dataclass(frozen=True)
class Scheduled:
    """A job of the schedule, when it ran (seconds from the start of the pool) and what it waited for."""

    lab: str
    device: int
    job: str
    gpu_alone: bool
    queued: float
    started: float
    ended: float
    entered: float | None = None  # when the child began running its scenario (None: it died first)
    cpu: float | None = None  # the child's CPU seconds, user + system
    child: tuple | None = None  # (shared child, job): jobs with the same first value ran in one child

    @property
    def waited(self) -> float:
        """Seconds from being scheduled to running: waiting for a worker, the GPU lock and a slot."""
        return self.started - self.queued

    @property
    def spawn(self) -> float | None:
        """Seconds from starting the child to its first line of work: the fork (or a spawned interpreter's
        start-up) and unpickling the call; the scenario module's own imports come after and count as its time."""
        return None if self.entered is None else max(0.0, self.entered - self.started)


def estimate(slot: Slot, durations: dict[tuple[str, str], float]) -> float:
    """A child's expected seconds: its scenarios' recorded times, each divided over its repeats (0 when
    unknown)."""
    total = 0.0
    for mine in slot.jobs:
        runs = sum(1 for job in slot.plan.jobs if job.scenario is mine.scenario)
        total += durations.get((slot.plan.lab.name, mine.scenario.name), 0.0) / max(1, runs)
    return total


def order(plans: list[LabPlan], durations: dict[tuple[str, str], float] | None = None) -> list[Slot]:
    """GPU-alone jobs first, then the rest; each group longest first (shared children, which run several
    scenarios, then the declared order where unknown)."""
    durations = durations or {}
    slots = [Slot(p, u) for p in plans for u in units(p)]
    return sorted(slots, key=lambda s: (not s.job.gpu_alone, -estimate(s, durations), -len(s.unit.indices)))


def run_lab(lab: Lab, options: LabOptions, progress: Progress | None = None,
            on_progress: ScenarioProgress | None = None) -> LabResult:
    """Run every scenario of ``lab`` for ``options`` and judge its claims: a check of one plan."""
    return run_planned(plan(lab, options), progress, on_progress)


def run_planned(planned: LabPlan, progress: Progress | None = None,
                on_progress: ScenarioProgress | None = None) -> LabResult:
    """Run a planned lab (all of ``plan``'s jobs, or a part of them) and judge its claims."""
    (result,) = run_plans([planned], width=planned.options.jobs, say=progress, on_progress=on_progress)
    return result


def run_plans(plans: list[LabPlan], width: int | None = None, durations: dict[tuple[str, str], float] | None = None,
              on_result: Callable[[LabResult], None] | None = None,
              schedule: list[Scheduled] | None = None, say: Progress | None = None,
              on_progress: ScenarioProgress | None = None) -> list[LabResult]:
    """Run every job of every plan in one pool; one LabResult per plan, in the plans' order: the one run path
    of ``ctxlab check``, ``ctxlab.run`` and the lab commands.

    ``schedule``, when given, receives one entry per job as it ends; ``say`` a line per scenario as it ends;
    ``on_progress(done, total)`` what a scenario that reports progress (migrate's relay) says.
    """
    tell = say or (lambda message: None)
    t0 = time.perf_counter()
    devices = sorted({p.options.device for p in plans})
    width = max(1, width or default_children())
    results: dict[int, list[JobResult | None]] = {id(p): [None] * len(p.jobs) for p in plans}
    left = {id(p): len(p.jobs) for p in plans}
    done: dict[int, LabResult] = {}
    lock = threading.Lock()
    with ThreadPoolExecutor(max_workers=width) as pool:
        # The environment is read once per GPU, in a child, while the jobs start.
        environments = {d: pool.submit(environment_of, d) for d in devices}

        def finish(plan: LabPlan) -> None:
            result = assemble(plan, environments[plan.options.device].result(),
                              [r for r in results[id(plan)] if r is not None])
            done[id(plan)] = result
            if on_result:
                on_result(result)

        futures: list = []

        def run(slot: Slot, submitted: float) -> None:
            ran, more = execute_unit(slot.plan, slot.unit, tell, on_progress)
            shared = len(slot.unit.indices) > 1
            with lock:
                for unit in more:  # a shared child stopped early: the rest run alone, beside the others
                    futures.append(pool.submit(run, Slot(slot.plan, unit), time.perf_counter()))
                for index, result in ran:
                    results[id(slot.plan)][index] = result
                    left[id(slot.plan)] -= 1
                    job = slot.plan.jobs[index]
                    if schedule is not None:
                        usage = result.usage
                        note = " (fresh: its shared child stopped)" if result.rerun else " [shared child]" * shared
                        schedule.append(Scheduled(slot.plan.lab.name, slot.plan.options.device, job.label + note,
                                                  job.gpu_alone, submitted - t0, result.started - t0,
                                                  result.ended - t0, usage.entered - t0 if usage else None,
                                                  usage.cpu if usage else None, child=(id(slot), index)
                                                  if shared else None))
                last = left[id(slot.plan)] == 0
            if last:
                finish(slot.plan)

        for plan in plans:
            if not plan.jobs:
                finish(plan)
        with lock:
            futures += [pool.submit(run, slot, time.perf_counter()) for slot in order(plans, durations)]
        while True:  # re-runs are added while the first ones run
            with lock:
                pending = [f for f in futures if not f.done()] or [f for f in futures if f.exception()]
                if not pending:
                    break
            pending[0].result()  # a bug in the pool itself surfaces here, not silently
    return [done[id(p)] for p in plans]


def critical_path(schedule: list[Scheduled]) -> list[Scheduled]:
    """The chain that decided the wall time: from the last job to end, back through the job that ended
    just before it started (what it waited for), to the start."""
    if not schedule:
        return []
    chain = [max(schedule, key=lambda s: s.ended)]
    while True:
        before = [s for s in schedule if s.ended <= chain[-1].started + 1e-6 and s is not chain[-1]]
        if not before or chain[-1].waited < 0.01:
            break
        chain.append(max(before, key=lambda s: s.ended))
    return list(reversed(chain))
