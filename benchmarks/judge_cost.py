"""What judging costs the parent, per launch, on the CPU: a synthetic record of a CuPy-like launch loop (each
launch with the six small calls around it that a real CuPy launch makes: seven records a launch) judged by
every rule, with its time per launch, the parent's peak memory and a profile of where the time goes.

    python benchmarks/judge_cost.py [--launches N ...] [--profile FILE] [--json FILE]

The events are the tracer's (``tests.ordering_events``' vocabulary, the one the rules' CPU tests use); what is
timed is the judge alone (``Stream`` built and every rule run), not the decoding of the flight file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

from common import write_profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

AROUND = ("cuCtxGetCurrent", "cuCtxGetDevice", "cuStreamGetCtx", "cuFuncGetAttribute", "cuCtxGetCurrent",
          "cuCtxGetDevice")  # six small calls per launch, as CuPy's launch path makes them


def loop_events(launches: int) -> list[dict]:
    from tests.ordering_events import BASE, Calls

    c = Calls()
    c.primary_runtime()
    c.stream(0xA1)
    c.alloc(BASE)
    for i in range(launches):
        for name in AROUND:
            c.at(name)
        c.kernel(0xA1, BASE)
        if i % 100 == 99:
            c.at("cuStreamSynchronize", stream=0xA1)
    c.at("cuStreamSynchronize", stream=0xA1)
    c.at("cuMemFree_v2", ptr=BASE)
    return c.events


def judge(events: list[dict]) -> tuple[float, int]:
    from ctxlab.audit.engine import Stream
    from ctxlab.audit.rules.catalogue import judge_stream

    t = time.perf_counter()
    findings = judge_stream(Stream(events))
    return time.perf_counter() - t, len(findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--profile", default=None, help="write the profile of the largest run here")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for n in args.launches:
        events = loop_events(n)
        seconds, found = judge(events)
        rows.append({"launches": n, "records": len(events), "judge_seconds": round(seconds, 3),
                     "us_per_launch": round(seconds / n * 1e6, 2), "findings": found,
                     "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
        print(f"{n:>9,} launches ({len(events):,} records): judged in {seconds:.2f} s, "
              f"{seconds / n * 1e6:.1f} us/launch, {found} findings, peak RSS {rows[-1]['peak_rss_mib']} MiB")
    if args.profile:
        events = loop_events(max(args.launches))
        write_profile(args.profile, lambda: judge(events), sort="cumulative", lines=30)
    if args.json:
        with open(args.json, "w") as handle:
            environment = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count()}
            json.dump({"environment": environment, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
