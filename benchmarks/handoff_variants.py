"""Ways to hand a verified step from one Python thread to the next, side by side.

    python benchmarks/handoff_variants.py [--handoffs N] [--threads 1,2,8,32] [--json FILE]

Every variant runs migrate's own verified relay (``Relay``: setup, every handoff
checked, the final values checked) on the device's primary context; only how
the next thread learns that its turn has come differs:

  spread        a queue per thread (Choreography); the step's end puts the baton in the next thread's queue;
                the threads run wherever the scheduler puts them
  one-core      the same, every relay thread pinned to one core (Choreography's one_core: migrate's default)
  two-cores     the same, the threads pinned alternately to two cores
  spin          every thread polls a shared turn counter, giving the CPU up (os.sched_yield, GIL released) between polls
  prewake-spin  only the next thread polls: it sleeps on its queue until nudged at the start of the step
                before its own, then polls the turn counter
Per variant and thread count: verified handoffs per second, and the mean time
inside a step against the time between steps (the hand-over). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence

from common import counts, positive, refuse_without_gpu

VARIANTS = ("spread", "one-core", "two-cores", "spin", "prewake-spin")


def _timed(action: Callable, inside: list, cores: list[int] | None) -> Callable:
    from ctxlab.harness.threads import pin_this_thread

    pinned = threading.local()

    def run(baton):
        if cores and not getattr(pinned, "done", False):  # this thread's first step: pin it (worker-N: N's core)
            core = cores[int(threading.current_thread().name.split("-")[-1]) % len(cores)]
            if not pin_this_thread(core):
                raise RuntimeError(f"this system refused to pin a thread to core {core}")
            pinned.done = True
        t = time.perf_counter()
        try:
            return action(baton)
        finally:
            inside[0] += time.perf_counter() - t
    return run


def run_polled(names: Sequence[str], steps: list, prewake: bool, timeout: float = 30.0):
    """Steps in order on their threads; a thread polls the turn counter (after a nudge, with ``prewake``)."""
    turn = [0]
    baton: list = [None]
    failure: list = []
    nudges: dict[str, queue.SimpleQueue] = {name: queue.SimpleQueue() for name in names}
    mine: dict[str, list[int]] = {name: [] for name in names}
    for index, step in enumerate(steps):
        mine[step.thread].append(index)

    def worker(name: str) -> None:
        for index in mine[name]:
            if prewake:
                nudges[name].get(timeout=timeout)
            deadline = time.monotonic() + timeout
            while turn[0] != index:
                if failure:
                    return
                os.sched_yield()  # releases the GIL
                if time.monotonic() > deadline:
                    failure.append(TimeoutError(f"{name} waited for step {index}"))
                    return
            if prewake and index + 1 < len(steps):
                nudges[steps[index + 1].thread].put(None)
            try:
                baton[0] = steps[index].action(baton[0])
            except BaseException as exc:
                failure.append(exc)
                return
            turn[0] = index + 1

    if prewake:
        nudges[steps[0].thread].put(None)
    threads = [threading.Thread(target=worker, args=(name,), name=name, daemon=True) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failure:
        raise failure[0]
    return baton[0]


def one(variant: str, threads: int, rounds: int) -> dict:
    from ctxlab.harness.threads import Choreography, Step, shared_core
    from ctxlab.labs.migrate import Relay
    from ctxlab.labs.migrate.claims import relay_lost

    relay = Relay(0, "primary", threads, rounds)
    inside = [0.0]
    steps = relay.steps()
    two = None
    if variant == "two-cores":  # the shared core and the next allowed one (main() runs it only with two or more)
        available = sorted(os.sched_getaffinity(0))
        first = available.index(shared_core() or available[0])
        two = [available[first], available[(first + 1) % len(available)]]
    steps = [steps[0], *(Step(s.thread, s.name, _timed(s.action, inside, two), s.round) for s in steps[1:-1]),
             steps[-1]]
    if variant in ("spread", "one-core", "two-cores"):
        Choreography(relay.names, one_core=variant == "one-core").run(steps)
    else:
        run_polled(relay.names, steps, prewake=variant == "prewake-spin")
    handoffs = len(steps) - 2
    seconds = relay.t1 - relay.t0
    ok = not relay_lost({"verified": relay.verified, "handoffs": handoffs, "mismatches": relay.mismatches,
                         "final": relay.final})
    return {"variant": variant, "threads": threads, "handoffs": handoffs, "all_verified": ok,
            "verified_per_s": relay.verified / seconds, "us_inside_step": inside[0] / handoffs * 1e6,
            "us_between_steps": (seconds - inside[0]) / handoffs * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=positive, default=8000, help="handoffs per run (>= 1)")
    parser.add_argument("--threads", type=counts(256), default=[1, 2, 8, 32], help="thread counts, e.g. 1,2,8,32")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if any(v not in VARIANTS for v in variants):
        parser.error(f"--variants: each among {', '.join(VARIANTS)}")
    if refuse_without_gpu("handoff_variants"):
        return 2
    from ctxlab.cuda.environment import capture

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity here: the pinned variants cannot run
        cores = 0
    rows = []
    for threads in args.threads:
        for variant in variants:
            if variant == "spin" and threads > max(cores, 1):
                continue  # every thread polls: more threads than cores only measures the scheduler
            if (variant == "one-core" and cores < 1) or (variant == "two-cores" and cores < 2):
                print(f"{threads:3d} threads  {variant:<13} not run: this process may run on {cores} core(s)")
                continue
            row = one(variant, threads, max(1, args.handoffs // threads))
            rows.append(row)
            print(f"{threads:3d} threads  {variant:<13} {row['verified_per_s']:8.0f} verified/s  "
                  f"inside {row['us_inside_step']:6.1f} us  between {row['us_between_steps']:6.1f} us"
                  + ("" if row["all_verified"] else "  NOT ALL VERIFIED"), flush=True)
    if args.json:
        from ctxlab.output import write_outputs

        report = {"environment": capture(0), "switch_interval_s": sys.getswitchinterval(), "runs": rows}
        write_outputs([(args.json, json.dumps(report, indent=1) + "\n")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
