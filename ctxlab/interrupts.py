"""How a signal, or a reader that went away, ends a ctxlab command.

- SIGINT (Ctrl-C), SIGTERM and SIGHUP end it with the shell's status for that signal (130, 143, 129), quietly,
  once every ``finally`` on the way has run: temporary files removed, child processes ended.
- A reader of standard output (or standard error) that went away (``| head``) ends it quietly with 141, as
  SIGPIPE would end a C tool; what is left to write goes to /dev/null.
- A few steps must not be cut halfway (creating a temporary file and noting it, renaming several outputs into
  place, ending child processes): within ``deferred()`` a signal waits until the step is done.

The handlers are the command line's (``handling_signals``): a program that imports ctxlab keeps its own.
SIGINT still raises ``KeyboardInterrupt``, so code that passes Ctrl-C on to a child (trace, audit) keeps doing so.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_PIPE = 128 + signal.SIGPIPE  # 141
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Ended(SystemExit):
    """The command ends because of a signal or a vanished reader, with the shell's status for it. A SystemExit:
    ``except Exception`` lets it through, ``finally`` runs, and Python exits with the status and no message."""


class Terminated(Ended):
    """SIGTERM or SIGHUP arrived."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


class ReaderGone(Ended):
    """Standard output's reader went away (EPIPE)."""

    def __init__(self) -> None:
        super().__init__(EXIT_PIPE)


class _State(threading.local):
    depth = 0


_state = _State()
_pending: list[int] = []  # signals that arrived within deferred(), oldest first
_taken: set[int] = set()  # signals this command received (SIGINT: Click's "Aborted!" status is then 130)


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _taken.add(signum)
    if _state.depth:
        _pending.append(signum)
        return
    _raise_for(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within: a signal is held until the block ends, then acts (a step that must not be cut halfway)."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
        if not _state.depth and _pending and threading.current_thread() is threading.main_thread():
            signum = _pending[0]
            _pending.clear()
            _raise_for(signum)


def interrupted() -> bool:
    """True once SIGINT reached this command."""
    return signal.SIGINT in _taken


def install() -> dict[int, object]:
    """Put the command line's handlers in place; returns the former ones (for ``restore``). Outside the main
    thread nothing changes (only it may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    if any(signal.getsignal(signum) is _on_signal for signum in ENDING_SIGNALS):
        return {}  # already in place (python -m ctxlab puts them there before the command line loads)
    _taken.clear()
    _pending.clear()
    former: dict[int, object] = {}
    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # started with it ignored (nohup, a background job's SIGINT): keep it so
        former[signum] = signal.signal(signum, _on_signal)
    return former


def restore(former: dict[int, object]) -> None:
    """Put back the handlers ``install`` replaced."""
    for signum, handler in former.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # type: ignore[arg-type]


def _gone(fd: int) -> bool:
    """True when ``fd`` is a pipe or socket whose reader closed it."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _to_devnull(stream: object) -> bool:
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
        return True
    except (OSError, ValueError, AttributeError):
        return False


def reader_gone(stdout_known: bool = False) -> ReaderGone:
    """The ending for a vanished reader: standard output (or standard error, whichever lost its reader; standard
    output when ``stdout_known`` or when it cannot be told) onto /dev/null, so that nothing left to write, nor
    Python's flush at exit, fails again."""
    streams = [sys.stdout] if stdout_known else [s for s in (sys.stdout, sys.stderr) if _fd_gone(s)] or [sys.stdout]
    for stream in streams:
        _to_devnull(stream)
    return ReaderGone()


def _fd_gone(stream: object) -> bool:
    try:
        return _gone(stream.fileno())  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def handling_signals(process_exit: bool = False) -> Iterator[None]:
    """Run a command: the handlers above in place, and a signal or vanished reader ending it as the module says.
    ``process_exit``: the process ends with the command; from then on a signal does what it does by default
    (Python shuts down: a KeyboardInterrupt in an atexit hook would be a traceback, and a stuck exit must
    still yield to a second Ctrl-C)."""
    former = install()
    try:
        yield
    except KeyboardInterrupt:
        raise Ended(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        raise reader_gone() from None
    except SystemExit as exc:
        if type(exc) is SystemExit and exc.code == 1 and interrupted():  # Click's "Aborted!" after Ctrl-C
            raise Ended(EXIT_INTERRUPTED) from None
        raise
    finally:
        restore(former)
        if process_exit:  # (only where this call put the handlers in place: the outermost one)
            for signum in former:
                signal.signal(signum, signal.SIG_DFL)
