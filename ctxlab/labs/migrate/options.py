"""migrate's options: how many threads relay the context, how often, which kind of context."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.lab import LabOptions, OptionError, bounded
from ctxlab.labs.migrate.claims import CONTEXTS, MAX_HANDOFFS


@dataclass(frozen=True)
class MigrateOptions(LabOptions):
    """migrate's options: how many threads relay the context, how often, which kind of context."""

    threads: int = field(default=4, metadata=bounded(1, 1024))
    rounds: int = field(default=3, metadata=bounded(1, 1_000_000))
    context: str = "both"  # primary, created, green, both (primary and created) or all three
    timeout: float = field(default=30.0, metadata=bounded(0.1, 3600))  # one handoff's watchdog

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context not in CONTEXTS:
            problem = f"{self.context!r} is not one of {', '.join(CONTEXTS)}"
            raise OptionError(f"context: {problem}", cli=f"--context: {problem}")
        if self.threads * self.rounds > MAX_HANDOFFS:
            problem = f"= {self.threads * self.rounds:,} handoffs is more than {MAX_HANDOFFS:,}"
            raise OptionError(f"threads x rounds {problem}", cli=f"--threads x --rounds {problem}")
