"""What each scenario took the last time ``check`` ran it on this machine, kept in ctxlab's cache folder.

With no ``--baseline``, check orders its jobs longest first by these figures: a node's health check runs
again and again, and from its second run the longest scenarios start first instead of last (the pool's
critical path). Only the order depends on them, never a verdict; a missing, unreadable or foreign file is
an empty one, and a cache folder that cannot be written costs nothing but the order.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable

from ctxlab.records.model import LabResult
from ctxlab.tracing.native import cache_dir

FILE = "check-timings.json"
MAX_BYTES = 4 << 20  # thousands of scenarios' figures; anything larger is not ours


def timings_path() -> str:
    """Where the figures are kept."""
    return os.path.join(cache_dir(), FILE)


def load_timings() -> dict[tuple[str, str], float]:
    """(lab, scenario) -> seconds, as the last checks here recorded them; {} when there are none."""
    try:
        with open(timings_path(), "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_BYTES else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    out = {}
    for lab, scenarios in data.items():
        if isinstance(scenarios, dict):
            out.update({(lab, name): float(s) for name, s in scenarios.items()
                        if isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s >= 0})
    return out


def save_timings(runs: Iterable[LabResult]) -> None:
    """Merge these runs' scenario timings into the kept figures (written whole, then renamed: a reader never
    sees half a file, and of two checks at once one's figures win)."""
    merged: dict[str, dict[str, float]] = {}
    for (lab, name), seconds in load_timings().items():
        merged.setdefault(lab, {})[name] = seconds
    for run in runs:
        merged.setdefault(run.lab, {}).update({name: round(float(s), 3) for name, s in run.timings.items()
                                               if isinstance(s, (int, float)) and math.isfinite(s)})
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".check-timings.", dir=cache_dir())
        with os.fdopen(fd, "w") as handle:
            json.dump(merged, handle, sort_keys=True)
        os.replace(temp, timings_path())
    except OSError:
        return
