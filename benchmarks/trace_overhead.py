"""What the CUPTI tracer costs: many small CuPy kernel launches, untraced and traced.

    python benchmarks/trace_overhead.py [--launches N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def workload(cupy, a, launches: int) -> float:
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(launches):
        a += 1
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    import cupy

    from ctxlab.cuda.environment import capture
    from ctxlab.trace import Tracer

    a = cupy.zeros(1024, dtype=cupy.float32)
    workload(cupy, a, 200)  # warm: the kernel is compiled and loaded
    plain = [workload(cupy, a, args.launches) for _ in range(5)]
    traced, events = [], 0
    for _ in range(5):
        with Tracer() as tracer:
            traced.append(workload(cupy, a, args.launches))
        events = len(tracer.events)
    p, t = statistics.median(plain), statistics.median(traced)
    report = {"environment": capture(0), "launches": args.launches,
              "untraced_us_per_launch": p / args.launches * 1e6, "traced_us_per_launch": t / args.launches * 1e6,
              "ratio": t / p, "events_per_run": events}
    print(f"untraced {report['untraced_us_per_launch']:.2f} us/launch, traced {report['traced_us_per_launch']:.2f} "
          f"us/launch: {report['ratio']:.1f}x ({events} events per run of {args.launches} launches)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)


if __name__ == "__main__":
    main()
