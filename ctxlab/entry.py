"""The ``ctxlab`` console command's entry point: a signal that arrives while the command line loads (its
imports take a fifth of a second) ends it quietly with the shell's status for that signal, as it would any
later: the first handlers are set here, before anything else is imported, and ``ctxlab.interrupts`` replaces
them once the command line runs."""

import signal as _signal

_EARLY = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


def _ended_while_loading(signum, _frame):  # nothing is written or started yet: nothing to clean up
    import os

    os._exit(128 + signum)


for _signum in _EARLY:
    if _signal.getsignal(_signum) is not _signal.SIG_IGN:  # nohup, a background job: kept ignored
        _signal.signal(_signum, _ended_while_loading)


def main() -> None:
    """Load the command line and run it."""
    from ctxlab.cli import main as run

    run()
