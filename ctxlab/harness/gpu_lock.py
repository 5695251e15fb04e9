"""Scenarios share the GPU unless their figures need it alone.

Isolated scenarios run side by side (each in its own process, so contexts never
mix); a scenario whose measurement reads device-wide state (memory in use) or
times itself takes the GPU exclusively: it waits for the running ones and holds
new ones back until it ends. One lock per ctxlab process, shared by every lab
that ``ctxlab check`` runs.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager


class SharedExclusiveLock:
    """Many shared holders or one exclusive holder; exclusive requests go first."""
    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0  # exclusive requests queued: they go first

    @contextmanager
    def shared(self):
        """Hold the GPU alongside other shared holders."""
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self):
        """Hold the GPU alone: wait for the running holders, keep new ones out."""
        with self._cond:
            self._waiting += 1
            while self._exclusive or self._shared:
                self._cond.wait()
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def hold(self, exclusive: bool):
        """``exclusive()`` or ``shared()``."""
        return self.exclusive() if exclusive else self.shared()


GPU = SharedExclusiveLock()

# Child processes running at once, over every lab: more than the cores only makes each slower.
SLOTS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))

# The driver creates and destroys contexts one process at a time (benchmarks/context_contention.py: on an
# H200, N processes making their first contexts together take N times as long as one). Past a few children
# at once they only wait, and burn CPU waiting (labs/results/speed/check-profile-wave1-jobs*.txt, the four
# wave-1 labs on one H200: 4 children 23.4 s and 55 s of children's CPU, 8 children 24.9 s and 70 s,
# 16 children 28.0 s and 105 s; the five labs of that time, interop's heavier children among them: 4 children
# 49.3 s, 8 children 31.3 s, labs/results/check-profile-jobs4.txt and -jobs8.txt).
MOST_CHILDREN_BY_DEFAULT = 8


def default_children() -> int:
    """How many child processes run at once when ``--jobs`` is not given: the cores, at most 8."""
    return max(1, min(os.cpu_count() or 1, MOST_CHILDREN_BY_DEFAULT))
