import os
import signal
import tempfile
from pathlib import Path


def observe():
    from ctxlab.harness.recorder import Recorder

    rec = Recorder(scenario="only")
    rec.add("step", "seen", 1)
    return {"observations": rec.observations}


def skip_all(reason):
    """The scenario cannot run here, for ``reason`` (a structured skip, ctxlab.records.skips)."""
    from ctxlab.labs.common import skipped_output

    return skipped_output("only", reason)


def crash_on_second_call():
    """Answers, except the second call from this forkserver: then it dies by a signal.

    Calls may run at once, so each claims a number by creating its marker file exclusively."""
    base = Path(tempfile.gettempdir()) / f"ctxlab-flaky-{os.getppid()}"
    number = 1
    while True:
        try:
            os.close(os.open(f"{base}-{number}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            number += 1
    if number == 2:
        os.kill(os.getpid(), signal.SIGSEGV)
    return observe()


def nap(seconds: float = 0.3):
    """Observes after a pause: stands in for a scenario that takes time."""
    import time

    time.sleep(seconds)
    return observe()


# ---------------------------------------------------------------- shared children (harness.batch)

# What a stand-in scenario left in this process: the stand-in clean check reports it (a real child would
# have a context current or a sticky error).
LEFT: list[str] = []


def observe_pid(name: str):
    """Observes which process it ran in (the shared child's, or a fresh one's) and what it found left."""
    from ctxlab.harness.recorder import Recorder

    SEEN.append(name)
    rec = Recorder(scenario=name)
    rec.add("step", "seen", 1)
    rec.add("step", "pid", os.getpid())
    return {"observations": rec.observations}


def leave(name: str, what: str):
    """Observes, then leaves ``what`` behind in the process (as a scenario leaving a context current)."""
    LEFT.append(what)
    return observe_pid(name)


def crash_in_shared(name: str):
    """Dies by a signal in a shared child (one that ran a scenario before); observes in a fresh one."""
    if SEEN:
        os.kill(os.getpid(), signal.SIGSEGV)
    return observe_pid(name)


def slow_observe(name: str):
    """observe_pid after a second's pause."""
    import time

    time.sleep(1.0)
    return observe_pid(name)


def hang_in_shared(name: str):
    """Hangs in a shared child (one that ran a scenario before); observes in a fresh one."""
    import time

    if SEEN:
        time.sleep(60)
    return observe_pid(name)


# Scenarios this process ran (a fresh child starts with none: the module is imported in the child).
SEEN: list[str] = []


def stand_in_check(expected):
    """The clean-process check of the stand-in labs: what a scenario left, and a state that never changes."""
    return list(LEFT), "state"
