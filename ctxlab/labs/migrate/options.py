"""migrate's options: how many threads relay the context, how often, which kind of context."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.lab import LabOptions, OptionError, bounded, described
from ctxlab.labs.migrate.claims import CONTEXTS, MAX_HANDOFFS


@dataclass(frozen=True)
class MigrateOptions(LabOptions):
    """migrate's options: how many threads relay the context, how often, which kind of context."""

    threads: int = field(default=4, metadata=bounded(1, 1024, "Host threads that take turns holding the context.",
                                                     flags=("--threads", "-t")))
    rounds: int = field(default=3, metadata=bounded(1, 1_000_000, "How many times the context goes round all "
                                                                  "threads.", flags=("--rounds", "-r")))
    context: str = field(default="both", metadata=described(  # primary, created, green, both or all three
        "Which context travels: the runtime's primary one, one from cuCtxCreate, a green context (an SM partition, "
        "with its own scenarios), both (primary and created) or all three.", choices=CONTEXTS))
    timeout: float = field(default=30.0, metadata=bounded(  # one handoff's watchdog
        0.1, 3600, "Seconds a single handoff may take before the run stops, naming the thread and step (check's "
                   "--timeout is per scenario).", flags=("--handoff-timeout",), former="--timeout"))

    def __post_init__(self) -> None:
        super().__post_init__()  # ranges and choices, context's among them
        if self.threads * self.rounds > MAX_HANDOFFS:
            problem = f"= {self.threads * self.rounds:,} handoffs is more than {MAX_HANDOFFS:,}"
            raise OptionError(f"threads x rounds {problem}", cli=f"--threads x --rounds {problem}")
