"""Collects observations, each stamped with the thread that made it and the
context that thread saw."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ctxlab.records.model import Observation


def plain(value: Any) -> Any:
    """A JSON- and pickle-safe copy: CUDA handle objects become ints, other objects text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    try:
        return int(value)  # CUcontext, CUdeviceptr, CUstream ... convert to their handle
    except (TypeError, ValueError):
        return str(value)


ContextProbe = Callable[[], tuple[int | None, int | None]]  # -> (handle, id)


class Recorder:
    """Observations of one scenario, from any thread, with the trace events each step caused."""
    def __init__(self, context_probe: ContextProbe | None = None, scenario: str | None = None,
                 tracer=None, summarize: Callable[[list], list] | None = None):
        self._probe = context_probe
        self._tracer = tracer
        self._summarize = summarize or (lambda events: events)
        self._lock = threading.Lock()
        self.scenario = scenario
        self.observations: list[Observation] = []

    @property
    def tracer(self):
        """The tracer whose events are attached to steps, or None when untraced."""
        return self._tracer

    def discard_events(self) -> None:
        """Drop trace events of steps that are counted but not recorded (long relays)."""
        if self._tracer:
            self._tracer.drain()

    def take_events(self) -> list:
        """The trace events since the last observation: what the step just taken caused.

        Call it before probing state for an observation, and pass the result to
        ``add(events=...)``, so the probing calls are not taken for the step's."""
        return self._summarize(self._tracer.drain()) if self._tracer else []

    def add(self, step: str, what: str, value: Any = None, *, round: int | None = None,
            context: tuple[int | None, int | None] | None = None, scenario: str | None = None,
            events: list | None = None) -> Observation:
        """Record; the context is the one current on the calling thread unless given.

        With a tracer, the events since the previous observation (what this step
        caused) are attached; the recorder's own probing is left out.
        """
        if events is None:
            events = self.take_events()
        handle, ident = context if context is not None else (self._probe() if self._probe else (None, None))
        if self._tracer:
            self._tracer.drain()
        obs = Observation(step=step, thread=threading.current_thread().name, context_id=ident, what=what,
                          value=plain(value), context=handle, scenario=scenario or self.scenario, round=round,
                          events=tuple(plain(list(events))))
        with self._lock:
            self.observations.append(obs)
        return obs
