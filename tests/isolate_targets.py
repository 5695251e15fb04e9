"""Targets for the isolation tests: run in child processes."""

import os
import signal
import time


def answer(x, y=1):
    return {"sum": x + y, "env": os.environ.get("CTXLAB_TEST_VAR"), "pid": os.getpid()}


def crash():
    print("about to crash", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def hang():
    print("hanging", flush=True)
    time.sleep(60)


def fail():
    raise ValueError("bad input in child")


def progress():
    from ctxlab.harness.isolate import report_progress

    for i in range(1, 4):
        report_progress(i, 3)
    return "done"


def imported():
    """Which of the heavy modules this child has imported before its target ran."""
    import sys

    return {name: name in sys.modules for name in ("cupy", "cuda.bindings", "ctxlab.harness.preload")}


def spin(seconds):
    """Busy for ``seconds`` of CPU."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return "spun"


def nap(seconds):
    """Waits ``seconds`` without using the CPU."""
    time.sleep(seconds)
    return "slept"


def hang_with_grandchild(pid_file):
    """Starts a program that would outlive this child, writes its pid, then hangs."""
    import subprocess

    grandchild = subprocess.Popen(["sleep", "120"])
    with open(pid_file, "w") as handle:
        handle.write(str(grandchild.pid))
    time.sleep(120)
