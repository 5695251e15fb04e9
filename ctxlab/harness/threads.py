"""Named host threads that take steps in a fixed order and pass a baton.

CUDA keeps the current context per host thread, so a lab needs real, long-lived
threads with names, and a reproducible order in which they act. A
``Choreography`` starts one thread per name; step k runs on ``steps[k].thread``
and hands its result (the baton: a context handle, a token, anything) straight
to the thread of step k+1 through that thread's inbox. No sleeps: the order is
the list's. A step that raises stops the run with ``StepFailed``; a step that
never finishes stops it with ``HandoffTimeout`` naming the thread and step.

With ``one_core``, every thread of the choreography is pinned to the same CPU
core. Exactly one of them runs at a time, so nothing is lost, and each handoff
becomes a switch on a core whose caches already hold the steps' data and
whose next thread needs no wake-up from another core's idle state (migrate's
relay of 32 threads ran about 3x faster so on an H200 host: labs/migrate.md).
Which core: one of the process's allowed cores, chosen by its pid, so that
processes side by side take different ones. Each thread is pinned as it starts,
before its first step, so threads a step starts (the CUDA driver's own, when a
step makes a context) inherit the core. Where the system refuses the pinning,
the threads run where the scheduler puts them and ``core`` is None.
"""

from __future__ import annotations

import collections
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_STOP = object()


def shared_core() -> int | None:
    """The core a one-core choreography pins its threads to: one this process may run on, chosen by pid."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        return None
    return cores[os.getpid() % len(cores)] if cores else None


def pin_this_thread(core: int) -> bool:
    """Pin the calling thread to ``core``; False where the system has no affinity or refuses it."""
    try:
        os.sched_setaffinity(0, {core})  # pid 0: the calling thread
        return True
    except (AttributeError, OSError):
        return False


class Inbox:
    """One thread's inbox: its messages, and a pipe whose bytes ring for them.

    The thread waits in ``os.read`` and the sender rings with ``os.write``; both release the GIL, so the
    woken thread can take it at once. A ``queue.SimpleQueue``'s ``put`` keeps the GIL until the sender
    itself blocks, so a handoff cost two more switches (labs/migrate.md, "The relay against the native
    one")."""

    def __init__(self) -> None:
        self._wait, self._ring = os.pipe()
        self._messages: collections.deque = collections.deque()  # append and popleft are atomic

    def put(self, message: Any) -> None:
        """Leave ``message`` and ring for it."""
        self._messages.append(message)
        os.write(self._ring, b"\0")

    def get(self) -> Any:
        """Wait (the GIL released) for a ring, then take the message it rang for."""
        os.read(self._wait, 1)
        return self._messages.popleft()

    def close(self) -> None:
        """Close the pipe (only once no thread can wait on it)."""
        os.close(self._wait)
        os.close(self._ring)


@dataclass(frozen=True)
class Step:
    """One step of a choreography: which thread runs which function (it takes and returns the baton)."""
    thread: str
    name: str
    action: Callable[[Any], Any]  # baton in, baton out
    round: int | None = None


class HandoffTimeout(TimeoutError):
    """A step did not finish in time; names the thread and the step."""
    def __init__(self, thread: str, step: str, round: int | None, seconds: float):
        self.thread, self.step, self.round, self.seconds = thread, step, round, seconds
        where = f" (round {round})" if round is not None else ""
        super().__init__(f"thread {thread} did not finish step {step!r}{where} within {seconds:g} s")

    def __reduce__(self):
        return (HandoffTimeout, (self.thread, self.step, self.round, self.seconds))


class StepFailed(RuntimeError):
    """A step raised; names the thread and the step, and carries the exception."""
    def __init__(self, thread: str, step: str, round: int | None, error: BaseException):
        self.thread, self.step, self.round, self.error = thread, step, round, error
        where = f" (round {round})" if round is not None else ""
        super().__init__(f"thread {thread}, step {step!r}{where}: {type(error).__name__}: {error}")

    def __reduce__(self):
        return (StepFailed, (self.thread, self.step, self.round, self.error))


class Choreography:
    """Named host threads taking steps in a fixed order, handing a baton from one to the next."""
    def __init__(self, threads: Sequence[str], timeout: float = 30.0,
                 progress: Callable[[int, int], None] | None = None, progress_every: int = 256,
                 one_core: bool = False):
        if not threads:
            raise ValueError("a choreography needs at least one thread")
        if len(set(threads)) != len(threads):
            raise ValueError("thread names must be unique")
        self.names = list(threads)
        self.timeout = timeout
        self.progress = progress
        self.progress_every = max(1, progress_every)
        self.one_core = one_core
        self.core: int | None = None  # after a run: the core all its threads were pinned to, else None

    def run(self, steps: Sequence[Step], baton: Any = None) -> Any:
        """Run every step in order on its thread; return the last step's baton."""
        steps = list(steps)
        unknown = {s.thread for s in steps} - set(self.names)
        if unknown:
            raise ValueError(f"steps name threads that do not exist: {', '.join(sorted(unknown))}")
        self.core = None
        if not steps:
            return baton
        inboxes = {name: Inbox() for name in self.names}
        done: queue.SimpleQueue = queue.SimpleQueue()
        completed = [0]  # written by workers only: one step runs at a time
        core = shared_core() if self.one_core else None
        pinned: list[bool] = []

        def worker(name: str) -> None:
            if core is not None:
                pinned.append(pin_this_thread(core))
            inbox = inboxes[name]
            while True:
                message = inbox.get()
                if message is _STOP:
                    return
                index, value = message
                step = steps[index]
                try:
                    value = step.action(value)
                except BaseException as exc:  # handed to the caller, who decides
                    done.put(("error", index, exc))
                    continue
                completed[0] = index + 1
                if index + 1 == len(steps):
                    done.put(("done", index, value))
                else:
                    inboxes[steps[index + 1].thread].put((index + 1, value))

        workers = [threading.Thread(target=worker, args=(name,), name=name, daemon=True) for name in self.names]
        for thread in workers:
            thread.start()
        try:
            inboxes[steps[0].thread].put((0, baton))
            return self._wait(steps, done, completed)
        finally:
            for inbox in inboxes.values():
                inbox.put(_STOP)
            deadline = time.monotonic() + 1.0
            for thread in workers:
                thread.join(max(0.0, deadline - time.monotonic()))
            # Every thread pins itself before it reads its queue, so once all have ended all have answered.
            ended = not any(thread.is_alive() for thread in workers)
            self.core = core if ended and len(pinned) == len(workers) and all(pinned) else None
            if ended:  # a thread still stuck in a step keeps its pipe: a closed number could name another file
                for inbox in inboxes.values():
                    inbox.close()

    def _wait(self, steps, done, completed) -> Any:
        last_count, last_change = -1, time.monotonic()
        reported = 0
        while True:
            try:
                kind, index, value = done.get(timeout=min(0.1, self.timeout))
            except queue.Empty:
                count = completed[0]
                now = time.monotonic()
                if count != last_count:
                    last_count, last_change = count, now
                elif now - last_change > self.timeout:
                    stuck = steps[count]
                    raise HandoffTimeout(stuck.thread, stuck.name, stuck.round, self.timeout) from None
                if self.progress and count - reported >= self.progress_every:
                    reported = count
                    self.progress(count, len(steps))
                continue
            if kind == "error":
                step = steps[index]
                raise StepFailed(step.thread, step.name, step.round, value) from value
            if self.progress:
                self.progress(len(steps), len(steps))
            return value


def relay_steps(threads: Sequence[str], rounds: int, name: str, action: Callable[[Any], Any]) -> list[Step]:
    """Round-robin: every thread in turn, for ``rounds`` rounds, each taking the same action."""
    return [Step(thread, name, action, round=r) for r in range(rounds) for thread in threads]
