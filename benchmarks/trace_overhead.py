"""What the CUPTI tracer costs: many small CuPy kernel launches, untraced and traced, in one run.

    python benchmarks/trace_overhead.py [--launches N] [--repeats R] [--calls context|all] [--audit] [--json FILE]

Rounds alternate untraced and traced so drift (clocks, other work) hits both. The
traced time is the program's own loop while the tracer records; collecting the
records afterwards (the flush at the end, turning records into events) is
reported on its own line, per launch, because a program pays it once, at the end.
With ``--audit`` the tracer runs as ``ctxlab audit`` runs it (user stacks in its callbacks, its hooks, the
audit's extra callbacks) and the rules' judging is counted in the collecting time.
Without a GPU or CUPTI: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def workload(cupy, a, launches: int) -> float:
    cupy.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(launches):
        a += 1
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give a count of at least 1")
    return value


def measure(launches: int, repeats: int, calls: str, audit: bool = False) -> dict:
    from ctxlab.cuda.environment import capture, require_device
    from ctxlab.trace import Tracer, require_cupti

    options: dict = {}
    if audit:
        from ctxlab.audit.child.observe import tracer_options
        from ctxlab.audit.model.hooks import AuditHooks

        options = tracer_options(AuditHooks())  # as ctxlab audit traces: its launch and allocation hooks too

    require_device(0)
    require_cupti()
    import cupy

    a = cupy.zeros(1024, dtype=cupy.float32)
    workload(cupy, a, 200)  # warm: the kernel is compiled and loaded
    plain, traced, collect, events, stats = [], [], [], 0, {}
    for _ in range(repeats):
        plain.append(workload(cupy, a, launches))
        with Tracer(calls=calls, **options) as tracer:
            traced.append(workload(cupy, a, launches))
            t = time.perf_counter()
        if audit:
            from ctxlab.audit import judge

            stats["findings"] = len(judge(tracer.events))
        collect.append(time.perf_counter() - t)
        events, stats = len(tracer.events), {**stats, **tracer.stats}
    p, t = statistics.median(plain), statistics.median(traced)
    return {"environment": capture(0), "launches": launches, "repeats": repeats, "calls": calls, "audit": audit,
            "untraced_us_per_launch": p / launches * 1e6, "traced_us_per_launch": t / launches * 1e6,
            "ratio": t / p, "collect_us_per_launch": statistics.median(collect) / launches * 1e6,
            "untraced_seconds": plain, "traced_seconds": traced, "collect_seconds": collect,
            "events_per_run": events, "callbacks_per_run": stats.get("callbacks"),
            "records_per_run": stats.get("records"), "findings_per_run": stats.get("findings")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=positive, default=5000, help="kernel launches per timed run")
    parser.add_argument("--repeats", type=positive, default=5, help="untraced and traced runs (medians reported)")
    parser.add_argument("--calls", choices=("context", "all"), default="context",
                        help="the tracer's selection: context (default) or all (a Python callback per API call: "
                             "expect tens of times slower)")
    parser.add_argument("--audit", action="store_true",
                        help="trace as ctxlab audit does (user stacks, the audit's callbacks) and judge the events")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()

    from ctxlab.cuda.environment import BadDevice, NoGpu
    from ctxlab.trace import TraceUnavailable

    try:
        report = measure(args.launches, args.repeats, args.calls, audit=args.audit)
    except (NoGpu, BadDevice, TraceUnavailable, ImportError) as exc:
        print(f"trace_overhead: cannot measure here: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as exc:  # CuPy's own "no CUDA device" errors and the like
        if "CUDA" in type(exc).__name__ or "cuda" in str(exc).lower():
            print(f"trace_overhead: cannot measure here: {type(exc).__name__}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        raise
    mode = f"{args.calls}, audit" if args.audit else args.calls
    print(f"untraced {report['untraced_us_per_launch']:.2f} us/launch, traced ({mode}) "
          f"{report['traced_us_per_launch']:.2f} us/launch: {report['ratio']:.2f}x "
          f"({report['events_per_run']} events, {report['callbacks_per_run']} Python callbacks per run of "
          f"{args.launches} launches); collecting the records afterwards: "
          f"{report['collect_us_per_launch']:.2f} us/launch")
    if args.json:
        from ctxlab.output import write_output

        write_output(str(args.json), json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
