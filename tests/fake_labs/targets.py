import os
import signal
import tempfile
from pathlib import Path


def observe():
    from ctxlab.harness.recorder import Recorder

    rec = Recorder(scenario="only")
    rec.add("step", "seen", 1)
    return {"observations": rec.observations}


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
