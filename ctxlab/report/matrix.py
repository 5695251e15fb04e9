"""The merged matrix's model: what tells two runners apart, a column (one runner and device), and the matrix
of verdicts; ``report merge`` builds it (``ctxlab.report.merge.matrix``), its views render it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlab.records.evidence import normalize
from ctxlab.records.model import LabResult
from ctxlab.records.schema import FAILING


def runner_key(run: LabResult) -> tuple[str, str, str, str, str, str]:
    """(hostname, device index, GPU UUID or "", driver, runtime, ctxlab version): what tells two runners apart,
    and two versions of the judges (a verdict can differ because ctxlab changed, not the GPU)."""
    env = run.environment
    device = env.get("device", run.options.get("device"))
    uuid = env.get("gpu_uuid") or env.get("uuid") or ""
    return (str(env.get("hostname", "?")), "?" if device is None else str(device), str(uuid),
            str(env.get("driver_version", "?")), str(env.get("runtime_version", "?")),
            str(env.get("ctxlab", "not recorded")))


@dataclass
class Column:
    """One column of the matrix: a runner and device, where its results came from, and the rows it has."""

    key: tuple[str, ...]
    gpu: str
    origin: str
    copy: int = 1     # which of the columns sharing this key
    copies: int = 1
    rows: set = field(default_factory=set)

    def label(self) -> str:
        """The column's heading: runner, GPU, driver and runtime, and which duplicate it is when its key is shared."""
        host, device, uuid, driver, runtime, version = self.key
        gpu = f"{self.gpu} {uuid}".strip() if uuid else self.gpu
        text = f"{host} GPU {device} ({gpu}) / driver {driver} / runtime {runtime} / ctxlab {version}"
        if self.copies > 1:
            text += f" [duplicate key {self.copy} of {self.copies}, from {self.origin}]"
        return text


@dataclass
class Matrix:
    """Claims against runners: each cell is one column's verdict for one row; runners that could not run
    (environment-error records) are kept apart in ``unable`` as (file, run)."""

    columns: list[Column]
    rows: list[str]
    cells: dict  # (row, column index) -> verdict
    unable: list = field(default_factory=list)
    outcomes: dict = field(default_factory=dict)  # (row, column index) -> an observed claim's evidence, as recorded
    # Each distinct evidence normalised once (a fleet repeats the same few hundred texts on a thousand runners),
    # and what the views compute from the matrix once for all of them; the matrix is not changed once built.
    normal: dict = field(default_factory=dict, repr=False, compare=False)
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def verdicts(self, row: str) -> list[str]:
        """Every column's verdict for ``row``, "-" where a column has none."""
        by_row = self.memo.get("verdicts")
        if by_row is None:
            by_row = self.memo["verdicts"] = {}
            for (name, c), verdict in self.cells.items():
                by_row.setdefault(name, ["-"] * len(self.columns))[c] = verdict
        return by_row.get(row) or ["-"] * len(self.columns)

    def observed(self, row: str, column: int) -> str | None:
        """The evidence of an ``observed`` cell as drift compares it (``records.evidence.normalize``), or None."""
        text = self.outcomes.get((row, column))
        if text is None:
            return None
        done = self.normal.get(text)
        if done is None:
            done = self.normal[text] = normalize(text)
        return done

    def failing(self) -> list[tuple[str, Column, str]]:
        """Every (row, column, verdict) whose verdict fails the gate."""
        return [(row, self.columns[c], v) for (row, c), v in self.cells.items() if v in FAILING]
