"""The one pass: each recorded event of a stream taken once, in time order, by the facts and both models together:
the state model's replay (``state.replay``: contexts, handles, allocations, failing calls) and the ordering model
(``ordering.Ordering.feed``: what happens before what). ``models(s)`` builds them for a stream, once, and keeps
them on it; ``model(s)`` and ``ordering(s)`` are the rules' ways in.

The facts (``facts.Facts``: which contexts are primary, green, created, destroyed, which streams and events
they own) are taken in the same pass; after it, the failing calls' contexts are classified by them and the
failures' grouping and the retried allocations are settled, over the failing calls alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ctxlab.audit.engine import NOT_CALLS, Stream
from ctxlab.audit.model.ordering import Ordering
from ctxlab.audit.model.state import Model, classify, group, replay, retried


@dataclass
class Models:
    """The state model and the ordering model of one stream, fed together."""

    stream: Stream
    state: Model
    order: Ordering = field(init=False)
    _runtime_device: dict = field(default_factory=dict)  # tid -> the device cudaSetDevice last chose there

    def __post_init__(self) -> None:
        self.order = Ordering(memory=self.state.memory)  # one allocation map for both

    def feed(self, events: Iterable[dict]) -> None:
        """Events of the stream, in its (time) order: each taken once by both models."""
        for e in events:
            self.state.facts.take(e, self.stream)
            self.order.feed(e)
            if e.get("domain") not in NOT_CALLS:
                self.state.saw(e)
                replay(self.state, self.stream, e, self._runtime_device)

    def finish(self) -> None:
        """After the last event: the facts' tables in order, the failing calls' contexts classified by them, the
        failing calls grouped into failures, the retried allocations marked."""
        self.state.facts.finish()
        classify(self.state)
        group(self.state, self.stream)
        retried(self.state, self.stream)
        self.stream.counts.update(self.state.summary())  # what the judging read, for the report's stats


def models(s: Stream) -> Models:
    """Both models of this stream (built in one pass, once, kept on it)."""
    known = getattr(s, "_models", None)
    if known is None:
        known = Models(s, Model())
        known.feed(s.events)
        known.finish()
        s._models = known  # type: ignore[attr-defined]
    return known


def model(s: Stream) -> Model:
    """The state model of this stream."""
    return models(s).state


def ordering(s: Stream) -> Ordering:
    """The ordering model of this stream."""
    return models(s).order
