"""The child processes that read a fleet's files for ``report merge``, and their whole life.

The parent hands each reader a chunk of files at a time over its own pipe and takes back what it read, so
the readers stay busy; the answers come back in the order given, the first refusal in that order raised.
The parent alone decides when the work ends, and ends it the same way whatever happened (done, a refused
file, Ctrl-C, SIGTERM, an error): every reader is killed and reaped before the call returns or raises.
A reader ignores SIGINT, SIGTERM and SIGHUP (Ctrl-C reaches a whole process group: the parent, not each
reader, is the one to stop), and on Linux dies with the parent even when that is killed outright
(PR_SET_PDEATHSIG): no reader outlives it, nor holds its standard output open.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ctxlab.interrupts import deferred
from ctxlab.records.model import ResultFileError

CHUNK = 8  # files per hand-over: fewer messages, and still the readers share the tail of the work
_PR_SET_PDEATHSIG = 1
_QUIET = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGKILL when its parent ends; and if the parent already ended, it ends now."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _serve(conn: Any, parent: int, read: Callable[[Any], Any]) -> None:
    """A reader: read each chunk it is handed, answer (index, True, what it read) or (index, False, the
    exception) for each file, until the pipe closes."""
    for signum in _QUIET:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _QUIET)  # blocked by the parent around the fork
    _die_with_parent(parent)
    while True:
        try:
            chunk = conn.recv()
        except EOFError:
            return
        answers = []
        for index, task in chunk:
            try:
                answers.append((index, True, read(task)))
            except Exception as exc:  # the parent raises it, in the order of the files
                answers.append((index, False, exc))
        conn.send(answers)


class _Reader:
    """One reader process and the parent's end of its pipe."""

    def __init__(self, context: Any, read: Callable[[Any], Any]):
        mine, theirs = context.Pipe(duplex=True)
        self.conn = mine
        self.process = context.Process(target=_serve, args=(theirs, os.getpid(), read), daemon=True,
                                       name="ctxlab-merge-reader")
        # Blocked until the reader ignores them: a Ctrl-C at the fork must not raise inside it.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _QUIET)
        try:
            self.process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            theirs.close()
        self.chunk: list[tuple[int, Any]] = []

    def end(self) -> None:
        """Kill and reap it (it holds nothing the parent still needs)."""
        try:
            self.process.kill()
        except (OSError, AttributeError, ValueError):
            pass
        self.process.join()
        self.conn.close()


def _first_refusal(answers: dict[int, tuple[bool, Any]]) -> int | None:
    """The index of the first refused file once every file before it is answered, else None."""
    refused = [index for index, (ok, _) in answers.items() if not ok]
    if not refused:
        return None
    first = min(refused)
    return first if all(index in answers for index in range(first)) else None


def read_in_children(read: Callable[[Any], Any], tasks: Sequence[Any], jobs: int, context: Any) -> list[Any]:
    """``[read(task) for task in tasks]``, read by up to ``jobs`` child processes; the exception of the first
    task in order that raised one (nothing after it is read further). Each task's first item names it (a
    path), for the error when a reader dies."""
    from multiprocessing.connection import wait

    sys.stdout.flush()  # a forked child must not write out a copy of what the parent had not flushed
    sys.stderr.flush()
    chunks = deque([list(enumerate(tasks))[start:start + CHUNK] for start in range(0, len(tasks), CHUNK)])
    answers: dict[int, tuple[bool, Any]] = {}
    readers: list[_Reader] = []
    try:
        while len(readers) < min(jobs, len(chunks)):
            with deferred():  # started means listed, so that the finally below ends it
                readers.append(_Reader(context, read))
        busy: dict[Any, _Reader] = {}
        for reader in readers:
            _hand_over(reader, chunks, busy)
        while busy and _first_refusal(answers) is None:  # once a refusal is first in order, nothing more
            for conn in wait(list(busy)):
                reader = busy.pop(conn)
                try:
                    for index, ok, value in reader.conn.recv():
                        answers[index] = (ok, value)
                except (EOFError, OSError):
                    raise _died(reader) from None
                _hand_over(reader, chunks, busy)
    finally:
        with deferred():  # a second Ctrl-C must not leave a reader behind (it would die with us, later)
            for reader in readers:
                reader.end()
    first = _first_refusal(answers)
    if first is not None:
        raise answers[first][1]
    return [answers[index][1] for index in range(len(tasks))]


def _hand_over(reader: _Reader, chunks: deque, busy: dict[Any, _Reader]) -> None:
    if chunks:
        reader.chunk = chunks.popleft()
        try:
            reader.conn.send(reader.chunk)
        except OSError:  # it died (a BrokenPipeError here is its pipe, not standard output's reader)
            raise _died(reader) from None
        busy[reader.conn] = reader


def _died(reader: _Reader) -> ResultFileError:
    reader.process.join(1)
    code = reader.process.exitcode
    how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
    first = reader.chunk[0][1][0] if reader.chunk else "a file"
    return ResultFileError(f"{first}: the process reading it (and up to {CHUNK - 1} files after it) died "
                           f"({how})")
