"""What the parent pays per launch after a program ends, from a real flight recording: the C callback (built
here, driven with CUPTI-shaped call data as its CPU tests drive it) records a CuPy-like launch loop (each
launch with the six small calls a CuPy launch makes: seven records a launch) into a mapped file; the parent
reads it back (``read_flight``: the records decoded into events) and judges it (``judge_run``: the stream, the
models, every rule). Each part is timed per launch, with the parent's peak memory.

    python benchmarks/flight_cost.py [--launches N ...] [--profile FILE] [--json FILE]

Needs a C compiler (the callback is built from C), not a GPU. What it leaves out: the child's own cost (see
launch_cost.py, on a GPU) and stacks (none are taken without a Python stack thread; a stack is decoded once per
stack id, so a loop's repeated line costs little).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import sys
import tempfile
import time

from common import write_profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (callback id, name): ids of our own, named in names.json as the parent reads them
LOOP = ((11, "cuCtxGetCurrent"), (12, "cuCtxGetDevice"), (13, "cuStreamGetCtx"), (14, "cuFuncGetAttribute"),
        (11, "cuCtxGetCurrent"), (12, "cuCtxGetDevice"), (15, "cuLaunchKernel"))
SYNC = (16, "cuStreamSynchronize")


def record(folder: str, launches: int) -> int:
    """The loop's records, written by the C callback into a flight recording in ``folder``: how many."""
    from ctxlab.tracing import native
    from tests.fake_cupti import Call, open_recording

    lib, _files = open_recording(folder, {"driver": {str(cbid): name for cbid, name in (*LOOP, SYNC)}},
                                 launches * len(LOOP) + launches // 100 + 8)
    lib.ctxlab_set_active(1)
    calls = {cbid: Call(1) for cbid, _ in (*LOOP, SYNC)}
    count = 0
    for i in range(launches):
        for cbid, _ in LOOP:
            c = calls[cbid]
            c.enter.correlation = c.exit.correlation = count + 1
            lib.ctxlab_callback(None, native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.enter))
            lib.ctxlab_callback(None, native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.exit))
            count += 1
        if i % 100 == 99:
            c = calls[SYNC[0]]
            lib.ctxlab_callback(None, native.DOMAIN_DRIVER, SYNC[0], ctypes.addressof(c.enter))
            lib.ctxlab_callback(None, native.DOMAIN_DRIVER, SYNC[0], ctypes.addressof(c.exit))
            count += 1
    lib.ctxlab_set_active(0)
    lib.ctxlab_flight_close()
    lib.ctxlab_reset()
    return count


def parent(folder: str) -> tuple[float, float, int]:
    """The parent's two steps over the recording: (read seconds, judge seconds, findings)."""
    from ctxlab.audit.run import judge_run
    from ctxlab.tracing.flight import read_flight
    from ctxlab.tracing.recorder import FlightFiles
    from ctxlab.tracing.supervise import Ending, Supervised

    t = time.perf_counter()
    flight = read_flight(FlightFiles(folder), fold_records=True)  # as the audit reads it
    read = time.perf_counter() - t
    t = time.perf_counter()
    result = judge_run("loop", Supervised(ending=Ending("exit", 0), flight=flight, result={}, notes=[]), [])
    return read, time.perf_counter() - t, len(result.findings)


def _judged_in_a_child(folder: str, n: int, profile: str | None) -> dict:
    """Read and judge the recording in a fresh process: its times and its own peak memory (the recording was
    written by another process, as the traced child writes it)."""
    import subprocess

    command = [sys.executable, os.path.abspath(__file__), "--judge", folder, str(n)]
    if profile:
        command += ["--profile", profile]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _judge_here(folder: str, n: int, profile: str | None) -> None:
    from ctxlab.audit.run import _prepare

    _prepare()  # what the audit imports while its child starts the program
    read, judged, found = parent(folder)
    if profile:
        write_profile(profile, lambda: parent(folder))
    print(json.dumps({"read_us_per_launch": round(read / n * 1e6, 2), "judge_us_per_launch": round(judged / n * 1e6, 2),
                      "us_per_launch": round((read + judged) / n * 1e6, 2), "findings": found,
                      "parent_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--profile", default=None, help="write the profile of the largest run here")
    parser.add_argument("--json", default=None)
    parser.add_argument("--record", nargs=2, metavar=("FOLDER", "LAUNCHES"), help=argparse.SUPPRESS)
    parser.add_argument("--judge", nargs=2, metavar=("FOLDER", "LAUNCHES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record:
        print(record(args.record[0], int(args.record[1])))
        return
    if args.judge:
        _judge_here(args.judge[0], int(args.judge[1]), args.profile)
        return
    rows = []
    for n in args.launches:
        with tempfile.TemporaryDirectory(prefix="ctxlab-flight-cost.") as folder:
            import subprocess

            t = time.perf_counter()
            records = int(subprocess.run([sys.executable, os.path.abspath(__file__), "--record", folder, str(n)],
                                         capture_output=True, text=True, check=True).stdout.split()[-1])
            recorded = time.perf_counter() - t
            from ctxlab.tracing.recorder import RECORDS

            size = os.path.getsize(os.path.join(folder, RECORDS))
            r = {"launches": n, "records": records, "recording_mib": round(size / 2**20, 1),
                 "record_seconds": round(recorded, 1),
                 **_judged_in_a_child(folder, n, args.profile if n == max(args.launches) else None)}
        rows.append(r)
        print(f"{n:>9,} launches ({records:,} records, {r['recording_mib']} MiB): read {r['read_us_per_launch']} + "
              f"judged {r['judge_us_per_launch']} = {r['us_per_launch']} us/launch, {r['findings']} findings, "
              f"the judging process's peak RSS {r['parent_peak_rss_mib']} MiB", flush=True)
    if args.json:
        environment = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count()}
        with open(args.json, "w") as handle:
            json.dump({"environment": environment, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
