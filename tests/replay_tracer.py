"""A stand-in for the Tracer in the traced child (``ctxlab.tracing.supervise.TRACER``), for CPU tests of the
whole audit and trace path: the child runs the program as it would under CUPTI, but the calls it "records" are
a stream recorded earlier (``REPLAY_EVENTS``: a JSON file), handed to the parent as the child's noted events.
What the child asked of its tracer is written to ``REPLAY_OPTIONS`` for the test to check."""

from __future__ import annotations

import json
import os

EVENTS = "CTXLAB_REPLAY_EVENTS"
OPTIONS = "CTXLAB_REPLAY_OPTIONS"
INITIALISED = "CTXLAB_REPLAY_INITIALISED"
NAME = "tests.replay_tracer:ReplayTracer"


class ReplayTracer:
    """Records nothing; hands the recorded stream to the flight recorder's notes when it starts."""

    def __init__(self, calls="context", stacks=False, extra_callbacks=(), flight=None, **_):
        self.stacks, self.extra_callbacks, self.flight = stacks, tuple(extra_callbacks), flight
        self.events: list = []
        self.stats = {"records": 0, "callbacks": 0}
        self.cuda_initialised = os.environ.get(INITIALISED) == "1"
        if os.environ.get(OPTIONS):
            with open(os.environ[OPTIONS], "w") as handle:
                json.dump({"calls": calls, "stacks": stacks, "extra_callbacks": list(extra_callbacks),
                           "flight": flight is not None}, handle)

    def __enter__(self):
        if self.flight is not None:
            self.flight.open_notes()
        path = os.environ.get(EVENTS)
        if path:
            with open(path) as handle:
                for event in json.load(handle):
                    self.note(event)
        return self

    def note(self, event):
        if self.flight is not None:
            self.flight.note("event", {"event": event})

    def timestamp(self):
        return 0

    def __exit__(self, *exc):
        return None
