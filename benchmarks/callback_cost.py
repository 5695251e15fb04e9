"""What ctxlab's C callback costs per call on the CPU, without CUPTI: one call's enter and exit made many
times in C (``ctxlab_test_repeat``) into a real flight recording, timed per call. With launch_cost.py's
``cupti-dispatch`` (on a GPU: CUPTI calling a callback that returns at once) this splits what trace and the
audit add per call into CUPTI's part and the callback's.

    python benchmarks/callback_cost.py [--calls N] [--json FILE]

Needs a C compiler (the callback is built from C), not a GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

QUERY, KEPT = 11, 12  # callback ids of our own: a call keeping no parameter, and one keeping five


def measure(calls: int) -> list[dict]:
    """ns per call (enter and exit) for each kind of call, each timed over ``calls`` calls in C."""
    from ctxlab.tracing import native
    from tests.fake_cupti import Call, open_recording

    rows = []
    with tempfile.TemporaryDirectory(prefix="ctxlab-callback-cost.") as folder:
        lib, _files = open_recording(folder, {"driver": {str(QUERY): "cuCtxGetCurrent", str(KEPT): "cuLaunchKernel"}},
                                     3 * calls + 8)
        for offset in (0, 8, 16, 24, 32):  # five parameters read at the entry, as a launch's are
            lib.ctxlab_set_field(native.DOMAIN_DRIVER, KEPT, native.ENTER, offset, 0, 0, 8)
        lib.ctxlab_set_active(1)
        for what, cbid in (("a call keeping nothing (a query)", QUERY), ("a call keeping five parameters", KEPT)):
            c = Call(1)
            lib.ctxlab_test_repeat(native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.enter), ctypes.addressof(c.exit),
                                   1000)  # warm: pages of the recording, the thread's slot
            t = time.perf_counter_ns()
            lib.ctxlab_test_repeat(native.DOMAIN_DRIVER, cbid, ctypes.addressof(c.enter), ctypes.addressof(c.exit),
                                   calls)
            ns = (time.perf_counter_ns() - t) / calls
            rows.append({"call": what, "calls": calls, "ns_per_call": round(ns, 1)})
            print(f"{what}: {ns:.1f} ns a call (enter and exit), {calls:,} calls", flush=True)
        lib.ctxlab_set_active(0)
        lib.ctxlab_flight_close()
        lib.ctxlab_reset()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = measure(args.calls)
    if args.json:
        environment = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count(),
                       "processor": platform.processor()}
        with open(args.json, "w") as handle:
            json.dump({"environment": environment, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
